"""An engine folder's optional module (`loglines`, `failures`), found by listing the folder as the engine registry
does, so the doctor names no engine. A module that is absent is None; one that fails to import raises."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def engine_module(package: ModuleType, name: str) -> ModuleType | None:
    """`<engine package>.<name>`, or None when that engine's folder has no such module."""
    if not any(info.name == name for info in pkgutil.iter_modules(package.__path__)):
        return None
    return importlib.import_module(f"{package.__name__}.{name}")


def modules_named(name: str) -> list[ModuleType]:
    """`<engine>.<name>` of every engine folder that has one, in the registry's (folder name) order."""
    from specbench.engines.base import _packages

    return [m for m in (engine_module(pkg, name) for pkg in _packages()) if m is not None]

