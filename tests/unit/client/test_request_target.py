"""The request target the fast transport writes is the one aiohttp (through yarl) sends for
the same URL, so both transports ask the server for the same path."""

import pytest
from yarl import URL

from llmbench.client.fasthttp import _path_qs

URLS = ["http://h:1/v1/chat/completions", "http://h", "http://h/v1/",
        "http://h/v1/chat/completions?api-version=2024-01-01&x=a b",
        "https://h/a%20b/c d/é", "http://u:p@h:8/p?q=1#frag", "http://h/a/../b",
        "http://h/a/./b/.", "http://h/a/b/..", "http://h/v1/?q=%20x+y&z=é", "http://h/..",
        "http://h/a/..", "http://h/.", "http://h/50%/x", "http://h/%7e/%2f?q=%7E&r=%zz",
        "http://h/v1/chat?x=1&x=2&empty=", "http://[::1]:8000/v1/chat/completions",
        "http://h/ü/😀?k=ü v"]


@pytest.mark.parametrize("url", URLS)
def test_the_request_target_is_yarls(url: str) -> None:
    assert _path_qs(url) == URL(url).raw_path_qs
