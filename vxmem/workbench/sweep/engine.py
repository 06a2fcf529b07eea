"""How a sweep ranks cached pools: chunks of probes at every grid point at once, vectorised.

A chunk of probes is searched first (:func:`vxmem.ranking.scoring.searched_slots`: the slots
each point's pool holds, reranked where the replay was), then scored through the policy,
ranked (:func:`~vxmem.ranking.scoring.rank_order`) and cut to its budget
(:func:`~vxmem.ranking.scoring.fit_budget`), the very functions ``recall()`` uses, with one
array axis per grid parameter. :func:`chunk_metrics` gives a chunk's metrics,
:func:`accessed_metrics` a replay's when ages count from access (probe after probe, since
each probe's ranking moves the ages of the next), and :func:`shipped_ids` the ids each probe
ships at one point. :mod:`vxmem.workbench.sweep.run` plans the chunks and gathers the results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ...core.clock import DAY
from ...ranking import deep, scoring
from ...ranking.asking import at_floor
from ...ranking.pool import CandidatePool
from ..analysis import metrics as M
from ..replay.record import Replay
from .grid import Grid

# The pool arrays a job ranks a chunk of probes from.
CHUNK_ARRAYS = ("relevance", "dense", "lexical", "ts", "age_days", "tokens", "grade", "stale", "foreign",
                 "session_bits", "feedback_signs", "feedback_ages", "n", "ideal", "n_relevant", "n_sessions",
                 "rerank_score", "neighbour_key", "final_score", "asks")
# The chunk arrays that hold a value per pool slot (the feedback ones per event too): all but the per-probe ones.
_SLOT_ARRAYS = frozenset(CHUNK_ARRAYS) - {"n", "ideal", "n_relevant", "n_sessions"}


def chunk_metrics(chunk: dict[str, np.ndarray], fixed: dict[str, np.ndarray], g: Grid) -> dict[str, np.ndarray]:
    """Every metric of one chunk of probes (its arrays and its probes' own settings)."""
    n = int(chunk["relevance"].shape[0])
    return _metrics_of_chunk(chunk, slice(0, n), dataclasses.replace(g, fixed=fixed))


def _accessed_pass(pools: Mapping[str, np.ndarray], fixed: dict[str, np.ndarray], g: Grid,
                   ids: Sequence[Sequence[str]], pick: Sequence[int],
                   shipped: bool = False) -> tuple[dict[str, np.ndarray], list[list[str]]]:
    """One replay's probes ranked in order with ages counted from access: each probe's ages,
    at every grid point, count from the last probe whose ranking at that point returned the
    memory (else from when it was stored), as a memory made with ``recency_from="accessed"``
    records them. Returns the metrics of the probes ``pick`` (shape (*grid, len(pick))) and,
    with ``shipped``, the ids they ship at the grid's first point."""
    n_probes, width = pools["relevance"].shape
    column: dict[str, int] = {}
    slot_mem = np.full((n_probes, width), -1, dtype=np.int64)
    for i, row in enumerate(ids[:n_probes]):
        for j, mid in enumerate(row[:width]):
            slot_mem[i, j] = column.setdefault(mid, len(column))
    n_mem = len(column)
    slot_mem[slot_mem < 0] = n_mem  # padding reads (and writes) a spare column
    gg = dataclasses.replace(g, fixed=fixed)
    searched = _search_chunk(pools, slice(0, n_probes), gg)  # what does not depend on the ages, at once
    # When each memory was last returned at every point, and the access before that one: an
    # access counts from the moment after it (see vxmem.ranking.pool.AccessLog, the same rule per id).
    last = np.full(g.shape + (n_mem + 1,), -np.inf)
    before = last.copy()
    tops, keeps, tokens = [], [], []
    for i in range(n_probes):
        mem, now = slot_mem[i], float(pools["now"][i])
        seen = np.where(last[..., mem] < now, last[..., mem], before[..., mem])
        since = np.maximum(pools["ts"][i], seen)
        ranked = _rank_searched(searched.probe(i), gg, age_days=((now - since) / DAY)[..., None, :])
        full = g.shape + ranked.top.shape[-2:]
        tops.append(np.broadcast_to(ranked.top, full))
        keeps.append(np.broadcast_to(ranked.keep, full))
        tokens.append(np.broadcast_to(ranked.tokens, full))
        top, keep = tops[-1][..., 0, :], keeps[-1][..., 0, :]
        hit = np.where(keep, mem[top], n_mem)  # the memories returned (padding: the spare column)
        was = np.take_along_axis(last, hit, axis=-1)
        moved = was < now
        np.put_along_axis(before, hit, np.where(moved, was, np.take_along_axis(before, hit, axis=-1)), axis=-1)
        np.put_along_axis(last, hit, np.where(moved, now, was), axis=-1)
    lists: list[list[str]] = []
    if shipped:
        for i in pick:
            t0 = tops[i][..., 0, :].reshape(-1, tops[i].shape[-1])[0]
            k0 = keeps[i][..., 0, :].reshape(-1, keeps[i].shape[-1])[0]
            lists.append([ids[i][j] for j, kp in zip(t0.tolist(), k0.tolist()) if kp])
    if not pick:
        return {}, lists
    # Every probe's metrics at once, from the rankings made one probe at a time.
    idx = np.asarray(pick, dtype=np.int64)
    whole = _Ranked(searched.c, np.concatenate(tops, axis=-2), np.concatenate(keeps, axis=-2),
                    np.concatenate(tokens, axis=-2), searched.limit, searched.budget)
    out = _metrics_of_ranked(whole)
    return {m: np.broadcast_to(v, g.shape + v.shape[-1:])[..., idx] for m, v in out.items()}, lists


def replay_fixed(r: Replay, g: Grid, offset: int) -> dict[str, np.ndarray]:
    """Every probe's own settings of ``r``'s whole history (see :meth:`Replay.history`); its
    probes start at ``offset`` among the swept ones."""
    whole, _ = r.history()
    n = whole.n_probes
    fixed = {k: np.full(n, v[offset]) for k, v in g.fixed.items()}
    fixed["limit"] = whole.pools["limit"].astype(np.float64)
    return fixed


def accessed_metrics(r: Replay, fixed: dict[str, np.ndarray], g: Grid) -> dict[str, np.ndarray]:
    """Every metric of ``r``'s probes with ages counted from access, ranked over its whole
    history (``fixed``: :func:`replay_fixed`'s)."""
    whole, index = r.history()
    pools = {k: v for k, v in whole.pools.items() if k != "pool_limit"}
    return _accessed_pass(pools, fixed, g, whole.pool_ids, index)[0]


class _Ranked(NamedTuple):
    """One chunk of probes ranked at every grid point: the chunk's arrays (``chunk``), the
    ranked slots (``top``, shape (*grid, probes, kmax)), which of them ship (``keep``), their
    ``tokens``, and the ``limit`` and ``budget`` as they broadcast."""

    chunk: dict[str, np.ndarray]
    top: np.ndarray
    keep: np.ndarray
    tokens: np.ndarray
    limit: np.ndarray
    budget: np.ndarray


class _Searched(NamedTuple):
    """What ranking a chunk of probes needs before any score: the chunk's arrays (``c``),
    ``limit``, the ``valid`` slots and their ``relevance`` at every grid point (the pool each
    limit gathered, and reranked), the policy's parameters and the ``budget``."""

    c: dict[str, np.ndarray]
    limit: np.ndarray
    valid: np.ndarray
    relevance: np.ndarray
    params: dict[str, np.ndarray]
    budget: np.ndarray

    def probe(self, i: int) -> _Searched:
        """The same for probe ``i`` of the chunk alone (probe axes of length 1)."""
        def one(x: np.ndarray, axis: int) -> np.ndarray:  # a per-probe array's row i; a grid axis as it is
            x = np.asarray(x)
            if x.ndim < -axis or x.shape[axis] == 1:
                return x
            return x[(Ellipsis, slice(i, i + 1)) + (slice(None),) * (-axis - 1)]

        c = {k: v[i: i + 1] for k, v in self.c.items()}
        return _Searched(c, one(self.limit, -2), one(self.valid, -2), one(self.relevance, -2),
                         {k: one(v, -2) for k, v in self.params.items()}, one(self.budget, -1))


def _search_chunk(pools: Mapping[str, np.ndarray], sl: slice, g: Grid) -> _Searched:
    """The probes of ``sl`` up to their scores: which slots each grid point's pool holds."""
    c = {k: pools[k][sl] for k in CHUNK_ARRAYS if k in pools}  # "rerank_score": only a reranked replay needs it
    n_probes, width = c["relevance"].shape

    def param(k: str) -> np.ndarray:
        return g.param(k, sl, n_probes)

    lim = param("limit").astype(np.int64)
    # The pool a limit would have gathered (and, reranked, the candidates it would have reranked).
    valid, relevance = scoring.searched_slots(c["dense"], c["lexical"], c["relevance"], c["n"].reshape(n_probes, 1),
                                              lim, g.hybrid, param("hybrid_weight") if g.hybrid else 0.0,
                                              g.floors[0])
    if g.reranked and g.floors[1] > scoring.RERANK_FLOOR:  # a deep stage, as recall() runs it (ranking.deep)
        prev, nxt = deep.neighbour_slots(c.get("neighbour_key", np.full(c["relevance"].shape, np.nan)))
        smoothed, read = deep.read_slots(relevance, c["ts"], valid, prev, nxt, lim, g.floors[1])
        stage = np.where(read, np.nan_to_num(c["rerank_score"]), 0.0)
        fused, valid = deep.fused_slots(stage, smoothed, c["ts"], read, prev, nxt, lim)
        relevance = np.where(valid, fused, 0.0)
        if g.cascade and np.isnan(np.where(valid, c["final_score"], 0.0)).any():  # reorders the blend's top
            raise ValueError("these limits keep candidates the replay's final stage did not score: replay "
                             "with pool_limit at least the largest limit")
    elif g.smoothed:  # the fast preset: the first stage smoothed over neighbouring turns, its best kept
        prev, nxt = deep.neighbour_slots(c.get("neighbour_key", np.full(c["relevance"].shape, np.nan)))
        smoothed, valid = deep.read_slots(relevance, c["ts"], valid, prev, nxt, lim, scoring.RERANK_FLOOR)
        relevance = np.where(valid, smoothed, 0.0)
    elif g.reranked:  # the reranker's scores (recorded by a reranked replay) of the candidates the limit reranks
        valid = scoring.rerank_slots(relevance, c["ts"], valid, lim, g.floors[1])
        relevance = np.where(valid, np.nan_to_num(c["rerank_score"]), 0.0)
    relevance = at_floor(relevance, c.get("asks"), valid)  # as recall's FloorAsking, after the second stage
    budget = param("token_budget")[..., 0] if "token_budget" in g.values else g.fixed["token_budget"][sl]
    return _Searched(c, lim, valid, relevance, {k: param(k) for k in g.policy.params}, budget)


def _rank_searched(s: _Searched, g: Grid, age_days: np.ndarray | None = None) -> _Ranked:
    """Score and rank searched probes at every grid point, as ``recall()`` would (``age_days``:
    the slots' ages at every point, shape (*grid, probes, slots), instead of the recorded ones)."""
    c = s.c
    ages = c["age_days"] if age_days is None else age_days
    batch = CandidatePool(relevance=s.relevance, ts=c["ts"], age_days=ages, feedback_signs=c["feedback_signs"],
                          feedback_ages=c["feedback_ages"], tokens=c["tokens"])
    score = g.policy.score(batch, s.params, s.valid)
    score, valid = np.broadcast_arrays(score, s.valid)
    if g.cascade:  # the accurate preset: its cross-encoder reorders the policy's top limit (ranking.deep)
        valid = deep.cascade_slots(score, c["ts"], valid, s.limit)
        relevance = deep.cascade_relevance(s.relevance, np.nan_to_num(c["final_score"]), valid)
        score = g.policy.score(dataclasses.replace(batch, relevance=relevance), s.params, valid)
        score, valid = np.broadcast_arrays(score, valid)
    top = scoring.rank_order(score, c["ts"], valid=valid, k=g.kmax)
    in_list = scoring.take_last(valid, top) & (np.arange(top.shape[-1]) < s.limit)
    tokens = _take(c["tokens"], top)
    keep = scoring.fit_budget(tokens, s.budget) & in_list
    return _Ranked(c, top, keep, tokens, s.limit, s.budget)


def _rank_chunk(pools: Mapping[str, np.ndarray], sl: slice, g: Grid) -> _Ranked:
    """Rank the probes of ``sl`` at every grid point, as ``recall()`` would."""
    return _rank_searched(_search_chunk(pools, sl, g), g)


def shipped_ids(replay: Replay, pools: Mapping[str, np.ndarray], g: Grid, accessed: bool) -> list[list[str]]:
    """The ids each probe of ``replay`` (its stacked ``pools``) ships at the grid's first point;
    ``accessed``: ages count from access, the probes ranked in order over the replay's history."""
    if accessed:
        whole, index = replay.history()
        arrays = {k: v for k, v in whole.pools.items() if k != "pool_limit"}
        bare = dataclasses.replace(g, fixed={})
        return _accessed_pass(arrays, replay_fixed(replay, g, 0), bare, whole.pool_ids, index,
                              shipped=True)[1]
    r = _rank_chunk(pools, slice(0, replay.n_probes), g)
    top = r.top.reshape(replay.n_probes, -1)
    keep = r.keep.reshape(replay.n_probes, -1)
    return [[replay.pool_ids[i][j] for j, kp in zip(top[i], keep[i]) if kp] for i in range(replay.n_probes)]


def _take(x: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``x[probe, top[..., probe, j]]``: a chunk's (probes, slots) array read at the ranked slots."""
    n_probes, width = top.shape[-2], np.shape(x)[-1]
    flat = top + (np.arange(n_probes, dtype=np.int64) * width)[:, None]
    return np.ascontiguousarray(x).reshape(-1)[flat]


def _metrics_of_chunk(pools: Mapping[str, np.ndarray], sl: slice, g: Grid) -> dict[str, np.ndarray]:
    """Every metric of one slice of probes at every grid point, shape (*grid, probes)."""
    return _metrics_of_ranked(_rank_searched(compacted(_search_chunk(pools, sl, g), g.kmax), g))


def compacted(s: _Searched, kmax: int) -> _Searched:
    """``s`` with only the slots some grid point ranks.

    A reranked pool ranks only the candidates its limit reranks (``max(2 x limit, 20)`` of
    the pool's 40 or more), so half of every score, sort and gather of a sweep went to slots
    no point could return. Each probe keeps the slots valid at some point, first and in slot
    order (the tie rule's last key), so the ranking and every metric are the uncompacted
    ones; the slots are those of the compacted arrays (the metrics do not name slots;
    rankings use :func:`shipped_ids`). A pool whose recorded slots all count is left as it is.
    """
    valid = s.valid
    n_probes, width = valid.shape[-2:]
    if width == 0 or n_probes == 0:  # every pool empty: nothing to drop
        return s
    union = valid.reshape(-1, n_probes, width).any(axis=0)  # valid at some grid point
    m = int(union.sum(axis=1).max(initial=0))
    if m >= width or m <= kmax:  # nothing to drop, or fewer columns than the ranked lists hold
        return s
    rows = np.arange(n_probes)[:, None]
    slots = np.argsort(~union, axis=1, kind="stable")[:, :m]  # kept first, each group in slot order
    c = {k: v[rows, slots] if k in _SLOT_ARRAYS else v for k, v in s.c.items()}
    return s._replace(c=c, valid=valid[..., rows, slots], relevance=np.asarray(s.relevance)[..., rows, slots])


def _metrics_of_ranked(r: _Ranked) -> dict[str, np.ndarray]:
    """Every metric of ranked probes at every grid point, shape (*grid, probes)."""
    c, top, keep, tokens, lim, budget = r
    # Shipped results first, in rank order: a budget can skip one and take the next.
    # Without budgets the shipped list is already a prefix.
    idx = None if np.all(np.isinf(budget)) else np.argsort(~keep, axis=-1, kind="stable")
    kept = keep if idx is None else scoring.take_last(keep, idx)

    def ranked(x: np.ndarray) -> np.ndarray:
        x = np.broadcast_to(_take(x, top), keep.shape)
        return x if idx is None else scoring.take_last(x, idx)

    gains = np.where(kept, ranked(c["grade"]), 0.0)
    stale = kept & ranked(c["stale"])
    foreign = kept & ranked(c["foreign"])
    bits = np.where(kept, ranked(c["session_bits"]), 0)
    ideal = np.where(np.arange(c["ideal"].shape[-1]) < lim, c["ideal"], 0.0)  # IDCG at the limit
    used = np.sum(np.where(keep, tokens, 0), axis=-1)
    res = M.ranked_metrics(gains, stale, c["n_relevant"], ideal, k=None, foreign=foreign, session_bits=bits,
                           n_sessions=c["n_sessions"], tokens_used=used, token_budget=budget)
    res["n_results"] = keep.sum(axis=-1)
    res["tokens"] = used
    return res
