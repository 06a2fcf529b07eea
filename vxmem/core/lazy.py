"""A package's names handed on from its modules, each module imported when a name is first asked for.

A package sets ``__getattr__ = handed_on(__name__, {"name": "module", ...})`` (PEP 562): importing
it loads none of those modules, and ``from package import name`` imports ``package.module`` then.
So one of its modules can be imported alone, and two packages whose modules import each other's
never meet half-made.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["handed_on"]


def handed_on(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``name`` read from ``package.<homes[name]>``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
