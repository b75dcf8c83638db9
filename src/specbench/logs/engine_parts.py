"""An engine folder's optional module (`loglines`, `logrules`), found by listing the folder as the engine registry
does, so the log readers name no engine. A module that is absent is None; one that fails to import raises."""

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
    from specbench.engines.base import _packages  # here: the engine packages import the log readers

    return [m for m in (engine_module(pkg, name) for pkg in _packages()) if m is not None]


def module_of(engine: str | None, name: str) -> ModuleType | None:
    """`specbench.engines.<engine>.<name>`, or None when there is no such engine folder or module."""
    from specbench.engines.base import _packages

    package = next((p for p in _packages() if p.__name__.rsplit(".", 1)[-1] == engine), None)
    return engine_module(package, name) if package is not None else None
