"""The two named values an argument may take besides a real one: ANY_SESSION and MEMORY_SETTING.

``None`` cannot say both "no value" and "whatever the memory is set to": a caller could
not ask for "no relevance floor" in one call while the memory has one. So "the memory's
setting" is :data:`MEMORY_SETTING`, the default of every ``recall()`` option that falls back
to the memory, and ``None`` keeps its plain meaning. "Every session" is
:data:`ANY_SESSION`, which ``recall()``, ``context()`` and ``forget()`` accept where
``session=None`` (the spec's spelling of every session) is accepted too; ``turns(None)``,
by contrast, is the session with no name.

Each is the one member of an enum, so that a type checker narrows ``x is MEMORY_SETTING``
and the value pickles and copies as itself; its repr is its name, as ``help()`` shows it.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["ANY_SESSION", "MEMORY_SETTING", "AnySession", "MemorySetting"]


class AnySession(enum.Enum):
    """The type of :data:`ANY_SESSION`."""

    ANY_SESSION = "ANY_SESSION"

    def __repr__(self) -> str:
        return self.value

    __str__ = __repr__


class MemorySetting(enum.Enum):
    """The type of :data:`MEMORY_SETTING`."""

    MEMORY_SETTING = "MEMORY_SETTING"

    def __repr__(self) -> str:
        return self.value

    __str__ = __repr__


ANY_SESSION: Final = AnySession.ANY_SESSION
"""Every session: ``recall(session=ANY_SESSION)`` searches them all (as ``session=None`` does)."""

MEMORY_SETTING: Final = MemorySetting.MEMORY_SETTING
"""The memory's own setting: ``recall(min_relevance=MEMORY_SETTING)`` (the default) uses the
floor the memory was made with; ``min_relevance=None`` uses none."""
