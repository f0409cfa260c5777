"""The error of a server's /tokenize that cannot be used: its own module, so that catching it
(workload, tokenizer, traces) does not import server_tokenizer's HTTP client, and
server_tokenizer and tokenizer do not import each other."""


class ServerTokenizeError(Exception):
    """The server's /tokenize cannot be used; the message is one line for the user."""
