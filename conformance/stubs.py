"""An import hook that lends empty stand-in modules for third-party packages the runtime
imports but never uses on the paths the recorder drives (aiohttp, langgraph, langchain_core, …).

Only modules that cannot be found for real are stood in for: the runtime's own package and
every installed library load normally. A stand-in answers any attribute with another stand-in,
which can be called, subclassed, used as a decorator or as a type annotation; code that really
*uses* one fails loudly, which is why the recorder first runs the runtime's own unit tests for
these modules.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

#: Packages always loaded for real (a stand-in for them would hide a broken harness).
REAL_PREFIXES = ("kdcube_ai_app", "policy", "conformance", "yaml", "pydantic", "pytest", "_pytest")
#: Optional packages that installed libraries probe with ``try: import …`` and then read a version
#: from (requests: ``chardet.__version__``; redis: ``hiredis.__version__``): they stay missing.
PROBED_OPTIONAL = frozenset({"chardet", "hiredis"})


class _Anything(type):
    """A class whose attributes, calls and items are all stand-ins."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        # Used as a decorator: hand the decorated function back unchanged.
        if (
            len(args) == 1
            and not kwargs
            and callable(args[0])
            and not isinstance(args[0], _Anything)
        ):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())

    def __bool__(cls) -> bool:
        return False


class _Base(metaclass=_Anything):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _make("result")


def _make(name: str) -> Any:
    return _Anything(name.rsplit(".", 1)[-1] or "Stub", (_Base,), {"__module__": "stand_in"})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _make(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []  # a package, so submodules import too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class StandInFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: only asked after every real finder said no."""

    def __init__(self) -> None:
        self.stood_in: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".", 1)[0]
        # Standard-library and private modules that are missing on this platform (``_winreg``)
        # must stay missing: code probes for them with try/except ImportError.
        if top.startswith(REAL_PREFIXES) or top in sys.stdlib_module_names or top.startswith("_"):
            return None
        if top in PROBED_OPTIONAL:
            return None
        self.stood_in.add(top)
        return importlib.machinery.ModuleSpec(fullname, _StandInLoader(), is_package=True)


FINDER = StandInFinder()


def install(kdcube_src: str) -> None:
    """Put the runtime's package root first on ``sys.path`` and the stand-in finder last."""
    if kdcube_src not in sys.path:
        sys.path.insert(0, kdcube_src)
    if FINDER not in sys.meta_path:
        sys.meta_path.append(FINDER)
