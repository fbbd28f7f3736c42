"""A package's re-exported names, each loaded from its own module on first use (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(package: str, home: dict[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and `__getattr__` for `package`, whose name N lives in module `package.home[N]`."""

    def getattr_(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return sorted(home), getattr_
