"""Honest tuning: tune on some probes, report on the others, with bootstrap intervals.

- :func:`split_probes`: hold out a share of the probes (whole conversations where it can).
- :func:`bootstrap_ci`: a mean and its percentile bootstrap interval.
- :func:`split_report`: tune and holdout means of each metric at one point.
- :func:`tune_holdout`: the grid point best on the tune probes (of equally good ones, the
  nearest the policy's defaults; with ``subject_to``, only among the points whose tune means
  keep those bounds), reported on the holdout ones, so a sweep's best point is not judged on
  the probes that chose it.

The metrics are those :func:`vxmem.workbench.sweep.run.sweep` gives each probe.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import metrics as M
from ..replay.record import as_replays
from .constraints import Constraint, satisfied, unmet
from .grid import as_point
from .policies import get_policy
from .run import sweep

# The per-probe metrics a tuning report carries, as the sweep names them.
REPORT_METRICS = ("ndcg", "rr", "hit", "stale_leak")


@dataclass(frozen=True)
class ProbeSplit:
    """Boolean masks over the probes of a list of replays, in the order a sweep lists them."""

    tune: np.ndarray
    holdout: np.ndarray
    by: str

    def __post_init__(self):
        object.__setattr__(self, "tune", np.asarray(self.tune, dtype=bool))
        object.__setattr__(self, "holdout", np.asarray(self.holdout, dtype=bool))
        if self.tune.shape != self.holdout.shape or np.any(self.tune & self.holdout):
            raise ValueError("tune and holdout must be disjoint masks of one shape")


def _rank_key(seed: int, key: str) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def split_probes(replays, holdout: float = 0.3, seed: int = 0, by: str = "conversation") -> ProbeSplit:
    """Hold out a share of the probes for reporting, the rest for tuning.

    ``by="conversation"`` keeps each conversation whole on one side (probes of one
    conversation share memories, so splitting them leaks) when there are several;
    with one conversation, or ``by="probe"``, probes are split one by one. The split is a
    hash of ``seed`` and each conversation's name (and probe index), so it does not depend
    on the order of ``replays`` or on the numpy version. Both sides get at least one unit.
    """
    reps = as_replays(replays)
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or not 0 < holdout < 1:
        raise ValueError(f"holdout must be a fraction strictly between 0 and 1, got {holdout!r}")
    if by not in ("conversation", "probe"):
        raise ValueError(f"by must be 'conversation' or 'probe', got {by!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    seen: dict[str, int] = {}
    conv_keys = []
    for r in reps:  # the same name twice (two replays of one conversation) stays distinct
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        conv_keys.append(f"{r.name}\x00{n}")
    owner = np.concatenate([np.full(r.n_probes, j) for j, r in enumerate(reps)]).astype(np.int64)
    P = owner.size
    if by == "conversation" and sum(1 for r in reps if r.n_probes) >= 2:
        units = [j for j, r in enumerate(reps) if r.n_probes]
        keys = [conv_keys[j] for j in units]
        mode = "conversation"
    else:
        units = list(range(P))
        index = np.concatenate([np.arange(r.n_probes) for r in reps]).astype(np.int64) if P else np.zeros(0, int)
        keys = [f"{conv_keys[owner[p]]}\x00{index[p]}" for p in units]
        mode = "probe"
    if len(units) < 2:
        raise ValueError(f"cannot split {len(units)} probe(s): tuning and holdout need one each")
    n_hold = min(max(int(math.floor(holdout * len(units) + 0.5)), 1), len(units) - 1)
    order = sorted(range(len(units)), key=lambda u: (_rank_key(int(seed), keys[u]), keys[u]))
    held = {units[u] for u in order[:n_hold]}
    mask = np.isin(owner, list(held)) if mode == "conversation" else np.isin(np.arange(P), list(held))
    return ProbeSplit(tune=~mask, holdout=mask, by=mode)


def bootstrap_ci(values, n_boot: int = 1000, seed: int = 0, ci: float = 0.95,
                 stat: Callable[..., Any] = np.mean) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the mean of ``values`` and its percentile bootstrap interval
    (``stat``: another statistic of them, ``np.median`` say, called with ``axis=``).

    NaNs (probes a metric cannot score) are left out; no values give NaNs. The resamples
    are drawn as one matrix of indices per chunk, so a thousand resamples of ten thousand
    probes stay a few numpy calls.
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1, got {n_boot!r}")
    if isinstance(ci, bool) or not isinstance(ci, (int, float)) or not 0 < ci < 1:
        raise ValueError(f"ci must be a fraction strictly between 0 and 1, got {ci!r}")
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[~np.isnan(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(int(n_boot))
    step = max(1, 4_000_000 // v.size)  # about 32 MB of indices at a time
    for s in range(0, int(n_boot), step):
        k = min(step, int(n_boot) - s)
        means[s:s + k] = stat(v[rng.integers(0, v.size, size=(k, v.size))], axis=1)
    lo, hi = np.quantile(means, [(1.0 - ci) / 2.0, 1.0 - (1.0 - ci) / 2.0])
    return float(stat(v)), float(lo), float(hi)


def _report_rows(values: Mapping[str, np.ndarray], split: ProbeSplit, n_boot: int, seed: int,
                 ci: float) -> pd.DataFrame:
    rows = []
    for m, v in values.items():
        for subset, mask in (("tune", split.tune), ("holdout", split.holdout)):
            part = v[mask]
            mean, lo, hi = bootstrap_ci(part, n_boot=n_boot, seed=seed, ci=ci)
            rows.append({"metric": "mrr" if m == "rr" else m, "subset": subset, "mean": mean, "lo": lo, "hi": hi,
                         "probes": int(np.count_nonzero(~np.isnan(part)))})
    return pd.DataFrame(rows, columns=["metric", "subset", "mean", "lo", "hi", "probes"])


def _check_split(split: ProbeSplit, n_probes: int) -> None:
    if not isinstance(split, ProbeSplit):
        raise TypeError(f"split must be a ProbeSplit from split_probes(), not {type(split).__name__}")
    if split.tune.shape != (n_probes,):
        raise ValueError(f"split covers {split.tune.size} probes; these replays have {n_probes}")


def split_report(replays, params: Mapping[str, Any] | None, split: ProbeSplit, policy="blend",
                 metrics: Sequence[str] = REPORT_METRICS, *, n_boot: int = 1000, seed: int = 0,
                 ci: float = 0.95) -> pd.DataFrame:
    """Tune and holdout means of each metric at one point, with bootstrap intervals.

    One row per metric and subset (``mean``, ``lo``, ``hi``, scored ``probes``); the mean
    of ``rr`` is reported as ``mrr``.
    """
    reps = as_replays(replays)
    _check_split(split, sum(r.n_probes for r in reps))
    point = as_point(params, "params")
    frame = sweep(reps, {k: [v] for k, v in point.items()}, policy=policy).per_probe
    unknown = [m for m in metrics if m not in frame.columns]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; per-probe metrics: {', '.join(M.METRICS)}")
    return _report_rows({m: frame[m].to_numpy(dtype=np.float64) for m in metrics}, split, n_boot, seed, ci)


@dataclass(frozen=True)
class TuningResult:
    """``points``: every grid point with its tune and holdout mean of the metric; ``best``:
    the point chosen on the tune probes alone; ``report``: that point's tune and holdout
    metrics with intervals (see :func:`split_report`)."""

    metric: str
    points: pd.DataFrame
    best: dict[str, Any]
    report: pd.DataFrame


def tune_holdout(replays, grid: Mapping[str, Any], split: ProbeSplit | None = None, metric: str = "ndcg",
                 policy="blend", *, metrics: Sequence[str] = REPORT_METRICS, n_boot: int = 1000, seed: int = 0,
                 ci: float = 0.95, subject_to: Sequence[Constraint] = ()) -> TuningResult:
    """Choose the grid point best on the tune probes, then report it on the holdout ones.

    ``split`` defaults to :func:`split_probes` with its defaults. The best point's holdout
    numbers are the honest estimate; its tune numbers are optimistic by construction.
    ``subject_to``: bounds (:class:`~vxmem.workbench.sweep.constraints.Constraint`, on the
    per-probe metrics' names) the chosen point's tune means must keep; ``points`` then
    carries each bounded metric's tune mean as ``tune_<metric>``. None kept: ``ValueError``.
    """
    reps = as_replays(replays)
    P = sum(r.n_probes for r in reps)
    split = split_probes(reps) if split is None else split
    _check_split(split, P)
    res = sweep(reps, grid, policy=policy)
    per = res.per_probe
    if metric not in per.columns:
        raise ValueError(f"unknown metric {metric!r}; per-probe metrics: {', '.join(M.METRICS)}")
    G = len(res.per_point)
    values = per[metric].to_numpy(dtype=np.float64).reshape(G, P)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a subset with nothing to score is NaN
        tune = np.nanmean(np.where(split.tune, values, np.nan), axis=1)
        hold = np.nanmean(np.where(split.holdout, values, np.nan), axis=1)
    name = "mrr" if metric == "rr" else metric
    points = res.per_point[["point", *res.params]].copy()
    points[f"tune_{name}"] = tune
    points[f"holdout_{name}"] = hold
    if np.all(np.isnan(tune)):
        raise ValueError(f"no tune probe can be scored on {metric!r}")
    key = np.where(np.isnan(tune), np.inf, tune if metric in M.LOWER_IS_BETTER else -tune)  # NaN: never best
    if subject_to:
        key = np.where(_kept(points, per, split, G, P, subject_to), key, np.inf)
        if np.all(np.isinf(key)):
            raise ValueError(unmet(_tune_means(per, split, G, P, subject_to), subject_to) + " on the tune probes")
    g = _nearest_default(points, list(res.params), key, get_policy(policy).defaults)
    best = {k: _py(points[k].iloc[g]) for k in res.params}
    rows = per[per["point"] == g]
    report = _report_rows({m: rows[m].to_numpy(dtype=np.float64) for m in metrics}, split, n_boot, seed, ci)
    return TuningResult(metric=name, points=points, best=best, report=report)


def _tune_means(per: pd.DataFrame, split: ProbeSplit, G: int, P: int,
                subject_to: Sequence[Constraint]) -> pd.DataFrame:
    """Each grid point's tune mean of every bounded metric, one column per metric."""
    out = {}
    for c in subject_to:
        if c.metric not in per.columns:
            raise ValueError(f"cannot bound {c.metric!r}; per-probe metrics: {', '.join(M.METRICS)}")
        values = per[c.metric].to_numpy(dtype=np.float64).reshape(G, P)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[c.metric] = np.nanmean(np.where(split.tune, values, np.nan), axis=1)
    return pd.DataFrame(out)


def _kept(points: pd.DataFrame, per: pd.DataFrame, split: ProbeSplit, G: int, P: int,
          subject_to: Sequence[Constraint]) -> np.ndarray:
    """Which grid points' tune means keep every bound (their means added to ``points``)."""
    means = _tune_means(per, split, G, P, subject_to)
    for name in means.columns:
        points[f"tune_{'mrr' if name == 'rr' else name}"] = means[name].to_numpy()
    return satisfied(means, subject_to)


def _nearest_default(points: pd.DataFrame, params: Sequence[str], key: np.ndarray,
                     defaults: Mapping[str, Any]) -> int:
    """The best point by ``key`` (lowest); among points that tie, the one nearest the policy's
    ``defaults`` (each parameter scaled to its range on the grid), not the grid's first."""
    best = np.flatnonzero(np.abs(key - key.min()) <= 1e-12)
    distance = np.zeros(len(best))
    for p in params:
        if p not in defaults:
            continue
        v = pd.to_numeric(points[p], errors="coerce").to_numpy(dtype=np.float64)
        span = float(np.nanmax(v) - np.nanmin(v)) or 1.0
        distance += np.abs(v[best] - float(defaults[p])) / span
    return int(best[int(np.argmin(distance))])


def _py(v):
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v
