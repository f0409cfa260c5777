"""llmbench's mock LLM server: behaves like Ollama or vLLM under load, without a GPU.

The names below are imported on first use, so that reading the mock's options
(llmbench.mock_server.cli, which every ``llmbench`` command line declares) does not load the engine
and the server."""

__all__ = ["PROFILES", "Engine", "MockCluster", "MockConfig", "MockProcess", "MockServer",
           "make_config"]

_WHERE = {"PROFILES": "engine", "Engine": "engine", "MockConfig": "engine",
          "MockCluster": "server", "MockProcess": "server", "MockServer": "server",
          "make_config": "server"}


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
