"""Re-rank cached candidate pools for every point of a parameter grid, vectorised.

``sweep(replay, grid)`` takes the pools a :class:`~vxmem.replay.Replay` recorded and ranks
them for every combination of the grid's values with numpy broadcasting and the very
functions ``recall()`` uses (:func:`vxmem.scoring.score_pool` through the ``blend``
policy, :func:`~vxmem.scoring.rank_order`, :func:`~vxmem.scoring.fit_budget`): no
re-embedding, no re-search. Each grid parameter gets its own array axis, so a part of the
score that depends on one parameter (the decay on ``half_life_days``, the feedback on
``feedback_half_life_days``) is computed once per value, not once per point.

A point ranks every probe exactly as ``recall()`` with those parameters would have at that
moment (``tests/test_sweep.py`` proves it), with two limits of what a cached pool can know:
``score_gap`` is not swept (replay without it), and a ``limit`` whose pool
(``max(4 x limit, 40)``) is bigger than the recorded one needs a replay with a bigger
``pool_limit``. A smaller limit's pool is the prefix of the recorded one by relevance; it
equals ``recall()``'s own unless raw relevances tie exactly at the pool's edge.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import metrics as M
from . import scoring
from .policies import check_param, get_policy
from .replay import Replay

SWEEP_KEYS = ("limit", "token_budget", "hybrid_weight")


class SweepResult:
    """``per_point``: the mean of each metric per grid point (``mrr`` is the mean reciprocal
    rank; NaNs, e.g. recall of a probe with nothing relevant, are skipped) and the probe
    count; ``per_probe``: one row per point and probe, built on first use; ``params``: the
    grid's columns."""

    def __init__(self, per_point, params: List[str], policy: str, build_per_probe):
        self.per_point = per_point
        self.params = params
        self.policy = policy
        self._build = build_per_probe
        self._per_probe = None

    @property
    def per_probe(self):
        if self._per_probe is None:
            self._per_probe = self._build()
        return self._per_probe

    def __repr__(self) -> str:
        return f"SweepResult(policy={self.policy!r}, {len(self.per_point)} points, params={self.params})"

    def by_category(self):
        """Per point and probe category (when the data has categories)."""
        return M.aggregate(self.per_probe, by=["point"] + self.params, category=True)

    def best(self, metric: str = "ndcg", n: int = 5):
        """The ``n`` points with the best mean ``metric`` (lowest for the leaks), first on ties."""
        return self.per_point.sort_values(metric, ascending=metric in M.LOWER_IS_BETTER, kind="stable").head(n)

    def to_frames(self) -> Dict[str, Any]:
        return {"per_probe": self.per_probe, "per_point": self.per_point}


def _as_list(name, values) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, np.ndarray, range)):
        values = [values]
    values = list(values)
    if not values:
        raise ValueError(f"grid value list for {name} is empty")
    return values


def _check_int(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} values must be ints >= 1{' or None' if allow_none else ''}, got {v!r}")
    return int(v)


def _stack(replays: Sequence[Replay]) -> Dict[str, Any]:
    """One padded set of pool arrays over several replays, with per-probe settings."""
    P = sum(r.n_probes for r in replays)
    N = max((r.pools["relevance"].shape[1] for r in replays), default=0)
    E = max((r.pools["feedback_signs"].shape[2] for r in replays), default=0)
    R = max((r.pools["ideal"].shape[1] for r in replays), default=1)
    if len(replays) == 1:
        out = {k: v for k, v in replays[0].pools.items() if k != "pool_limit"}
    else:
        out = {}
        for k in replays[0].pools:
            if k == "pool_limit":
                continue
            parts = []
            for r in replays:
                a = r.pools[k]
                if a.ndim >= 2:
                    width = {"ideal": R}.get(k, N)
                    pad = [(0, 0), (0, width - a.shape[1])] + ([(0, E - a.shape[2])] if a.ndim == 3 else [])
                    a = np.pad(a, pad, constant_values=np.nan if k == "lexical" else 0)
                parts.append(a)
            out[k] = np.concatenate(parts, axis=0) if parts else np.zeros(0)
    out["P"], out["N"] = P, N
    return out


def _per_probe_setting(replays, key, default=None):
    vals = []
    for r in replays:
        v = r.settings.get(key, default)
        vals += [v] * r.n_probes
    return vals


def sweep(replays: Union[Replay, Sequence[Replay]], grid: Optional[Mapping[str, Any]] = None, policy="blend",
          *, n_jobs: int = 1, chunk_elements: int = 300_000, progress: Optional[bool] = False) -> SweepResult:
    """Rank every probe of ``replays`` at every point of ``grid``; returns a :class:`SweepResult`.

    ``grid`` maps parameter names to a value or a list of values; the points are their
    Cartesian product. Names: the policy's parameters (blend: ``half_life_days``,
    ``recency_weight``, ``feedback_weight``, ``feedback_half_life_days``), ``limit``,
    ``token_budget`` (None: no budget) and, for replays in hybrid mode, ``hybrid_weight``.
    A parameter left out keeps each replay's own setting (policy defaults for the other
    policies). Several replays (say, every LoCoMo conversation) are swept together.
    ``n_jobs`` ranks chunks of probes in that many threads (-1: every core).
    """
    from tqdm.auto import tqdm

    replays = [replays] if isinstance(replays, Replay) else list(replays)
    if not replays or not all(isinstance(r, Replay) for r in replays):
        raise TypeError("sweep() needs a Replay or a list of Replays")
    pol = get_policy(policy)
    grid = dict(grid or {})
    allowed = set(pol.params) | set(SWEEP_KEYS)
    unknown = set(grid) - allowed
    if unknown:
        raise ValueError(f"cannot sweep {sorted(unknown)[0]!r} with policy {pol.name!r}; "
                         f"sweepable: {', '.join(sorted(allowed))}")
    if any(r.settings.get("score_gap") is not None for r in replays):
        raise ValueError("sweeps do not apply score_gap; replay with score_gap=None")
    modes = {r.settings.get("mode") or "dense" for r in replays}
    if "hybrid_weight" in grid and modes != {"hybrid"}:
        raise ValueError("hybrid_weight can be swept only over replays recorded with mode='hybrid'")

    # The grid's axes, token_budget first: it only matters after ranking.
    names = [k for k in ("token_budget", "limit", "hybrid_weight") if k in grid]
    names += [k for k in pol.params if k in grid]
    values: Dict[str, list] = {}
    for k in names:
        vals = _as_list(k, grid[k])
        if k == "limit":
            vals = [_check_int(k, v) for v in vals]
        elif k == "token_budget":
            vals = [_check_int(k, v, allow_none=True) for v in vals]
        else:
            vals = [check_param(k, v) for v in vals]
        values[k] = vals
    shape = tuple(len(values[k]) for k in names)
    A = len(names)

    pools = _stack(replays)
    P, N = pools["P"], pools["N"]
    cap = np.concatenate([np.full(r.n_probes, scoring.pool_size(int(r.settings["pool_limit"]))) for r in replays]) \
        if P else np.zeros(0, dtype=np.int64)
    limits = values.get("limit")
    if limits:
        need = max(scoring.pool_size(l) for l in limits)
        if P and need > cap.min():
            raise ValueError(f"limit {max(limits)} needs pools of {need} candidates; these replays recorded "
                             f"{int(cap.min())} (replay with pool_limit={max(limits)})")
        if "hybrid" in modes and any(scoring.pool_size(l) != c for l in limits for c in set(cap.tolist())):
            raise ValueError("a hybrid pool is not a prefix of a bigger one: sweep only limits whose pool "
                             "size equals the recorded one")

    def axis(k, arr):
        shp = [1] * A
        shp[names.index(k)] = len(arr)
        arr = [np.inf if v is None else v for v in arr]  # token_budget None: no budget
        return np.asarray(arr, dtype=np.float64).reshape(shp + [1, 1])

    # Parameters: a grid axis, or each probe's own replay setting (shape (P,)).
    fixed: Dict[str, np.ndarray] = {}
    for k in pol.params:
        if k not in values:
            base = [r.settings.get(k, pol.defaults[k]) for r in replays]
            fixed[k] = np.concatenate([np.full(r.n_probes, check_param(k, v)) for r, v in zip(replays, base)]) \
                if P else np.zeros(0)
    if "limit" not in values:
        fixed["limit"] = pools["limit"].astype(np.float64)
    if "token_budget" not in values:
        fixed["token_budget"] = np.array([np.inf if b is None else float(b)
                                          for b in _per_probe_setting(replays, "token_budget")])
    if "hybrid" in modes and "hybrid_weight" not in values:
        fixed["hybrid_weight"] = np.array([float(w if w is not None else 0.5)
                                           for w in _per_probe_setting(replays, "hybrid_weight", 0.5)])
    kmax = max(limits) if limits else (int(pools["limit"].max()) if P else 1)
    G = int(np.prod(shape)) if shape else 1

    out = {m: np.full((G, P), np.nan) for m in ("hit", "recall", "rr", "ndcg", "stale_leak", "foreign_leak",
                                                 "session_recall", "budget_fill")}
    out["n_results"] = np.zeros((G, P), dtype=np.int64)
    out["tokens"] = np.zeros((G, P), dtype=np.int64)
    score_points = int(np.prod([s for k, s in zip(names, shape) if k != "token_budget"])) if shape else 1
    step = max(1, int(chunk_elements // max(1, score_points * max(N, 1))))
    chunks = range(0, P, step)
    def run(p0):
        sl = slice(p0, min(P, p0 + step))
        return sl, _rank_chunk(pools, sl, pol, names, values, fixed, axis, A, kmax, modes)

    if n_jobs == 1:
        results = map(run, chunks)
    else:  # numpy sorts and ufuncs release the GIL: threads share the pools without copying
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")(delayed(run)(p) for p in chunks)
    for sl, res in tqdm(results, total=len(chunks), desc="sweep", unit="chunk",
                        disable=(not progress) if progress is not None else None, leave=False):
        for m, arr in res.items():
            out[m][:, sl] = np.broadcast_to(arr, shape + arr.shape[-1:]).reshape(G, -1)
    return _frames(replays, pol, names, values, shape, out, P)


def _rank_chunk(pools, sl, pol, names, values, fixed, axis, A, kmax, modes, want_order=False):
    """Rank one slice of probes at every grid point; metrics arrays of shape (*grid, probes)."""
    c = {k: pools[k][sl] for k in ("relevance", "dense", "lexical", "ts", "age_days", "tokens", "grade", "stale",
                                     "foreign", "session_bits", "feedback_signs", "feedback_ages", "n", "ideal",
                                     "n_relevant", "n_sessions")}
    Pc, N = c["relevance"].shape

    def param(k):  # grid axis (*grid, 1, 1) or per-probe (Pc, 1)
        if k in values:
            return axis(k, values[k])
        return fixed[k][sl].reshape(Pc, 1)

    lim = param("limit").astype(np.int64)
    slot = np.arange(N)
    # The pool a limit would have searched: the first max(4 x limit, 40) by relevance.
    ps = np.maximum(4 * lim, scoring.pool_size(0))
    if "hybrid" in modes:  # the union of two top lists: the recorded pool is the whole pool
        ps = np.full_like(ps, N)
    n_valid = np.minimum(c["n"].reshape(Pc, 1), ps)
    valid = slot < n_valid
    pool = {"age_days": c["age_days"], "feedback_signs": c["feedback_signs"], "feedback_ages": c["feedback_ages"],
            "relevance": c["relevance"]}
    if "hybrid" in modes:
        pool["relevance"] = scoring.fuse_relevance(c["dense"], c["lexical"], param("hybrid_weight"), valid=valid)
    params = {k: param(k) for k in pol.params}
    score = pol.score(pool, params, valid)
    score, valid = np.broadcast_arrays(score, valid)
    top = scoring.rank_order(score, c["ts"], valid=valid, k=kmax)
    k = top.shape[-1]
    flat = top + (np.arange(Pc, dtype=np.int64) * N)[:, None]  # into the chunk's (Pc, N) arrays

    def take(x):
        return np.ascontiguousarray(x).reshape(-1)[flat]

    in_list = (top < n_valid) & (np.arange(k) < lim)
    tokens = take(c["tokens"])
    budget = param("token_budget")[..., 0] if "token_budget" in values else fixed["token_budget"][sl]
    keep = scoring.fit_budget(tokens, budget) & in_list
    if want_order:
        return top, keep
    # Shipped results first, in rank order: a budget can skip one and take the next.
    # Without budgets the shipped list is already a prefix.
    def ranked(x):
        x = np.broadcast_to(take(x), keep.shape)
        return x if prefix else scoring.take_last(x, idx)

    prefix = bool(np.all(np.isinf(budget)))
    idx = None if prefix else np.argsort(~keep, axis=-1, kind="stable")
    kept = keep if prefix else scoring.take_last(keep, idx)
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


def _frames(replays, pol, names, values, shape, out, P) -> SweepResult:
    import pandas as pd

    G = out["hit"].shape[0]
    points = list(itertools.product(*[values[k] for k in names])) if names else [()]
    probe_rows = []
    for r in replays:
        for i, pr in enumerate(r.probes):
            probe_rows.append((r.name, i, pr.get("label"), pr.get("category")))
    def tiled(values):  # repeated strings as a categorical: cheap to build and to group by
        codes, cats = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
        return pd.Categorical.from_codes(np.tile(codes, G), categories=cats)

    drop = set()
    if not any(r.pools["n_sessions"].any() for r in replays):
        drop.add("session_recall")
    if not any(r.settings.get("token_budget") for r in replays) and "token_budget" not in names:
        drop.add("budget_fill")
    metric_cols = [m for m in ("hit", "recall", "rr", "ndcg", "stale_leak", "foreign_leak", "session_recall",
                               "budget_fill") if m not in drop]

    def build_per_probe():
        f = {"point": np.repeat(np.arange(G), P)}
        for j, k in enumerate(names):
            col = [p[j] for p in points]
            if k == "token_budget":
                f[k] = np.repeat(np.array([np.nan if v is None else v for v in col], dtype=np.float64), P)
            else:
                f[k] = np.repeat(np.array(col), P)
        f["conversation"] = tiled([x[0] for x in probe_rows])
        f["probe"] = np.tile(np.array([x[1] for x in probe_rows], dtype=np.int64), G)
        f["label"] = tiled([x[2] for x in probe_rows])
        f["category"] = tiled([x[3] for x in probe_rows])
        for m in metric_cols + ["n_results", "tokens"]:
            f[m] = out[m].reshape(-1)
        per_probe = pd.DataFrame(f)
        per_probe.insert(0, "policy", pol.name)
        return per_probe

    # The per-point means straight from the (points, probes) arrays: no frame needed.
    agg = {"policy": pol.name, "point": np.arange(G)}
    for j, k in enumerate(names):
        col = [p[j] for p in points]
        agg[k] = np.array([np.nan if v is None else v for v in col], dtype=np.float64) \
            if k == "token_budget" else np.array(col)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a metric no probe can score is NaN
        for m in metric_cols:
            agg["mrr" if m == "rr" else m] = np.nanmean(out[m], axis=1) if P else np.full(G, np.nan)
    agg["probes"] = np.full(G, P, dtype=np.int64)
    per_point = pd.DataFrame(agg)
    return SweepResult(per_point=per_point, params=names, policy=pol.name, build_per_probe=build_per_probe)


def rankings(replay: Replay, policy="blend", **params) -> List[List[str]]:
    """The ids each probe ships at one point (``params`` as in a grid, one value each).

    This is the sweep engine's own ranking, for comparing with ``recall()`` or showing a
    single point; a sweep ranks every point the same way.
    """
    pol = get_policy(policy)
    grid = {k: [v] for k, v in params.items()}
    allowed = set(pol.params) | set(SWEEP_KEYS)
    bad = set(grid) - allowed
    if bad:
        raise ValueError(f"unknown parameter {sorted(bad)[0]!r}; known: {', '.join(sorted(allowed))}")
    names = [k for k in ("token_budget", "limit", "hybrid_weight") if k in grid] + [k for k in pol.params if k in grid]
    values = {k: ([_check_int(k, v, allow_none=(k == "token_budget")) for v in grid[k]]
                  if k in ("limit", "token_budget") else [check_param(k, v) for v in grid[k]]) for k in names}
    pools = _stack([replay])
    P = pools["P"]
    A = len(names)
    modes = {replay.settings.get("mode") or "dense"}

    def axis(k, arr):
        shp = [1] * A
        shp[names.index(k)] = len(arr)
        return np.asarray(arr, dtype=np.float64).reshape(shp + [1, 1])

    fixed = {k: np.full(P, float(replay.settings.get(k, pol.defaults[k]))) for k in pol.params if k not in values}
    fixed["limit"] = pools["limit"].astype(np.float64)
    b = replay.settings.get("token_budget")
    fixed["token_budget"] = np.full(P, np.inf if b is None else float(b))
    fixed["hybrid_weight"] = np.full(P, float(replay.settings.get("hybrid_weight") or 0.5))
    if "token_budget" in values:
        values["token_budget"] = [np.inf if v is None else v for v in values["token_budget"]]
    kmax = values["limit"][0] if "limit" in values else (int(pools["limit"].max()) if P else 1)
    if P == 0:
        return []
    top, keep = _rank_chunk(pools, slice(0, P), pol, names, values, fixed, axis, A, kmax, modes, want_order=True)
    top = top.reshape(P, -1)
    keep = keep.reshape(P, -1)
    return [[replay.pool_ids[i][j] for j, kp in zip(top[i], keep[i]) if kp] for i in range(P)]


def sweep_modes(replays: Mapping[str, Union[Replay, Sequence[Replay]]], grid: Optional[Mapping[str, Any]] = None,
                policy="blend", **kwargs) -> SweepResult:
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
        recorded = {r.settings.get("mode") or "dense" for r in reps}
        if recorded != {mode}:
            raise ValueError(f"replays under {mode!r} were recorded with mode {sorted(recorded)}")
        g = {k: v for k, v in grid.items() if k != "hybrid_weight" or mode == "hybrid"}
        parts.append((mode, sweep(reps, g, policy, **kwargs)))
    params = ["mode"] + sorted({p for _, res in parts for p in res.params}, key=lambda p: (p != "point", p))

    def stacked(frames):
        return pd.concat([f.assign(mode=mode) for mode, f in frames], ignore_index=True)

    per_point = stacked([(mode, res.per_point) for mode, res in parts])
    return SweepResult(per_point, params, getattr(parts[0][1], "policy", policy),
                       lambda: stacked([(mode, res.per_probe) for mode, res in parts]))
