"""Ranking maths: pure functions over numpy arrays.

``recall()`` and the sweep engine call these same functions, so a sweep point ranks
exactly as ``recall()`` would with the same parameters at the same moment. Every
function broadcasts: pass a scalar or an array of half-lives, a vector or a matrix of
candidates, and the shapes combine the numpy way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..core.clock import DAY, to_epoch
from ..core.keys import K_FEEDBACK, K_FEEDBACK_FOLDED

# The blend's defaults (the spec's): ConversationMemory, the policies and the sweep take them from here.
HALF_LIFE_DAYS = 7.0
RECENCY_WEIGHT = 0.5
FEEDBACK_WEIGHT = 0.25
FEEDBACK_HALF_LIFE_DAYS = 30.0
BLEND_DEFAULTS = {"half_life_days": HALF_LIFE_DAYS, "recency_weight": RECENCY_WEIGHT,
                  "feedback_weight": FEEDBACK_WEIGHT, "feedback_half_life_days": FEEDBACK_HALF_LIFE_DAYS}
HYBRID_WEIGHT = 0.5  # hybrid relevance: the dense share of fuse_relevance (search, recall and the sweep)
# recall(mode=None): hybrid, chosen on LoCoMo (docs/BENCHMARKS.md): it beat dense and lexical with
# every embedder measured, and its weight's optimum is flat between 0.3 and 0.7.
DEFAULT_MODE = "hybrid"
RECENCY_FROM = ("created", "accessed")  # what a memory's age counts from: when it was stored, or last recalled

FEEDBACK_CLAMP = 2.0
OUTCOME_SIGN = {"useful": 1.0, "dead_end": -1.0, "corrected": -1.0}


def decay(age_days: ArrayLike, half_life_days: ArrayLike) -> np.ndarray:
    """``0.5 ** (age / half_life)``: 1 for a brand-new memory, 0.5 one half-life later.

    Negative ages (a memory dated after ``now``) count as brand new.
    """
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    with np.errstate(over="ignore"):  # a tiny half-life: age / half-life is inf, and the decay its limit, 0
        return np.power(0.5, age / np.asarray(half_life_days, dtype=np.float64))


def normalize_relevance(relevance: ArrayLike, axis: int = -1, valid: ArrayLike | None = None) -> np.ndarray:
    """Min-max scale raw relevance across the candidates along ``axis``.

    The spread the candidates actually have is what "clearly more relevant" is measured
    against, whatever band the embedding model puts its cosines in. A pool whose scores
    are all equal (or a single candidate) scales to 1. ``valid`` masks padding slots,
    which get 0 and do not take part in min or max.
    """
    r = np.asarray(relevance, dtype=np.float64)
    # initial=: an empty pool (a session with nothing in it yet) normalises to an empty array
    if valid is None:
        lo = r.min(axis=axis, keepdims=True, initial=np.inf)
        hi = r.max(axis=axis, keepdims=True, initial=-np.inf)
    else:
        valid = np.asarray(valid, dtype=bool)
        lo = np.where(valid, r, np.inf).min(axis=axis, keepdims=True, initial=np.inf)
        hi = np.where(valid, r, -np.inf).max(axis=axis, keepdims=True, initial=-np.inf)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(span > 0, (r - lo) / np.where(span > 0, span, 1.0), 1.0)
    if valid is not None:
        out = np.where(valid, out, 0.0)
    return out


def feedback_from_events(signs: ArrayLike, ages_days: ArrayLike, half_life_days: ArrayLike,
                         axis: int = -1) -> np.ndarray:
    """Signed, time-decayed sum of feedback events along ``axis``.

    ``signs`` are +1 (useful) or -1 (dead_end, corrected), 0 for padding; ``ages_days``
    how long ago each was recorded. A dead end reported a half-life ago counts half.
    """
    return np.sum(np.asarray(signs, dtype=np.float64) * decay(ages_days, half_life_days), axis=axis)


def feedback_score(meta: Mapping[str, Any], now: float, half_life_days: float) -> float:
    """Signed, time-decayed sum of every outcome recorded on a memory.

    ``meta`` is the memory's metadata; its ``_vx_feedback`` list holds
    ``[outcome, epoch_seconds]`` pairs. ``now`` is epoch seconds (or a datetime).
    """
    now = to_epoch(now)
    signs, ages = feedback_events(meta, now)
    if not signs:
        return 0.0
    return float(feedback_from_events(signs, ages, half_life_days))


def feedback_events(meta: Mapping[str, Any], now: float) -> tuple[list[float], list[float]]:
    """(signs, ages in days) of the feedback recorded in ``meta`` at or before ``now``.

    Events folded by :func:`fold_feedback` come last, as one event whose "sign" is their
    decayed sum, aged from the time it was summed to; before that time the fold's log of its
    events is read instead, those up to ``now`` one by one (a fold from a release that kept no
    log is left out whole there).
    """
    events = [(o, ts) for o, ts in meta.get(K_FEEDBACK) or () if ts <= now]  # as of now: none from later
    folded = meta.get(K_FEEDBACK_FOLDED)
    if folded and folded["ts"] > now:
        events += [(o, ts) for o, ts in folded.get("log") or () if ts <= now]
    signs = [OUTCOME_SIGN[o] for o, _ in events]
    ages = [(now - ts) / DAY for _, ts in events]
    if folded and folded["ts"] <= now:
        signs.append(float(folded["sum"]))
        ages.append((now - folded["ts"]) / DAY)
    return signs, ages


def fold_feedback(events: list[list[Any]], folded: Mapping[str, Any] | None, half_life_days: float,
                  keep: int) -> tuple[list[list[Any]], dict[str, Any]]:
    """Fold all but the ``keep`` newest feedback events into one decayed sum.

    ``0.5 ** ((now - t) / h) == 0.5 ** ((now - t_ref) / h) * 0.5 ** ((t_ref - t) / h)``, so
    the folded events' sum decayed to ``t_ref`` (the newest of them) and stored with it
    scores exactly as the events did, for ``half_life_days`` and any ``now >= t_ref``
    (before ``t_ref`` it counts as of ``t_ref``). An earlier fold is carried forward the
    same way; one made with another half-life is carried as a single event at its time.
    Returns the events kept (in their order) and the new ``{"sum", "ts", "half_life_days",
    "events", "log"}``: ``log`` holds every folded event, oldest first, for reads as of a time
    before ``t_ref`` (absent when an earlier fold kept none).
    """
    order = sorted(range(len(events)), key=lambda i: (events[i][1], i))
    old = set(order[: max(len(events) - keep, 0)])
    kept = [e for i, e in enumerate(events) if i not in old]
    gone = [events[i] for i in sorted(old)]
    parts = [(OUTCOME_SIGN[o], float(t)) for o, t in gone]
    count = len(gone)
    if folded:
        parts.append((float(folded["sum"]), float(folded["ts"])))
        count += int(folded["events"])
    t_ref = max(t for _, t in parts)
    total = sum(s * float(decay((t_ref - t) / DAY, half_life_days)) for s, t in parts)
    out: dict[str, Any] = {"sum": total, "ts": t_ref, "half_life_days": float(half_life_days), "events": count}
    if not folded or "log" in folded:
        out["log"] = sorted([*(folded or {}).get("log", ()), *gone], key=lambda e: e[1])
    return kept, out


def blend(relevance_norm: ArrayLike, recency: ArrayLike, feedback: ArrayLike, recency_weight: ArrayLike,
          feedback_weight: ArrayLike) -> np.ndarray:
    """The spec's score: ``relevance_norm + w_r * recency + w_f * clamp(feedback, +-2)``."""
    fb = np.clip(np.asarray(feedback, dtype=np.float64), -FEEDBACK_CLAMP, FEEDBACK_CLAMP)
    return (np.asarray(relevance_norm, dtype=np.float64)
            + np.asarray(recency_weight, dtype=np.float64) * np.asarray(recency, dtype=np.float64)
            + np.asarray(feedback_weight, dtype=np.float64) * fb)


def rank_order(score: ArrayLike, ts: ArrayLike, axis: int = -1, valid: ArrayLike | None = None,
               k: int | None = None) -> np.ndarray:
    """Indices that sort candidates best first along the last axis.

    Higher score first; ties go to the newer memory (higher ``ts``), then to the
    earlier candidate slot, so the order is total and identical in recall and sweep.
    Padding slots (``valid`` False) sort last. ``k`` returns only the first ``k``.
    """
    score = np.asarray(score, dtype=np.float64)
    ts_in = ts
    ts = np.broadcast_to(np.asarray(ts, dtype=np.float64), score.shape)
    if valid is not None:
        score = np.where(valid, score, -np.inf)
    if score.ndim == 1:
        order = np.lexsort((-ts, -score))
        return order if k is None else order[:k]
    if k is not None and 0 < k < score.shape[-1]:
        return _top_k_order(score, ts, int(k))
    # The same order as lexsort((-ts, -score)), several times faster on a sweep's batches:
    # slots pre-sorted newest first (stable, so equal times keep slot order), then a
    # stable sort by score, which keeps that order among equal scores. The time order is
    # computed on ts before broadcasting: a sweep shares it across every grid point.
    ts0 = np.asarray(ts_in, dtype=np.float64)
    by_ts = np.ascontiguousarray(np.broadcast_to(np.argsort(-ts0, axis=-1, kind="stable"), score.shape))
    by_score = np.argsort(-take_last(score, by_ts), axis=-1, kind="stable")
    return take_last(by_ts, by_score)


def _top_k_order(score: np.ndarray, ts: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` of the rank order, fast: a plain sort, then the exact rule where it matters.

    When the first k + 1 sorted scores of a row are all distinct, which k come first and
    in which order does not depend on how ties are broken; only rows with a tie there are
    ordered again with the full rule (score, then newer, then slot).
    """
    neg = -np.ascontiguousarray(score)
    order = np.argsort(neg, axis=-1)[..., : k + 1]
    head = take_last(neg, order)
    tied = np.any(head[..., 1:] == head[..., :-1], axis=-1)
    out = np.ascontiguousarray(order[..., :k])
    if tied.any():
        n = score.shape[-1]
        rows = np.flatnonzero(tied)
        s_rows = neg.reshape(-1, n)[rows]
        t_rows = -np.broadcast_to(ts, score.shape).reshape(-1, n)[rows]
        out.reshape(-1, k)[rows] = np.lexsort((t_rows, s_rows), axis=-1)[:, :k]
    return out


def take_last(a: ArrayLike, idx: ArrayLike) -> np.ndarray:
    """``np.take_along_axis(a, idx, axis=-1)`` where ``idx`` has ``a``'s leading shape.

    Through flat indices into a contiguous copy: several times faster than the general
    function on the sweep's many short rows.
    """
    a = np.ascontiguousarray(a)
    idx = np.asarray(idx)
    rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    if rows == 0 or idx.size == 0:  # no rows (a sweep of no probes) or no slots: nothing to take
        return np.empty(idx.shape, dtype=a.dtype)
    flat = idx.reshape(rows, -1) + (np.arange(rows, dtype=np.int64) * a.shape[-1])[:, None]
    return a.reshape(-1)[flat].reshape(idx.shape)


POOL_FLOOR = 40  # the smallest candidate pool a recall gathers
RERANK_FLOOR = 20  # the fewest candidates a reranker scores (a cross-encoder: each costs a model run)


def pool_size(limit: int, floor: int = POOL_FLOOR) -> int:
    """How many of the most relevant eligible memories are gathered: max(4 x limit, ``floor``).

    Relevance is normalised across this pool, and the sweep engine caches exactly it.
    """
    return max(4 * int(limit), int(floor))


def rerank_depth(limit: int, floor: int = RERANK_FLOOR) -> int:
    """How many of the pool's most relevant candidates a reranker scores: max(2 x limit, ``floor``)."""
    return max(2 * int(limit), int(floor))


DEEP_POOL_FACTOR = 2  # a deep stage gathers this many times as many candidates as it reads


def stage_floors(depth: int | None) -> tuple[int, int]:
    """The (pool, rerank) floors of a second stage that scores ``depth`` candidates (None:
    the cross-encoder's 20). A deep stage gathers :data:`DEEP_POOL_FACTOR` times as many as it
    reads and picks the ones it reads by the neighbour-smoothed first stage, so a turn beside a
    strong hit is read even when its own relevance ranks it beyond ``depth``."""
    if depth is None:
        return POOL_FLOOR, RERANK_FLOOR
    return max(POOL_FLOOR, DEEP_POOL_FACTOR * int(depth)), int(depth)


def apply_score_gap(sorted_scores: ArrayLike, score_gap: float | None) -> int:
    """How many leading results survive ``score_gap``.

    The list is cut at the first result whose score falls more than ``score_gap`` below
    the one before it (an elbow cut): what comes after a cliff is noise.
    """
    s = np.asarray(sorted_scores, dtype=np.float64)
    if score_gap is None or s.size < 2:
        return int(s.size)
    drops = np.nonzero(s[:-1] - s[1:] > score_gap)[0]
    return int(drops[0] + 1) if drops.size else int(s.size)


def fit_budget(tokens: ArrayLike, token_budget: ArrayLike | None) -> np.ndarray:
    """Which of the ranked results ship under ``token_budget`` (boolean mask).

    The top result always ships, even alone over budget, as in ``search()``; after it
    each result is taken while it fits and skipped when it does not, so one long memory
    does not crowd out the shorter ones below it.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    if token_budget is None:
        return np.ones(tokens.shape, dtype=bool)
    # Along the last axis, so a sweep fits every (point, probe) row at once; the budget
    # broadcasts against tokens[..., 0] (np.inf: no budget for that row).
    budget = np.asarray(token_budget, dtype=np.float64)
    rows = np.broadcast_shapes(tokens.shape[:-1], budget.shape) if tokens.ndim else ()
    keep = np.zeros(rows + tokens.shape[-1:], dtype=bool)
    used = np.zeros(rows, dtype=np.int64)
    for i in range(tokens.shape[-1] if tokens.ndim else 0):
        t = tokens[..., i]
        take = np.ones(rows, dtype=bool) if i == 0 else used + t <= budget
        keep[..., i] = take
        used = used + np.where(take, t, 0)
    return keep


def ship(score: ArrayLike, ts: ArrayLike, tokens: ArrayLike, limit: int, score_gap: float | None,
         token_budget: int | None) -> tuple[np.ndarray, int, np.ndarray]:
    """The stages that turn one pool's scores into shipped results: ``(order, n_gap, keep)``.

    ``order`` ranks every slot (:func:`rank_order`); its first ``limit`` are the list,
    ``n_gap`` of them survive the ``score_gap`` cut (:func:`apply_score_gap`), and ``keep``
    marks which of those ``order[:n_gap]`` fit ``token_budget`` (:func:`fit_budget`). So
    ``order[:n_gap][keep]`` is what ``recall()`` ships; the explainer reads every stage.
    """
    score = np.asarray(score, dtype=np.float64)
    order = rank_order(score, ts) if score.size else np.zeros(0, dtype=np.int64)
    top = order[: int(limit)]
    n_gap = apply_score_gap(score[top], score_gap)
    keep = fit_budget(np.asarray(tokens)[top[:n_gap]], token_budget) if n_gap else np.zeros(0, dtype=bool)
    return order, n_gap, keep


def score_pool(relevance: ArrayLike, age_days: ArrayLike, feedback_signs: ArrayLike, feedback_ages: ArrayLike,
               half_life_days: ArrayLike, recency_weight: ArrayLike, feedback_weight: ArrayLike,
               feedback_half_life_days: ArrayLike,
               valid: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Blend one pool (or a batch of pools) of candidates: ``(score, relevance_norm, recency, feedback)``.

    ``relevance`` and ``age_days`` have shape (..., n); ``feedback_signs`` and
    ``feedback_ages`` have shape (..., n, events), zero-padded. The parameters may be
    scalars or arrays that broadcast against (..., n). This is the one scoring path:
    ``recall()`` calls it for one pool, the sweep engine for every grid point at once.
    """
    rel_norm = normalize_relevance(relevance, valid=valid)
    rec = decay(age_days, half_life_days)
    fhl = np.asarray(feedback_half_life_days, dtype=np.float64)
    fb = feedback_from_events(feedback_signs, feedback_ages, fhl[..., None] if fhl.ndim else fhl)
    score = blend(rel_norm, rec, fb, recency_weight, feedback_weight)
    return score, rel_norm, rec, fb


def fuse_relevance(dense: ArrayLike, lexical: ArrayLike, hybrid_weight: ArrayLike, axis: int = -1,
                   valid: ArrayLike | None = None) -> np.ndarray:
    """Hybrid relevance: ``w * minmax(dense) + (1 - w) * minmax(lexical)`` across the pool.

    A convex combination of normalised scores rather than reciprocal rank fusion: it keeps
    how far apart the candidates are (RRF keeps only their order), so the blend with
    recency still sees a clear winner as clear. ``hybrid_weight`` = 1 is pure dense,
    0 pure lexical. Lexical scores are BM25, 0 for a candidate sharing no word.
    """
    w = np.asarray(hybrid_weight, dtype=np.float64)
    d = normalize_relevance(dense, axis=axis, valid=valid)
    lex = np.nan_to_num(np.asarray(lexical, dtype=np.float64), nan=0.0)
    lo = normalize_relevance(lex, axis=axis, valid=valid)
    # An all-equal lexical column (nothing matched) says nothing: it adds 0, not 1.
    if valid is None:
        flat = ~(lex.max(axis=axis, keepdims=True, initial=-np.inf) > lex.min(axis=axis, keepdims=True, initial=np.inf))
    else:
        ok = np.asarray(valid, dtype=bool)
        flat = ~(np.where(ok, lex, -np.inf).max(axis=axis, keepdims=True, initial=-np.inf)
                 > np.where(ok, lex, np.inf).min(axis=axis, keepdims=True, initial=np.inf))
    lo = np.where(flat, 0.0, lo)
    return w * d + (1.0 - w) * lo


def slot_ranks(key: ArrayLike, ok: ArrayLike, ts: ArrayLike | None = None) -> np.ndarray:
    """Each slot's rank (0 first) among the ``ok`` slots along the last axis, by ``key``
    highest first; ties to the newer (higher ``ts``, when given), then the earlier slot.
    Slots not ``ok`` get the width."""
    key, ok = np.asarray(key, dtype=np.float64), np.asarray(ok, dtype=bool)
    shape = np.broadcast_shapes(key.shape, ok.shape, () if ts is None else np.shape(ts))
    k = np.broadcast_to(np.where(ok, -key, np.inf), shape)
    if ts is None:
        order = np.argsort(k, axis=-1, kind="stable")
    else:
        order = np.lexsort((np.broadcast_to(-np.asarray(ts, dtype=np.float64), shape), k), axis=-1)
    ranks = np.empty(shape, dtype=np.int64)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(shape[-1]), shape), axis=-1)
    return np.where(np.broadcast_to(ok, shape), ranks, shape[-1])


def searched_slots(dense: ArrayLike | None, lexical: ArrayLike | None, relevance: ArrayLike, n: ArrayLike,
                   limit: ArrayLike, hybrid: bool, hybrid_weight: ArrayLike = HYBRID_WEIGHT,
                   pool_floor: int = POOL_FLOOR) -> tuple[np.ndarray, np.ndarray]:
    """Which slots of a recorded pool (``n`` of them filled) a recall with ``limit`` would have
    gathered, and their relevance: ``(valid, relevance)``, broadcasting over ``limit``.

    A dense or lexical pool is recorded best first, so a smaller limit's pool is its first
    ``max(4 x limit, 40)``. A hybrid pool is the union of a dense and a lexical top list,
    recorded in position order (the store's tie rule): a smaller limit's pool is the members
    within its own two top lists, found again from the raw scores, and fused over them.
    """
    rel = np.asarray(relevance, dtype=np.float64)
    width = rel.shape[-1]
    size = np.maximum(4 * np.asarray(limit, dtype=np.int64), pool_size(0, pool_floor))
    recorded = np.arange(width) < np.asarray(n)
    if not hybrid:
        return recorded & (np.arange(width) < size), rel
    if dense is None or lexical is None:
        raise ValueError("a hybrid pool needs its raw dense and lexical scores")
    d = np.asarray(dense, dtype=np.float64)
    lex = np.nan_to_num(np.asarray(lexical, dtype=np.float64), nan=0.0)
    valid = recorded & ((slot_ranks(d, recorded) < size) | (slot_ranks(lex, recorded & (lex > 0)) < size))
    return valid, fuse_relevance(d, lex, hybrid_weight, valid=valid)


def rerank_slots(relevance: ArrayLike, ts: ArrayLike, valid: ArrayLike, limit: ArrayLike,
                 floor: int = RERANK_FLOOR) -> np.ndarray:
    """The slots a recall with ``limit`` reranks: the ``max(2 x limit, floor)`` most relevant
    ``valid`` ones, ties to the newer (the order of :func:`rank_order`)."""
    depth = np.maximum(2 * np.asarray(limit, dtype=np.int64), rerank_depth(0, floor))
    return np.asarray(valid, dtype=bool) & (slot_ranks(relevance, valid, ts) < depth)
