"""Re-rank cached candidate pools for every point of a parameter grid, vectorised.

``sweep(replay, grid)`` takes the pools a :class:`~vxmem.workbench.replay.record.Replay` recorded and ranks
them for every combination of the grid's values with numpy broadcasting and the very
functions ``recall()`` uses (:func:`vxmem.ranking.scoring.score_pool` through the ``blend``
policy, :func:`~vxmem.ranking.scoring.rank_order`, :func:`~vxmem.ranking.scoring.fit_budget`): no
re-embedding, no re-search. Each grid parameter gets its own array axis, so a part of the
score that depends on one parameter (the decay on ``half_life_days``, the feedback on
``feedback_half_life_days``) is computed once per value, not once per point. The grid and
its checks are :mod:`vxmem.workbench.sweep.grid`'s; the ranking of a chunk of probes at every point
is :mod:`vxmem.workbench.sweep.engine`'s.

A point ranks every probe exactly as ``recall()`` with those parameters would have at that
moment (``tests/test_sweep.py`` proves it), with two limits of what a cached pool can know:
``score_gap`` is not swept (replay without it), and a ``limit`` whose pool
(``max(4 x limit, 40)``) is bigger than the recorded one needs a replay with a bigger
``pool_limit``. A smaller limit's pool is the prefix of the recorded one by relevance (for
hybrid pools, the members within both of its top lists); it equals ``recall()``'s own unless
raw relevances tie exactly at the pool's edge. A reranked replay (``Replay.rerank``) records
the reranker's score of every candidate some limit up to ``pool_limit`` would rerank, so a
point ranks the ones its own limit (and, hybrid, its own weight) reranks.

Chunks of probes are ranked through joblib, so a cluster's joblib backend spreads them
over its workers and nothing else changes (a test runs one on a Dask ``LocalCluster``)::

    with joblib.parallel_config(backend="dask"):      # after dask.distributed.Client(...)
        res = sweep(replays, grid)                      # n_jobs=None: the backend's workers
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...core.checks import check_limit
from ...core.progress import Progress, Reporter
from ...ranking.blend import Blend
from ..analysis import metrics as M
from ..replay.record import Replay
from .engine import CHUNK_ARRAYS, accessed_metrics, chunk_metrics, replay_fixed, shipped_ids
from .grid import SWEEP_KEYS, Grid, blend_axes, check_pool_sizes, check_sweepable, make_grid
from .policies import Policy, get_policy

METRIC_COLUMNS = ("hit", "recall", "rr", "ndcg", "stale_leak", "foreign_leak", "session_recall", "budget_fill")


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
        """The ``n`` points with the best mean ``metric`` (lowest for the leaks), first on ties;
        ``"rr"``, a probe's reciprocal rank, ranks by its mean, ``"mrr"``."""
        n = check_limit(n, "n")
        metric = "mrr" if metric == "rr" else metric
        measured = [c for c in self.per_point.columns if c not in (*self.params, "policy", "point", "probes")]
        if metric not in measured:
            raise KeyError(f"metric {metric!r} is not in this sweep; metrics: {', '.join(map(str, measured))}")
        return self.per_point.sort_values(metric, ascending=metric in M.LOWER_IS_BETTER, kind="stable").head(n)

    def to_frames(self) -> dict[str, Any]:
        """``per_probe`` and ``per_point``."""
        return {"per_probe": self.per_probe, "per_point": self.per_point}


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


def sweep(replays: Replay | Sequence[Replay], grid: Mapping[str, Any] | Blend | Sequence[Blend] | None = None,
          policy: str | Policy = "blend",
          *, n_jobs: int | None = None, chunk_elements: int = 300_000, progress: Progress = False,
          recency_from: str | None = None) -> SweepResult:
    """Rank every probe of ``replays`` at every point of ``grid``; returns a :class:`SweepResult`.

    ``grid`` maps parameter names to a value or a list of values; the points are their
    Cartesian product. Names: the policy's parameters (blend: ``half_life_days``,
    ``recency_weight``, ``feedback_weight``, ``feedback_half_life_days``), ``limit``,
    ``token_budget`` (None: no budget) and, for replays in hybrid mode, ``hybrid_weight``.
    For the blend, ``grid`` may be a set of blends instead: one
    :class:`~vxmem.ranking.blend.Blend`, or a list that is a whole grid
    (``Blend.grid(half_life_days=[1, 7], recency_weight=[0, 0.5])``).
    A parameter left out keeps each replay's own setting (policy defaults for the other
    policies). Several replays (say, every LoCoMo conversation) are swept together.

    :param n_jobs: rank chunks of probes through joblib with that many workers (threads by
        default; -1: every core). None: what the active joblib backend says (one outside a
        ``joblib.parallel_config``; a Dask cluster's workers inside ``backend="dask"``).
    :param chunk_elements: about how many (point, slot) scores one chunk computes at once.
    :param progress: report chunks done: a bar (True; None: tqdm decides) or a callable
        ``progress(done, total, desc)`` (see :class:`vxmem.core.progress.Reporter`).
    :param recency_from: what ages count from: ``"created"`` or ``"accessed"`` (default: each
        replay's :meth:`~vxmem.workbench.replay.record.Replay.recency_for` the policy). From access, a
        replay's probes are ranked in order, one job per replay: each probe's ages count
        from the last probe whose ranking at that point returned the memory.
    """
    from joblib import Parallel

    replays = [replays] if isinstance(replays, Replay) else list(replays)
    if not replays or not all(isinstance(r, Replay) for r in replays):
        raise TypeError("sweep() needs a Replay or a list of Replays")
    pol = get_policy(policy)
    if isinstance(grid, Blend) or (isinstance(grid, (list, tuple)) and _blends(grid)):
        grid = blend_axes(grid, replays)
    elif grid is not None and not isinstance(grid, Mapping):
        raise TypeError("a sweep grid is a mapping of parameter -> values, a Blend, or a list of Blends")
    grid = dict(grid or {})
    check_sweepable(replays, pol, grid)
    pools = _stack(replays)
    g = make_grid(replays, pol, grid, pools["limit"])
    check_pool_sizes(replays, g)
    n_probes = pools["relevance"].shape[0]
    n_points = int(np.prod(g.shape)) if g.shape else 1
    out = {m: np.full((n_points, n_probes), np.nan) for m in METRIC_COLUMNS}
    out["n_results"] = np.zeros((n_points, n_probes), dtype=np.int64)
    out["tokens"] = np.zeros((n_points, n_probes), dtype=np.int64)
    slices, jobs = _jobs(replays, pools, g, [r.recency_for(pol, recency_from) == "accessed" for r in replays],
                         chunk_elements)
    bar = Reporter(progress, len(slices), "sweep", unit="chunk")
    try:
        for sl, res in zip(slices, Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")(jobs)):
            for m, arr in res.items():
                out[m][:, sl] = np.broadcast_to(arr, g.shape + arr.shape[-1:]).reshape(n_points, -1)
            bar.update()
    finally:
        bar.close()
    return _frames(replays, g, out, n_probes)


def _blends(grid: Sequence[Any]) -> bool:
    """Whether the list ``grid`` is a set of blends."""
    return bool(grid) and all(isinstance(b, Blend) for b in grid)


def _jobs(replays: list[Replay], pools: dict[str, np.ndarray], g: Grid, accessed: list[bool],
          chunk_elements: int) -> tuple[list[slice], Iterator[Any]]:
    """The probes each job ranks and the joblib jobs: chunks of about ``chunk_elements``
    (point, slot) scores, or one job per replay whose ages count from access (``accessed``)."""
    from joblib import delayed

    n_probes, width = pools["relevance"].shape
    # token_budget applies after scoring: a chunk scores once per point of the other axes
    score_points = int(np.prod([n for k, n in zip(g.names, g.shape) if k != "token_budget"])) if g.shape else 1
    step = max(1, int(chunk_elements // max(1, score_points * max(width, 1))))
    slices = [slice(p0, min(n_probes, p0 + step)) for p0 in range(0, n_probes, step)]
    # Each job gets its own chunk of the arrays (a view for threads; all a remote worker is
    # sent). numpy sorts and ufuncs release the GIL, so threads are the local default.
    bare = dataclasses.replace(g, fixed={})

    def chunk(sl: slice) -> Any:  # a job ranking the probes of sl together
        return delayed(chunk_metrics)({k: pools[k][sl] for k in CHUNK_ARRAYS if k in pools},
                                      {k: v[sl] for k, v in g.fixed.items()}, bare)

    if any(accessed):  # probe after probe within a replay: one job per replay
        starts = np.cumsum([0] + [r.n_probes for r in replays])
        slices = [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
        jobs = (delayed(accessed_metrics)(r, replay_fixed(r, g, sl.start), bare) if acc and r.n_probes else chunk(sl)
                for r, acc, sl in zip(replays, accessed, slices))
    else:
        jobs = (chunk(sl) for sl in slices)
    return slices, jobs


def _frames(replays: list[Replay], g: Grid, out: dict[str, np.ndarray], n_probes: int) -> SweepResult:
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
    check_sweepable([replay], pol, params)
    pools = _stack([replay])
    g = make_grid([replay], pol, {k: [v] for k, v in params.items()}, pools["limit"])
    if replay.n_probes == 0:
        return []
    return shipped_ids(replay, pools, g, replay.recency_for(pol, recency_from) == "accessed")


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
