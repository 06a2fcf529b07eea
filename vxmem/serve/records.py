"""The request and response models of the memory served whole: one memory by id, a page of a
listing, a metadata update, a consolidation and a user's statistics.

Beside :mod:`vxmem.serve.schemas` (whose conventions they share: unknown fields refused, no
``true`` for a number) and built on its types.
"""

from __future__ import annotations

import base64
import inspect
import json
from typing import Any

from pydantic import BaseModel, Field, StrictBool

from ..memory.conversation import ConversationMemory
from .schemas import MAX_TURNS, Age, Count, MemoryOut, Session, Strict, Time, User

MAX_PAGE = MAX_TURNS  # memories of one page of a listing
DEFAULT_PAGE = 100
_CONSOLIDATE = {n: p.default for n, p in inspect.signature(ConversationMemory.consolidate).parameters.items()}


class PatchBody(Strict):
    metadata: dict[str, Any] = Field(description="keys to set, merged into the memory's own metadata (a key "
                                                 "set to null is stored as null)")
    user: User = None


class PageOut(BaseModel):
    memories: list[MemoryOut]
    next_cursor: str | None = Field(description="pass it as `cursor` for the next page; null: this is the last")


class ConsolidateBody(Strict):
    session: Session = None
    keep_recent: Count = Field(_CONSOLIDATE["keep_recent"], ge=0, le=MAX_TURNS,
                               description="the last this many turns stay as they are")
    older_than: Age = None
    batch_turns: Count = Field(_CONSOLIDATE["batch_turns"], ge=1, le=MAX_TURNS,
                               description="turns per call of the summarizer")
    delete: StrictBool = Field(_CONSOLIDATE["delete"], description="false keeps the turns, marked as consolidated")
    pinned: StrictBool = Field(_CONSOLIDATE["pinned"], description="store the facts pinned")
    now: Time = None
    user: User = None


class ConsolidateOut(BaseModel):
    session: str | None
    batches: int
    turns_consolidated: list[str] = Field(description="ids of the turns summarised into facts")
    turns_deleted: int
    facts: list[str] = Field(description="ids of the facts stored")
    turns_kept: list[str] = Field(description="ids of turns the summarizer found nothing in")
    batches_skipped: int
    tokens_before: int
    tokens_after: int
    completed: bool


class StatsOut(BaseModel):
    user: str
    memories: int
    kinds: dict[str, int] = Field(description="memories of each kind")
    sessions: int
    superseded: int = Field(description="memories a correction replaced (kept for their history)")
    oldest: str | None = Field(description="ISO-8601, UTC")
    newest: str | None = Field(description="ISO-8601, UTC")


def cursor_of(created: float, id: str) -> str:
    """The opaque cursor after the memory made at ``created`` with stored id ``id``."""
    return base64.urlsafe_b64encode(json.dumps([created, id]).encode("utf-8")).decode("ascii")


def read_cursor(cursor: str) -> tuple[float, str]:
    """What :func:`cursor_of` wrote; ``ValueError`` for anything else."""
    try:
        created, id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        if isinstance(created, (int, float)) and not isinstance(created, bool) and isinstance(id, str):
            return float(created), id
    except (ValueError, TypeError, UnicodeError):
        pass
    raise ValueError("cursor: not a cursor this server gave")
