"""Memories that only ask: a turn whose every sentence is a question goes to its pool's floor.

A memory that only asks ("Which city has the best museums in Europe?") states nothing that
could answer a query, yet the embedding and lexical models match a question to other
questions: in plain chats, the user's own questions to the assistant took the first place
from the fact the query asked for. So after the second stage (or the first, where there is
none), such a memory gets the least relevance of the pool the blend ranks: it stays a
candidate, recency and feedback still move it, but it no longer starts ahead of the
statements. It is floored only then, so that a question matching the query still lifts the
turn after it (its answer) through the neighbour smoothing. A turn that says something and
then asks ("I moved to Porto. Have you been?") is a statement and keeps its score.

This is a property of language, not of a dataset: in long two-person conversations, about 1%
of the turns only ask, and none was ever the evidence a question needed; most turns that
end in a question state something first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["asks_only", "asking_mask", "at_floor"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLOSERS = "\"')]}»”’ "  # what may close a question after its mark: quotes, brackets


def asks_only(text: str) -> bool:
    """Whether every sentence of ``text`` is a question (ends in "?", closing quotes aside)."""
    parts = [p.rstrip(_CLOSERS) for p in _SENTENCE_END.split(text.strip())]
    parts = [p for p in parts if p]
    return bool(parts) and all(p.endswith("?") for p in parts)


def asking_mask(texts: Iterable[str]) -> np.ndarray:
    """:func:`asks_only` of each text, as a boolean array."""
    return np.array([asks_only(t) for t in texts], dtype=bool)


def at_floor(relevance: ArrayLike, asks: ArrayLike | None, valid: ArrayLike | None = None) -> np.ndarray:
    """``relevance`` with the slots that only ask set to the least relevance of the ``valid``
    slots (along the last axis); ``asks`` may hold NaN (a pool recorded without it: none ask)."""
    r = np.asarray(relevance, dtype=np.float64)
    if asks is None:
        return r
    mask = np.nan_to_num(np.asarray(asks, dtype=np.float64)) > 0
    if not mask.any():
        return r
    ok = np.isfinite(r) if valid is None else np.asarray(valid, dtype=bool) & np.isfinite(r)
    shape = np.broadcast_shapes(r.shape, ok.shape, mask.shape)
    r, ok, mask = (np.broadcast_to(x, shape) for x in (r, ok, mask))
    lo = np.where(ok, r, np.inf).min(axis=-1, keepdims=True, initial=np.inf)
    return np.where(mask & ok & np.isfinite(lo), lo, r)
