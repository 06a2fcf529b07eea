"""The memory's bookkeeping: what a new memory is stamped with, turn numbers, feedback events.

Small helpers :class:`~vxmem.memory.conversation.ConversationMemory`'s verbs share: a new memory's id
and reserved keys, the session's turn counter (claimed in the caller's transaction), a
memory found by id, and one feedback event added to a memory's metadata.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..core.clock import expiry
from ..core.errors import ConflictError
from ..core.keys import K_EXPIRES, K_FEEDBACK, K_FEEDBACK_FOLDED, K_KIND, K_ROLE, K_SESSION, K_TS, KIND_TURN
from ..ranking import scoring
from ..store.seam import MemoryView, MemoryWrites, check_id, session_key, session_name

# A memory keeps at most this many feedback events; past it all but the newest half are folded
# into one decayed sum (``_vx_feedback_folded``, with their log), which leaves the score as it was.
FEEDBACK_EVENTS_KEPT = 64


def new_memory_id() -> str:
    """A random UUID4 as 32 hex digits (``uuid.uuid4().hex``, without making the UUID object:
    a fifth of the time)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return b.hex()


def refuse_taken(m: MemoryView, id: str) -> None:
    if id in m.pos_of_id:
        raise ConflictError(f"id already exists: {id!r}")


def stamp(kind: str, session: str | None, role: str, ts: float, ttl: float | None) -> dict[str, Any]:
    """The reserved keys every new memory carries."""
    meta: dict[str, Any] = {K_KIND: kind, K_SESSION: session, K_ROLE: role, K_TS: ts}
    end = expiry(ts, ttl)
    if end is not None:
        meta[K_EXPIRES] = end
    return meta


def claim_turn(m: MemoryView, tx: MemoryWrites, session: Any, turn: int | None) -> int:
    """The next turn number of ``session``, or ``turn`` if it is not below it.

    The counter lives in the database and only grows, so numbers are never reused:
    not after reopening, forgetting or consolidating (an explicit ``turn`` below the
    counter is refused, as is one a live turn holds). It moves in the caller's
    transaction, so a call that fails consumes nothing.
    """
    name = "turn:" + session_key(session)  # json.dumps(session), cached
    if turn is None:
        return tx.take_counter(name)
    said = session_name(session)
    if np.any(m.turn[m.select(session, (KIND_TURN,))] == turn):
        raise ConflictError(f"turn {turn} of session {said!r} is already held by a live turn")
    counter = tx.counter(name)
    if turn < counter:
        raise ConflictError(f"turn {turn} of session {said!r} is below the session's next turn number "
                         f"({counter}): turn numbers are never reused")
    tx.raise_counter(name, turn + 1)
    return turn


def memory_pos(m: MemoryView, id: Any) -> int:
    check_id(id)
    p = m.memory_position(id)
    if p is None:
        raise KeyError(f"no memory with id {id!r}")
    return p


def record_feedback(meta: dict[str, Any], outcome: str, ts: float, half_life_days: float) -> None:
    """Add one ``[outcome, ts]`` event to ``meta``; past :data:`FEEDBACK_EVENTS_KEPT`
    events, the older half is folded into ``_vx_feedback_folded`` (see
    :func:`vxmem.ranking.scoring.fold_feedback`), so a much-graded memory stays cheap to rank."""
    events = list(meta.get(K_FEEDBACK) or []) + [[outcome, ts]]
    if len(events) > FEEDBACK_EVENTS_KEPT:
        events, meta[K_FEEDBACK_FOLDED] = scoring.fold_feedback(
            events, meta.get(K_FEEDBACK_FOLDED), half_life_days, keep=FEEDBACK_EVENTS_KEPT // 2)
    meta[K_FEEDBACK] = events
