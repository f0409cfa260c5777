"""Deprecated: the mock now lives inside llmbench, as ``llmbench.mock_server``.

``from mock_server import MockConfig, MockServer, MockProcess``, ``from mock_server.engine import
...`` and ``python -m mock_server`` keep working (the same modules and classes, not copies) and
warn with a DeprecationWarning; write ``llmbench.mock_server`` instead. This shim will be removed
in a later release (README.md, "The mock as a library").
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any

warnings.warn("the mock_server package is deprecated: import llmbench.mock_server instead "
              "(python -m llmbench.mock_server, or llmbench mock)", DeprecationWarning,
              stacklevel=2)

_NEW = "llmbench.mock_server"
__all__ = ["PROFILES", "Engine", "MockCluster", "MockConfig", "MockProcess", "MockServer",
           "make_config"]


def __getattr__(name: str) -> Any:
    value = getattr(importlib.import_module(_NEW), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``mock_server.X`` is ``llmbench.mock_server.X``: the very module object, so a class
    imported by either name is one class."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.startswith(__name__ + ".") and importlib.util.find_spec(
                _NEW + fullname[len(__name__):]) is not None:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: Any) -> Any:
        return importlib.import_module(_NEW + spec.name[len(__name__):])

    def exec_module(self, module: Any) -> None:
        """Nothing to run: the module ran when llmbench.mock_server imported it."""


# after the path finders, so this folder's own __main__.py is found as a file
if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.append(_Alias())
