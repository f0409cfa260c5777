"""llmbench's mock LLM server: behaves like Ollama or vLLM under load, without a GPU."""

from .engine import PROFILES, Engine, MockConfig
from .server import MockCluster, MockProcess, MockServer, make_config

__all__ = ["PROFILES", "Engine", "MockCluster", "MockConfig", "MockProcess", "MockServer",
           "make_config"]
