"""A user's own object named on the command line as ``package.module:attr`` (a judge, a memory
system to compare): imported at once, so that a typo is an error before any work."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["load_object"]


def load_object(spec: str, what: str) -> Any:
    """The object ``spec`` (``package.module:attr``, ``attr`` may be dotted) names. ``ValueError``
    naming ``what`` the object is for, when the module cannot be imported or has no such attribute."""
    module, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"{what} {spec!r}: cannot import {module!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what} {spec!r}: {module!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj
