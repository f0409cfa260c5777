"""llmbench: load-test LLM chat servers and say why they stopped keeping up.

The Python API (llmbench/api.py), imported on first use so that ``import llmbench`` and the
command line start as fast as before::

    import llmbench
    run = llmbench.run(url="http://localhost:8000/v1", model="M", concurrency=32, requests=500)
    run.summary.ttft.p50, run.summary.output_throughput, run.path
"""

from llmbench.version import __version__

__all__ = [
    "run", "ramp", "sweep", "probe", "load_run", "mock",
    "Run", "Step", "Summary", "Metric", "Verdict",
    "LlmbenchError", "UsageError", "ServerUnreachable", "ServerRefused", "CommandFailed",
    "RunFailed",
    "__version__",
]

_WHERE = {
    **dict.fromkeys(("run", "ramp", "sweep", "probe", "load_run", "mock"), "llmbench.api"),
    **dict.fromkeys(("Run", "Step", "Summary", "Metric", "Verdict"), "llmbench.results.schema"),
    **dict.fromkeys(("LlmbenchError", "UsageError", "ServerUnreachable", "ServerRefused",
                     "CommandFailed", "RunFailed"), "llmbench.errors"),
}


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'llmbench' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(where), name)
    if where == "llmbench.results.schema":
        importlib.import_module("llmbench.report.notebook")   # results draw in Jupyter
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
