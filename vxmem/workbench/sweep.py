"""Re-rank cached candidate pools for every point of a parameter grid, vectorised.

``sweep(replay, grid)`` takes the pools a :class:`~vxmem.workbench.replay.Replay` recorded and ranks
them for every combination of the grid's values with numpy broadcasting and the very
functions ``recall()`` uses (:func:`vxmem.ranking.scoring.score_pool` through the ``blend``
policy, :func:`~vxmem.ranking.scoring.rank_order`, :func:`~vxmem.ranking.scoring.fit_budget`): no
re-embedding, no re-search. Each grid parameter gets its own array axis, so a part of the
score that depends on one parameter (the decay on ``half_life_days``, the feedback on
``feedback_half_life_days``) is computed once per value, not once per point.

A point ranks every probe exactly as ``recall()`` with those parameters would have at that
moment (``tests/test_sweep.py`` proves it), with two limits of what a cached pool can know:
``score_gap`` is not swept (replay without it), and a ``limit`` whose pool
(``max(4 x limit, 40)``) is bigger than the recorded one needs a replay with a bigger
``pool_limit``. A smaller limit's pool is the prefix of the recorded one by relevance (for
hybrid pools, the members within both of its top lists); it equals ``recall()``'s own unless
raw relevances tie exactly at the pool's edge. A reranked replay (``Replay.rerank``) records
the reranker's score of every candidate some limit up to ``pool_limit`` would rerank, so a
point ranks the ones its own limit reranks; its ``hybrid_weight`` cannot be swept.

Chunks of probes are ranked through joblib, so a cluster's joblib backend spreads them
over its workers and nothing else changes (a test runs one on a Dask ``LocalCluster``)::

    with joblib.parallel_config(backend="dask"):      # after dask.distributed.Client(...)
        res = sweep(replays, grid)                      # n_jobs=None: the backend's workers
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..core.clock import DAY
from ..core.progress import Progress, Reporter
from ..ranking import scoring
from ..ranking.pool import CandidatePool
from . import metrics as M
from .policies import Policy, check_param, get_policy
from .record import Replay

SWEEP_KEYS = ("limit", "token_budget", "hybrid_weight")
RANKING_KEYS = ("token_budget", "limit", "hybrid_weight")  # grid axes come in this order, then the policy's
METRIC_COLUMNS = ("hit", "recall", "rr", "ndcg", "stale_leak", "foreign_leak", "session_recall", "budget_fill")
_CHUNK_ARRAYS = ("relevance", "dense", "lexical", "ts", "age_days", "tokens", "grade", "stale", "foreign",
                 "session_bits", "feedback_signs", "feedback_ages", "n", "ideal", "n_relevant", "n_sessions",
                 "rerank_score")
# The chunk arrays that hold a value per pool slot (the feedback ones per event too): all but the per-probe ones.
_SLOT_ARRAYS = frozenset(_CHUNK_ARRAYS) - {"n", "ideal", "n_relevant", "n_sessions"}


class SweepResult:
    """``per_point``: the mean of each metric per grid point (``mrr`` is the mean reciprocal
    rank; NaNs, e.g. recall of a probe with nothing relevant, are skipped), the mean context
    ``tokens`` and ``n_results`` shipped per probe, and the probe count; ``per_probe``: one
    row per point and probe, built on first use; ``params``: the grid's columns."""

    def __init__(self, per_point: Any, params: list[str], policy: str, build_per_probe: Callable[[], Any]):
        self.per_point = per_point
        self.params = params
        self.policy = policy
        self._build = build_per_probe
        self._per_probe: Any = None

    @property
    def per_probe(self) -> Any:
        """One row per point and probe (built on first use)."""
        if self._per_probe is None:
            self._per_probe = self._build()
        return self._per_probe

    def __repr__(self) -> str:
        return f"SweepResult(policy={self.policy!r}, {len(self.per_point)} points, params={self.params})"

    def by_category(self) -> Any:
        """Per point and probe category (when the data has categories)."""
        return M.aggregate(self.per_probe, by=["point"] + self.params, category=True)

    def best(self, metric: str = "ndcg", n: int = 5) -> Any:
        """The ``n`` points with the best mean ``metric`` (lowest for the leaks), first on ties."""
        return self.per_point.sort_values(metric, ascending=metric in M.LOWER_IS_BETTER, kind="stable").head(n)

    def to_frames(self) -> dict[str, Any]:
        """``per_probe`` and ``per_point``."""
        return {"per_probe": self.per_probe, "per_point": self.per_point}


def _as_list(name: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, np.ndarray, range)):
        values = [values]
    values = list(values)
    if not values:
        raise ValueError(f"grid value list for {name} is empty")
    return values


def _check_int(name: str, v: Any, allow_none: bool = False) -> int | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} values must be ints >= 1{' or None' if allow_none else ''}, got {v!r}")
    if v < 1:
        raise ValueError(f"{name} values must be ints >= 1{' or None' if allow_none else ''}, got {v!r}")
    return int(v)


def _check_values(name: str, values: list[Any]) -> list[Any]:
    if name in ("limit", "token_budget"):
        return [_check_int(name, v, allow_none=name == "token_budget") for v in values]
    return [check_param(name, v) for v in values]


def _stack(replays: Sequence[Replay]) -> dict[str, np.ndarray]:
    """One padded set of pool arrays over several replays, with per-probe settings."""
    if len(replays) == 1:
        return {k: v for k, v in replays[0].pools.items() if k != "pool_limit"}
    width = max(r.pools["relevance"].shape[1] for r in replays)
    events = max(r.pools["feedback_signs"].shape[2] for r in replays)
    relevant = max(r.pools["ideal"].shape[1] for r in replays)
    out = {}
    for k in replays[0].pools:
        if k == "pool_limit":
            continue
        parts = []
        for r in replays:
            a = r.pools[k] if k in r.pools else np.full(r.pools["relevance"].shape, np.nan)  # hand-built
            if a.ndim >= 2:
                cols = relevant if k == "ideal" else width
                pad = [(0, 0), (0, cols - a.shape[1])] + ([(0, events - a.shape[2])] if a.ndim == 3 else [])
                a = np.pad(a, pad, constant_values=np.nan if k in ("lexical", "rerank_score") else 0)
            parts.append(a)
        out[k] = np.concatenate(parts, axis=0)
    return out


def _inf_if_none(value: float | None) -> float:
    """A parameter value as a float; None (a token budget of none) is no limit at all."""
    return np.inf if value is None else float(value)


def _per_probe(replays: Sequence[Replay], value: Callable[[Replay], Any]) -> list[Any]:
    """``value(replay)`` once for each of the replay's probes, over all replays."""
    return [v for r in replays for v in [value(r)] * r.n_probes]


@dataclass
class _Grid:
    """What ranks the probes at every point: the policy, the grid's axes (``names``, each
    with its ``values``), each probe's own value of everything not swept (``fixed``),
    whether the pools are hybrid and reranked, and the longest list any point ranks (``kmax``)."""

    policy: Policy
    names: list[str]
    values: dict[str, list[Any]]
    fixed: dict[str, np.ndarray]
    hybrid: bool
    reranked: bool
    kmax: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self.values[k]) for k in self.names)

    @property
    def points(self) -> list[tuple[Any, ...]]:
        return list(itertools.product(*[self.values[k] for k in self.names])) if self.names else [()]

    def param(self, k: str, sl: slice, n_probes: int) -> np.ndarray:
        """Parameter ``k`` for the probes of ``sl``: its grid axis, shape (*grid, 1, 1) with
        ``k``'s values along its own axis, or each probe's own value, shape (probes, 1)."""
        if k in self.values:
            shp = [1] * len(self.names)
            shp[self.names.index(k)] = len(self.values[k])
            vals = [_inf_if_none(v) for v in self.values[k]]
            return np.asarray(vals, dtype=np.float64).reshape(shp + [1, 1])
        return self.fixed[k][sl].reshape(n_probes, 1)


def _make_grid(replays: Sequence[Replay], pol: Policy, grid: Mapping[str, Any],
               pool_limits: np.ndarray) -> _Grid:
    """The :class:`_Grid` of ``grid``'s checked values over ``replays`` (whose stacked
    ``pool_limits`` are the probes' recorded limits)."""
    names = [k for k in RANKING_KEYS if k in grid] + [k for k in pol.params if k in grid]
    values = {k: _check_values(k, _as_list(k, grid[k])) for k in names}
    probes = pool_limits.size

    def own(value: Callable[[Replay], float]) -> np.ndarray:  # each probe's value, from its replay
        return np.array(_per_probe(replays, value), dtype=np.float64)

    def setting(k: str) -> Callable[[Replay], float]:
        return lambda r: check_param(k, r.settings.get(k, pol.defaults[k]))

    fixed = {k: own(setting(k)) for k in pol.params if k not in values}
    fixed["limit"] = pool_limits.astype(np.float64)
    fixed["token_budget"] = own(lambda r: _inf_if_none(r.settings.get("token_budget")))
    fixed["hybrid_weight"] = own(lambda r: r.hybrid_weight)
    limits = values.get("limit")
    kmax = max(limits) if limits else (int(pool_limits.max()) if probes else 1)
    return _Grid(pol, names, values, fixed, hybrid=any(r.mode == "hybrid" for r in replays),
                 reranked=any(r.rerank is not None for r in replays), kmax=kmax)


def sweep(replays: Replay | Sequence[Replay], grid: Mapping[str, Any] | None = None, policy: str | Policy = "blend",
          *, n_jobs: int | None = None, chunk_elements: int = 300_000, progress: Progress = False,
          recency_from: str | None = None) -> SweepResult:
    """Rank every probe of ``replays`` at every point of ``grid``; returns a :class:`SweepResult`.

    ``grid`` maps parameter names to a value or a list of values; the points are their
    Cartesian product. Names: the policy's parameters (blend: ``half_life_days``,
    ``recency_weight``, ``feedback_weight``, ``feedback_half_life_days``), ``limit``,
    ``token_budget`` (None: no budget) and, for replays in hybrid mode, ``hybrid_weight``.
    A parameter left out keeps each replay's own setting (policy defaults for the other
    policies). Several replays (say, every LoCoMo conversation) are swept together.

    :param n_jobs: rank chunks of probes through joblib with that many workers (threads by
        default; -1: every core). None: what the active joblib backend says (one outside a
        ``joblib.parallel_config``; a Dask cluster's workers inside ``backend="dask"``).
    :param chunk_elements: about how many (point, slot) scores one chunk computes at once.
    :param progress: report chunks done: a bar (True; None: tqdm decides) or a callable
        ``progress(done, total, desc)`` (see :class:`vxmem.core.progress.Reporter`).
    :param recency_from: what ages count from: ``"created"`` or ``"accessed"`` (default: each
        replay's :meth:`~vxmem.workbench.record.Replay.recency_for` the policy). From access, a
        replay's probes are ranked in order, one job per replay: each probe's ages count
        from the last probe whose ranking at that point returned the memory.
    """
    from joblib import Parallel, delayed

    replays = [replays] if isinstance(replays, Replay) else list(replays)
    if not replays or not all(isinstance(r, Replay) for r in replays):
        raise TypeError("sweep() needs a Replay or a list of Replays")
    pol = get_policy(policy)
    grid = dict(grid or {})
    _check_sweepable(replays, pol, grid)
    pools = _stack(replays)
    g = _make_grid(replays, pol, grid, pools["limit"])
    _check_pool_sizes(replays, g)
    n_probes, width = pools["relevance"].shape
    n_points = int(np.prod(g.shape)) if g.shape else 1
    out = {m: np.full((n_points, n_probes), np.nan) for m in METRIC_COLUMNS}
    out["n_results"] = np.zeros((n_points, n_probes), dtype=np.int64)
    out["tokens"] = np.zeros((n_points, n_probes), dtype=np.int64)
    # token_budget applies after scoring: a chunk scores once per point of the other axes
    score_points = int(np.prod([n for k, n in zip(g.names, g.shape) if k != "token_budget"])) if g.shape else 1
    step = max(1, int(chunk_elements // max(1, score_points * max(width, 1))))
    slices = [slice(p0, min(n_probes, p0 + step)) for p0 in range(0, n_probes, step)]
    # Each job gets its own chunk of the arrays (a view for threads; all a remote worker is
    # sent). numpy sorts and ufuncs release the GIL, so threads are the local default.
    bare = dataclasses.replace(g, fixed={})

    def chunk(sl: slice) -> Any:  # a job ranking the probes of sl together
        return delayed(_chunk_job)({k: pools[k][sl] for k in _CHUNK_ARRAYS if k in pools},
                                   {k: v[sl] for k, v in g.fixed.items()}, bare)

    accessed = [r.recency_for(pol, recency_from) == "accessed" for r in replays]
    if any(accessed):  # probe after probe within a replay: one job per replay
        starts = np.cumsum([0] + [r.n_probes for r in replays])
        slices = [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
        jobs = (delayed(_accessed_job)(r, _replay_fixed(r, g, sl.start), bare) if acc and r.n_probes else chunk(sl)
                for r, acc, sl in zip(replays, accessed, slices))
    else:
        jobs = (chunk(sl) for sl in slices)
    bar = Reporter(progress, len(slices), "sweep", unit="chunk")
    try:
        for sl, res in zip(slices, Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")(jobs)):
            for m, arr in res.items():
                out[m][:, sl] = np.broadcast_to(arr, g.shape + arr.shape[-1:]).reshape(n_points, -1)
            bar.update()
    finally:
        bar.close()
    return _frames(replays, g, out, n_probes)


def _chunk_job(chunk: dict[str, np.ndarray], fixed: dict[str, np.ndarray], g: _Grid) -> dict[str, np.ndarray]:
    """Every metric of one chunk of probes (its arrays and its probes' own settings)."""
    n = int(chunk["relevance"].shape[0])
    return _metrics_of_chunk(chunk, slice(0, n), dataclasses.replace(g, fixed=fixed))


def _accessed_pass(pools: Mapping[str, np.ndarray], fixed: dict[str, np.ndarray], g: _Grid,
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


def _replay_fixed(r: Replay, g: _Grid, offset: int) -> dict[str, np.ndarray]:
    """Every probe's own settings of ``r``'s whole history (see :meth:`Replay.history`); its
    probes start at ``offset`` among the swept ones."""
    whole, _ = r.history()
    n = whole.n_probes
    fixed = {k: np.full(n, v[offset]) for k, v in g.fixed.items()}
    fixed["limit"] = whole.pools["limit"].astype(np.float64)
    return fixed


def _accessed_job(r: Replay, fixed: dict[str, np.ndarray], g: _Grid) -> dict[str, np.ndarray]:
    whole, index = r.history()
    pools = {k: v for k, v in whole.pools.items() if k != "pool_limit"}
    return _accessed_pass(pools, fixed, g, whole.pool_ids, index)[0]


def _check_sweepable(replays: list[Replay], pol: Policy, grid: Mapping[str, Any]) -> None:
    allowed = set(pol.params) | set(SWEEP_KEYS)
    unknown = set(grid) - allowed
    if unknown:
        raise ValueError(f"cannot sweep {sorted(unknown)[0]!r} with policy {pol.name!r}; "
                         f"sweepable: {', '.join(sorted(allowed))}")
    if any(r.settings.get("score_gap") is not None for r in replays):
        raise ValueError("sweeps do not apply score_gap; replay with score_gap=None")
    if "hybrid_weight" in grid and {r.mode for r in replays} != {"hybrid"}:
        raise ValueError("hybrid_weight can be swept only over replays recorded with mode='hybrid'")
    if "hybrid_weight" in grid and any(r.rerank is not None for r in replays):
        weights = [check_param("hybrid_weight", w) for w in _as_list("hybrid_weight", grid["hybrid_weight"])]
        if any(w != r.hybrid_weight for w in weights for r in replays if r.rerank is not None):
            raise ValueError("hybrid_weight decides which candidates a reranked pool holds: sweep it over replays "
                             "recorded with rerank=False (a reranked replay takes only the weight it was "
                             "recorded with)")
    if len({r.rerank is None for r in replays}) > 1 or len({r.mode == "hybrid" for r in replays}) > 1:
        raise ValueError("sweep replays recorded with one pipeline together: these mix reranked and plain, or "
                         "hybrid and other modes (sweep_modes() takes one group per mode)")


def _check_pool_sizes(replays: list[Replay], g: _Grid) -> None:
    """A swept limit needs its whole pool recorded (and, for hybrid, exactly that pool)."""
    limits = g.values.get("limit")
    if not limits or not any(r.n_probes for r in replays):
        return
    recorded = {scoring.pool_size(int(r.settings["pool_limit"])) for r in replays if r.n_probes}
    need = max(scoring.pool_size(lim) for lim in limits)
    if need > min(recorded):
        raise ValueError(f"limit {max(limits)} needs pools of {need} candidates; these replays recorded "
                         f"{min(recorded)} (replay with pool_limit={max(limits)})")


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


def _search_chunk(pools: Mapping[str, np.ndarray], sl: slice, g: _Grid) -> _Searched:
    """The probes of ``sl`` up to their scores: which slots each grid point's pool holds."""
    c = {k: pools[k][sl] for k in _CHUNK_ARRAYS if k in pools}  # "rerank_score": only a reranked replay needs it
    n_probes, width = c["relevance"].shape

    def param(k: str) -> np.ndarray:
        return g.param(k, sl, n_probes)

    lim = param("limit").astype(np.int64)
    # The pool a limit would have gathered (and, reranked, the candidates it would have reranked).
    valid, relevance = scoring.searched_slots(c["dense"], c["lexical"], c["relevance"], c["n"].reshape(n_probes, 1),
                                              lim, g.hybrid, param("hybrid_weight") if g.hybrid else 0.0)
    if g.reranked:  # the reranker's scores (recorded by a reranked replay) of the candidates the limit reranks
        valid = scoring.rerank_slots(relevance, c["ts"], valid, lim)
        relevance = np.where(valid, np.nan_to_num(c["rerank_score"]), 0.0)
    budget = param("token_budget")[..., 0] if "token_budget" in g.values else g.fixed["token_budget"][sl]
    return _Searched(c, lim, valid, relevance, {k: param(k) for k in g.policy.params}, budget)


def _rank_searched(s: _Searched, g: _Grid, age_days: np.ndarray | None = None) -> _Ranked:
    """Score and rank searched probes at every grid point, as ``recall()`` would (``age_days``:
    the slots' ages at every point, shape (*grid, probes, slots), instead of the recorded ones)."""
    c = s.c
    ages = c["age_days"] if age_days is None else age_days
    batch = CandidatePool(relevance=s.relevance, ts=c["ts"], age_days=ages, feedback_signs=c["feedback_signs"],
                          feedback_ages=c["feedback_ages"], tokens=c["tokens"])
    score = g.policy.score(batch, s.params, s.valid)
    score, valid = np.broadcast_arrays(score, s.valid)
    top = scoring.rank_order(score, c["ts"], valid=valid, k=g.kmax)
    in_list = scoring.take_last(valid, top) & (np.arange(top.shape[-1]) < s.limit)
    tokens = _take(c["tokens"], top)
    keep = scoring.fit_budget(tokens, s.budget) & in_list
    return _Ranked(c, top, keep, tokens, s.limit, s.budget)


def _rank_chunk(pools: Mapping[str, np.ndarray], sl: slice, g: _Grid) -> _Ranked:
    """Rank the probes of ``sl`` at every grid point, as ``recall()`` would."""
    return _rank_searched(_search_chunk(pools, sl, g), g)


def _take(x: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``x[probe, top[..., probe, j]]``: a chunk's (probes, slots) array read at the ranked slots."""
    n_probes, width = top.shape[-2], np.shape(x)[-1]
    flat = top + (np.arange(n_probes, dtype=np.int64) * width)[:, None]
    return np.ascontiguousarray(x).reshape(-1)[flat]


def _metrics_of_chunk(pools: Mapping[str, np.ndarray], sl: slice, g: _Grid) -> dict[str, np.ndarray]:
    """Every metric of one slice of probes at every grid point, shape (*grid, probes)."""
    return _metrics_of_ranked(_rank_searched(_compacted(_search_chunk(pools, sl, g), g.kmax), g))


def _compacted(s: _Searched, kmax: int) -> _Searched:
    """``s`` with only the slots some grid point ranks.

    A reranked pool ranks only the candidates its limit reranks (``max(2 x limit, 20)`` of
    the pool's 40 or more), so half of every score, sort and gather of a sweep went to slots
    no point could return. Each probe keeps the slots valid at some point, first and in slot
    order (the tie rule's last key), so the ranking and every metric are the uncompacted
    ones; the slots are those of the compacted arrays (the metrics do not name slots;
    rankings use :func:`_rank_chunk`). A pool whose recorded slots all count is left as it is.
    """
    valid = s.valid
    n_probes, width = valid.shape[-2:]
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


def _frames(replays: list[Replay], g: _Grid, out: dict[str, np.ndarray], n_probes: int) -> SweepResult:
    import pandas as pd

    n_points = out["hit"].shape[0]
    points = g.points
    probe_rows = [(r.name, i, pr.get("label"), pr.get("category")) for r in replays for i, pr in enumerate(r.probes)]

    def tiled(values: list[Any]) -> Any:  # repeated strings as a categorical: cheap to build and to group by
        codes, cats = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
        return pd.Categorical.from_codes(np.tile(codes, n_points), categories=cats)

    def column(j: int, k: str) -> np.ndarray:  # grid axis j's value at every point (token_budget None: NaN)
        col = [p[j] for p in points]
        return np.array([np.nan if v is None else v for v in col], dtype=np.float64) if k == "token_budget" \
            else np.array(col)

    drop = set()
    if not any(r.pools["n_sessions"].any() for r in replays):
        drop.add("session_recall")
    if not any(r.settings.get("token_budget") for r in replays) and "token_budget" not in g.names:
        drop.add("budget_fill")
    metric_cols = [m for m in METRIC_COLUMNS if m not in drop]

    def build_per_probe() -> Any:
        f: dict[str, Any] = {"point": np.repeat(np.arange(n_points), n_probes)}
        for j, k in enumerate(g.names):
            f[k] = np.repeat(column(j, k), n_probes)
        f["conversation"] = tiled([x[0] for x in probe_rows])
        f["probe"] = np.tile(np.array([x[1] for x in probe_rows], dtype=np.int64), n_points)
        f["label"] = tiled([x[2] for x in probe_rows])
        f["category"] = tiled([x[3] for x in probe_rows])
        for m in metric_cols + ["n_results", "tokens"]:
            f[m] = out[m].reshape(-1)
        per_probe = pd.DataFrame(f)
        per_probe.insert(0, "policy", g.policy.name)
        return per_probe

    # The per-point means straight from the (points, probes) arrays: no frame needed.
    agg: dict[str, Any] = {"policy": g.policy.name, "point": np.arange(n_points)}
    for j, k in enumerate(g.names):
        agg[k] = column(j, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a metric no probe can score is NaN
        for m in metric_cols:
            agg["mrr" if m == "rr" else m] = np.nanmean(out[m], axis=1) if n_probes else np.full(n_points, np.nan)
        for m in ("tokens", "n_results"):  # what a point costs: context tokens and results per probe
            agg[m] = out[m].mean(axis=1) if n_probes else np.full(n_points, np.nan)
    agg["probes"] = np.full(n_points, n_probes, dtype=np.int64)
    return SweepResult(per_point=pd.DataFrame(agg), params=g.names, policy=g.policy.name,
                       build_per_probe=build_per_probe)


def rankings(replay: Replay, policy: str | Policy = "blend", recency_from: str | None = None,
             **params: Any) -> list[list[str]]:
    """The ids each probe ships at one point (``params`` as in a grid, one value each).

    This is the sweep engine's own ranking, for comparing with ``recall()`` or showing a
    single point; a sweep ranks every point the same way (``recency_from`` as there).
    """
    pol = get_policy(policy)
    allowed = set(pol.params) | set(SWEEP_KEYS)
    bad = set(params) - allowed
    if bad:
        raise ValueError(f"unknown parameter {sorted(bad)[0]!r}; known: {', '.join(sorted(allowed))}")
    _check_sweepable([replay], pol, params)
    pools = _stack([replay])
    g = _make_grid([replay], pol, {k: [v] for k, v in params.items()}, pools["limit"])
    if replay.n_probes == 0:
        return []
    if replay.recency_for(pol, recency_from) == "accessed":
        whole, index = replay.history()
        arrays = {k: v for k, v in whole.pools.items() if k != "pool_limit"}
        bare = dataclasses.replace(g, fixed={})
        return _accessed_pass(arrays, _replay_fixed(replay, g, 0), bare, whole.pool_ids, index,
                              shipped=True)[1]
    r = _rank_chunk(pools, slice(0, replay.n_probes), g)
    top = r.top.reshape(replay.n_probes, -1)
    keep = r.keep.reshape(replay.n_probes, -1)
    return [[replay.pool_ids[i][j] for j, kp in zip(top[i], keep[i]) if kp] for i in range(replay.n_probes)]


def sweep_modes(replays: Mapping[str, Replay | Sequence[Replay]], grid: Mapping[str, Any] | None = None,
                policy: str | Policy = "blend", **kwargs: Any) -> SweepResult:
    """``mode`` as a grid dimension: one swept result over several search modes.

    A mode decides which memories enter the candidate pool, so each needs its own
    recorded replay (``replay(conv, {"mode": m})``); ``replays`` maps a mode to its
    replay(s). The same ``grid`` is swept over each (``hybrid_weight`` only where the
    mode is hybrid) and the rows are stacked with a ``mode`` column, so a point of
    (mode, parameters) ranks exactly as ``recall(mode=..., ...)`` would.
    """
    import pandas as pd

    if not isinstance(replays, Mapping) or not replays:
        raise TypeError("sweep_modes() needs a dict of mode -> Replay or list of Replays")
    grid = dict(grid or {})
    parts = []
    for mode, reps in replays.items():
        reps = [reps] if isinstance(reps, Replay) else list(reps)
        recorded = {r.mode for r in reps}
        if recorded != {mode}:
            raise ValueError(f"replays under {mode!r} were recorded with mode {sorted(recorded)}")
        g = {k: v for k, v in grid.items() if k != "hybrid_weight" or mode == "hybrid"}
        parts.append((mode, sweep(reps, g, policy, **kwargs)))
    params = ["mode"] + sorted({p for _, res in parts for p in res.params}, key=lambda p: (p != "point", p))

    def stacked(frames: list[tuple[str, Any]]) -> Any:
        return pd.concat([f.assign(mode=mode) for mode, f in frames], ignore_index=True)

    per_point = stacked([(mode, res.per_point) for mode, res in parts])
    return SweepResult(per_point, params, parts[0][1].policy,
                       lambda: stacked([(mode, res.per_probe) for mode, res in parts]))
