"""What llmbench tells a user it could not reach: a proxy's 407/401 is a credentials problem; the
same digits inside a port or an address are not (a random port 40783 once picked the wrong
hint in CI)."""

import pytest

from llmbench.client.netconfig import resolve, unreachable_hint

ENV = {"HTTP_PROXY": "http://proxy.corp:3128", "NO_PROXY": "127.0.0.0/8"}


@pytest.mark.parametrize("port", [40783, 40100, 14070, 4017])
def test_digits_in_a_port_are_not_a_status(port):
    net = resolve(f"http://127.0.0.1:{port}/v1", env=ENV)
    err = f"Cannot connect to host 127.0.0.1:{port} ssl:default [Connect call failed ('127.0.0.1', {port})]"
    hint = unreachable_hint(net, err)
    assert "take it out of NO_PROXY" in hint and "credentials" not in hint


@pytest.mark.parametrize("err", ["proxy answered 407 Proxy Authentication Required",
                                 "HTTP 407", "proxy said 401 Unauthorized"])
def test_a_proxy_asking_for_credentials_is_named(err):
    net = resolve("http://api.example.com/v1", env=ENV)
    assert unreachable_hint(net, err).startswith("Check the proxy and its credentials")
