"""A deep second stage's arithmetic, shared by ``recall()`` and the sweep engine.

A cheap second stage (late interaction) reads the first stage's ``D`` most relevant
candidates, not 20, so evidence the first stage ranks 60th still counts. Around its score:

1. **Neighbour smoothing of the first stage.** A turn scores at least ``0.7 x`` the score of
   the turn just before or after it in the same session (when that one is in the pool):
   the answer to a question often sits beside the turn that matches its words.
2. **Fusion.** The stage's score and the smoothed first-stage score, each min-max
   normalised over the ``D`` candidates read, mixed ``0.6 / 0.4``, then smoothed again
   (``0.5``) among the candidates read.
3. **What the blend sees.** Only the ``max(2 x limit, 20)`` best fused candidates.
4. **A cascade** (the accurate preset) then blends those as the default would, and runs a
   cross-encoder over the ``limit`` best only (:func:`cascade_slots`): it reorders what the
   default returns and never changes which memories those are. Its score is mixed with the
   fused one, each min-max normalised over them, ``0.5 / 0.5``, and they are blended again.
   The cross-encoder reads each turn after the end of the turn before it in its session: a
   reply ("yes, last Tuesday") says little without what it answers.

Every function takes arrays whose last axis is the pool's slots (leading axes broadcast: a
sweep's grid and probes) and a ``valid`` mask of the slots that count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import scoring

SMOOTH_FIRST = 0.7  # a first-stage score reaches this share of its neighbour's
SMOOTH_FUSED = 0.5  # a fused score reaches this share of its neighbour's
STAGE_SHARE = 0.6  # the second stage's share of the fused score
CASCADE_SHARE = 0.5  # in a cascade, the final stage's share of the relevance the blend sees
_TURN_SPAN = 2.0**40  # neighbour keys: local session index x this + turn number

__all__ = ["SMOOTH_FIRST", "SMOOTH_FUSED", "STAGE_SHARE", "neighbour_keys", "neighbour_slots", "masked_minmax",
           "smooth", "read_slots", "fused_slots", "CASCADE_SHARE", "cascade_relevance", "cascade_slots"]


def neighbour_keys(sessions: Sequence[object], turns: np.ndarray) -> np.ndarray:
    """Each slot's neighbour key: two slots are neighbours when their keys differ by exactly 1
    (same session, consecutive turn numbers); NaN for a memory that is not a numbered turn."""
    turns = np.asarray(turns, dtype=np.float64)
    if not turns.size:
        return np.zeros(0)
    _, local = np.unique(np.array([repr(s) for s in sessions], dtype=object), return_inverse=True)
    ok = np.isfinite(turns) & (turns >= 0) & (turns < _TURN_SPAN)
    return np.where(ok, local.astype(np.float64) * _TURN_SPAN + np.where(ok, turns, 0.0), np.nan)


def neighbour_slots(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(prev, next)``: for each slot the slot holding the turn just before / after it in
    its session, -1 where the pool holds none."""
    keys = np.asarray(keys, dtype=np.float64)
    prev = np.full(keys.shape, -1, dtype=np.int64)
    nxt = np.full(keys.shape, -1, dtype=np.int64)
    if keys.shape[-1] < 2:
        return prev, nxt
    order = np.argsort(keys, axis=-1, kind="stable")  # NaN last
    ordered = np.take_along_axis(keys, order, axis=-1)
    follows = np.diff(ordered, axis=-1) == 1.0  # NaN differences are never 1
    np.put_along_axis(prev, order[..., 1:], np.where(follows, order[..., :-1], -1), axis=-1)
    np.put_along_axis(nxt, order[..., :-1], np.where(follows, order[..., 1:], -1), axis=-1)
    return prev, nxt


def masked_minmax(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``x`` min-max normalised over the ``valid`` slots (0 elsewhere, and 0 when they are all equal)."""
    x = np.asarray(x, dtype=np.float64)
    valid = np.broadcast_to(np.asarray(valid, dtype=bool), np.broadcast_shapes(x.shape, np.shape(valid)))
    lo = np.where(valid, x, np.inf).min(axis=-1, keepdims=True, initial=np.inf)
    hi = np.where(valid, x, -np.inf).max(axis=-1, keepdims=True, initial=-np.inf)
    span = hi - lo
    ok = valid & np.isfinite(span) & (span > 0)
    return np.where(ok, (x - lo) / np.where(ok, span, 1.0), 0.0)


def smooth(s: np.ndarray, valid: np.ndarray, prev: np.ndarray, nxt: np.ndarray, share: float) -> np.ndarray:
    """Each valid slot's score raised to ``share`` x its valid neighbours' best (``s`` >= 0)."""
    s = np.asarray(s, dtype=np.float64)
    valid = np.broadcast_to(np.asarray(valid, dtype=bool), s.shape)
    best = np.zeros(s.shape)
    for nb in (prev, nxt):
        nb = np.broadcast_to(nb, s.shape)
        safe = np.where(nb >= 0, nb, 0)
        there = (nb >= 0) & np.take_along_axis(valid, safe, axis=-1)
        best = np.maximum(best, np.where(there, np.take_along_axis(s, safe, axis=-1), 0.0))
    return np.where(valid, np.maximum(s, share * best), s)


def read_slots(first: np.ndarray, ts: np.ndarray, valid: np.ndarray, prev: np.ndarray, nxt: np.ndarray,
               limit: np.ndarray | int, floor: int) -> tuple[np.ndarray, np.ndarray]:
    """``(smoothed, read)``: the first stage's relevance normalised and smoothed, and the mask of
    the ``max(2 x limit, floor)`` best slots by it, the candidates the second stage reads."""
    smoothed = smooth(masked_minmax(first, valid), valid, prev, nxt, SMOOTH_FIRST)
    return smoothed, scoring.rerank_slots(smoothed, ts, valid, limit, floor)


def fused_slots(stage: np.ndarray, smoothed: np.ndarray, ts: np.ndarray, read: np.ndarray, prev: np.ndarray,
                nxt: np.ndarray, limit: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """``(fused, kept)``: the second stage's score fused with the smoothed first stage over the
    slots ``read`` (then smoothed among them), and the mask of the ``max(2 x limit, 20)`` best."""
    mixed = STAGE_SHARE * masked_minmax(stage, read) + (1 - STAGE_SHARE) * masked_minmax(smoothed, read)
    fused = smooth(masked_minmax(mixed, read), read, prev, nxt, SMOOTH_FUSED)
    return fused, scoring.rerank_slots(fused, ts, read, limit)


def cascade_relevance(fused: np.ndarray, final: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """A cascade's relevance of the ``kept`` slots: the final stage's score mixed with the
    fused one, each min-max normalised over them, :data:`CASCADE_SHARE` to the final stage
    (0 elsewhere)."""
    mixed = (1 - CASCADE_SHARE) * masked_minmax(fused, kept) + CASCADE_SHARE * masked_minmax(final, kept)
    return np.where(kept, mixed, 0.0)


def cascade_slots(score: np.ndarray, ts: np.ndarray, valid: np.ndarray, limit: np.ndarray | int) -> np.ndarray:
    """The mask of the ``valid`` slots among the ``limit`` best by the blended ``score`` (ties
    as :func:`~vxmem.ranking.scoring.rank_order` breaks them): what a cascade's final stage reads."""
    score = np.asarray(score, dtype=np.float64)
    valid = np.broadcast_to(np.asarray(valid, dtype=bool), score.shape)
    lim = np.asarray(limit, dtype=np.int64)
    k = min(int(lim.max(initial=0)), score.shape[-1])
    if k == 0:
        return np.zeros(score.shape, dtype=bool)
    order = scoring.rank_order(score, ts, valid=valid, k=k)
    top = scoring.take_last(valid, order) & (np.arange(order.shape[-1]) < lim)
    mask = np.zeros(score.shape, dtype=bool)
    np.put_along_axis(mask, order, top, axis=-1)
    return mask
