"""A server llmbench starts (sweep --serve, --before) gets the user's environment, not the one
BLAS thread the command line keeps for itself (llmbench/cli/__init__.py)."""

from llmbench.servers.managed import their_environ


def test_the_blas_setting_llmbench_made_is_not_passed_on(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("LLMBENCH_SET_OPENBLAS", "1")
    monkeypatch.setenv("KEEP_ME", "yes")
    env = their_environ()
    assert "OPENBLAS_NUM_THREADS" not in env and "LLMBENCH_SET_OPENBLAS" not in env
    assert env["KEEP_ME"] == "yes"


def test_a_blas_setting_the_user_made_stays(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    monkeypatch.delenv("LLMBENCH_SET_OPENBLAS", raising=False)
    assert their_environ()["OPENBLAS_NUM_THREADS"] == "3"
