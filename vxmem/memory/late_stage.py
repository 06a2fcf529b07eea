"""The late-interaction stage's two readings of a turn, and the context a turn is read in.

A reply ("yes, last Tuesday") says little without what it answers, so a turn is also read
after the end of the turn just before it in its session (:func:`in_context`: that turn's last
:data:`CONTEXT_WORDS` words, where the question a reply answers sits; a long turn would cost
time and push the memory's own words out of a model's window). The late-interaction score
(:func:`late_scores`) mixes, half and half, MaxSim against the turn's own token vectors and
against those of the turn read in context; the accurate preset's cross-encoder reads the same
context. Both sets of token vectors are stored at write time (:func:`write_contexts` says
which context a write reads each turn in); a turn whose stored context no longer matches (the
turn before it was forgotten, or another writer numbered turns meanwhile) is read in its
current context, encoded when a recall needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.keys import KIND_TURN
from ..models.late import LateInteraction, TokenBits, maxsim
from ..store.seam import MemoryStore, MemoryView, session_key

CONTEXT_WORDS = 24  # how much of the turn before a memory is read with it
CONTEXT_SHARE = 0.5  # the late-interaction score's share that reads each turn in its context

__all__ = ["CONTEXT_WORDS", "CONTEXT_SHARE", "in_context", "context_text", "turns_before", "late_scores",
           "write_contexts"]


def context_text(before: str | None, text: str) -> str:
    """``text`` read after the end of ``before`` (None: as it is)."""
    if before is None:
        return text
    words = before.split()
    tail = before if len(words) <= CONTEXT_WORDS else " ".join(words[-CONTEXT_WORDS:])
    return f"{tail}\n{text}"


def turns_before(m: MemoryView, positions: np.ndarray) -> np.ndarray:
    """The position of the live turn just before each of ``positions`` in its session (its
    turn number minus one), -1 where there is none."""
    return np.array([m.turn_at(int(m.session[p]), float(m.turn[p]) - 1.0)
                     for p in np.asarray(positions, dtype=np.int64).tolist()], dtype=np.int64)


def in_context(m: MemoryView, positions: np.ndarray) -> list[str]:
    """Each memory's text read after the end of the turn just before it, when there is one."""
    before = turns_before(m, positions)
    return [context_text(None if b < 0 else m.texts[b], m.texts[p])
            for p, b in zip(np.asarray(positions).tolist(), before.tolist())]


def late_scores(store: MemoryStore, m: MemoryView, late: LateInteraction, query: str,
                positions: np.ndarray) -> np.ndarray:
    """The late-interaction score of the memories at ``positions``: MaxSim of the query's
    token vectors against each one's own and against its in-context ones, mixed
    :data:`CONTEXT_SHARE` to the context; the stored vectors where they are, the others
    encoded now. Call it inside ``store.locked()``."""
    plist = np.asarray(positions, dtype=np.int64).tolist()
    own = store.late_vectors(positions, late.name)
    _fill(own, late, lambda i: m.texts[plist[i]])
    before = turns_before(m, positions)
    read = list(own)  # a memory with no turn before it reads as itself
    has = np.flatnonzero(before >= 0)
    if has.size:
        stored = store.late_context_vectors(positions[has], late.name)
        for i, got, want in zip(has.tolist(), stored, m.rowid[before[has]].tolist()):
            read[i] = got[1] if got is not None and got[0] == want else None
        _fill(read, late, lambda i: context_text(m.texts[int(before[i])], m.texts[plist[i]]))
    both = maxsim(late.query(query), [b for b in own + read if b is not None])  # one pass, the query packed once
    n = len(plist)
    return (1 - CONTEXT_SHARE) * both[:n] + CONTEXT_SHARE * both[n:]


def _fill(bits: list[TokenBits | None], late: LateInteraction, text: Callable[[int], str]) -> None:
    """Encode ``text(i)`` where ``bits[i]`` is None, in place."""
    missing = [i for i, b in enumerate(bits) if b is None]
    for i, b in zip(missing, late.encode([text(i) for i in missing]) if missing else []):
        bits[i] = b


def write_contexts(m: MemoryView, drafts: Sequence[Any]) -> list[str | None]:
    """The text of the turn each draft of a write will follow in its session (None: none,
    or not a turn), as the collection stands: the draft before it in the same write, else
    the session's live turn numbered one below its own (given), else its last live turn.
    The write checks each against the turn it really follows before storing what it read."""
    out: list[str | None] = []
    last: dict[str, tuple[float, str]] = {}  # session key -> (number, text) of this write's latest turn
    for d in drafts:
        if d.kind != KIND_TURN:
            out.append(None)
            continue
        key = session_key(d.at)
        prev: str | None
        if key in last and (d.turn is None or d.turn == last[key][0] + 1):
            prev, number = last[key][1], last[key][0] + 1
        else:
            prev, number = _stored_before(m, d.at, d.turn)
        out.append(prev)
        last[key] = (float(d.turn) if d.turn is not None else number, d.text)
    return out


def _stored_before(m: MemoryView, session: Any, turn: int | None) -> tuple[str | None, float]:
    """The text of the live turn a turn of ``session`` numbered ``turn`` (None: the next)
    follows, and that turn's number as far as the view can tell."""
    code = m.session_code(session)
    if turn is not None:
        p = m.turn_at(code, float(turn) - 1.0)
        return (None if p < 0 else m.texts[p]), float(turn)
    live = m.select(session, (KIND_TURN,))
    if not live.size:
        return None, 0.0
    p = int(live[np.nanargmax(m.turn[live])])
    return m.texts[p], float(m.turn[p]) + 1.0
