"""The server tokenizer's plain connection names its errors as http.client does, with
http.client's words: a user reads "IncompleteRead(50 bytes read, 10 more expected)", never the
partial body itself."""

import http.client

import pytest

from llmbench.workload import server_tokenizer as st


@pytest.mark.parametrize("args", [(b"x" * 50, 10), (b"",), (b"abc",), (b"y" * 100_000, 1)])
def test_incomplete_read_is_worded_as_http_clients(args):
    assert str(st.IncompleteRead(*args)) == str(http.client.IncompleteRead(*args))
    assert len(str(st.IncompleteRead(*args))) < 80


def test_line_too_long_is_worded_as_http_clients():
    assert str(st.LineTooLong("header line")) == str(http.client.LineTooLong("header line"))
    assert issubclass(st.RemoteDisconnected, ConnectionResetError)
