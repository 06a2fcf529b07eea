"""Choosing a best setting honestly: not a degenerate one, ties broken toward the default, and
reported on probes that did not choose it.

- :func:`pick_best`: the Sweep page's "best point" of a grid. The limit and the token budget
  change what a metric@k counts (a limit of 1 leaks least, a limit of 20 hits most), so they
  stay at the shared setting; among equally good points the one nearest the library's defaults
  wins; a parameter that has no effect at the best point (half-life under a recency weight of
  0) is left where it is, and said so. ``subject_to`` picks only among the points that keep
  bounds on other metrics ("the best nDCG with stale-leak at most 0.1").
- :func:`compare_policies`: the Compare page's table, each policy's best chosen on the tune
  probes and reported, beside its default, on the held-out ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import metrics as M
from ..analysis import questions
from ..replay.record import Replay
from ..sweep.constraints import Constraint, satisfied, unmet
from ..sweep.holdout import split_probes
from ..sweep.policies import POLICIES
from ..sweep.run import sweep
from .intervals import metric_intervals
from .replays import POLICY_GRIDS, REPORT_METRICS
from .settings import DEFAULT_POINT, grid_point

# What a metric@k counts moves with these: a best point is never picked along them.
SIZE_AXES = ("limit", "token_budget")
TIE = 1e-9  # means closer than this are one value (float noise of the same rankings)


@dataclass(frozen=True)
class Pick:
    """A grid's best point: ``row`` (of the frame), ``values`` to make the settings (the axes that
    have an effect there), ``tied`` (points as good as it) and ``notes`` (what was held or left, and why)."""

    row: pd.Series
    values: dict[str, Any]
    tied: int
    notes: list[str] = field(default_factory=list)


def _nearest(values: pd.Series, target: float) -> float:
    v = pd.to_numeric(values, errors="coerce").dropna().unique()
    return float(v[np.argmin(np.abs(v - target))])


def _distance(frame: pd.DataFrame, axes: Sequence[str], toward: Mapping[str, Any]) -> np.ndarray:
    """How far each row sits from ``toward`` on ``axes``, each axis scaled to its range on the grid."""
    out = np.zeros(len(frame))
    for a in axes:
        v = pd.to_numeric(frame[a], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
        span = float(v.max() - v.min()) or 1.0
        out += np.abs(v - float(toward.get(a) or 0)) / span
    return out


def pick_best(frame: pd.DataFrame, metric: str, axes: Sequence[str], current: Mapping[str, Any],
              defaults: Mapping[str, Any] = DEFAULT_POINT, lower: bool | None = None,
              subject_to: Sequence[Constraint] = ()) -> Pick:
    """The best point of a sweep ``frame`` (one row per point; ``axes`` its swept columns) on ``metric``,
    lowest for the leaks (``lower`` says so for a column of another name); ``current``: the shared
    settings, ``defaults``: where ties lean; ``subject_to``: bounds on other columns the point must
    keep (``ValueError`` saying how close the grid came when no point keeps them)."""
    rows, notes = frame, []
    for a in axes:
        if a in SIZE_AXES:
            held = _nearest(rows[a], float(current.get(a) or 0))
            rows = rows[pd.to_numeric(rows[a], errors="coerce").fillna(0) == held]
            notes.append(f"`{a}` is held at {held:g}: it changes what a metric@k counts (a limit of 1 leaks least, "
                         "a large one hits most), so the best point is picked at the shared value")
    scored = rows[rows[metric].notna()]
    if scored.empty:
        raise ValueError(f"no point of the grid can be scored on {metric}")
    if subject_to:
        kept = scored[satisfied(scored, subject_to)]
        if kept.empty:
            raise ValueError(unmet(scored, subject_to))
        notes.append(f"picked among the {len(kept)} of {len(scored)} points that keep "
                     + " and ".join(map(str, subject_to)))
        scored = kept
    lower = metric in M.LOWER_IS_BETTER if lower is None else lower
    top = float(scored[metric].min() if lower else scored[metric].max())
    tied = scored[(scored[metric] - top).abs() <= TIE]
    free = [a for a in axes if a not in SIZE_AXES]
    row = tied.iloc[int(np.argmin(_distance(tied, free, defaults)))]
    if len(tied) > 1:
        notes.append(f"{len(tied)} points tie on {metric}; the one nearest the defaults is picked")
    point = {**{k: v for k, v in current.items() if k in (*DEFAULT_POINT, "hybrid_weight", "mode")},
             **{a: row[a] for a in axes}}
    inert = questions.inert_parameters(grid_point({k: v for k, v in point.items() if k in DEFAULT_POINT}))
    values = {}
    for a in axes:
        if a in inert:
            notes.append(f"`{a}` has no effect at the best point ({inert[a]}): it is left at its current value")
        elif a not in SIZE_AXES:
            values[a] = float(row[a])
    return Pick(row=row, values=values, tied=len(tied), notes=notes)


def _split(replays: Sequence[Replay], holdout: float, seed: int):
    try:
        return split_probes(list(replays), holdout=holdout, seed=seed)
    except ValueError:  # fewer than two probes (or conversations): nothing to hold out
        return None


def _policy_rows(replays: Sequence[Replay], name: str, grid: Mapping[str, list], shared: Mapping[str, list],
                 metric: str, split, metrics: Sequence[str]) -> list[dict[str, Any]]:
    pol = POLICIES[name]
    axes = {k: sorted({*grid.get(k, []), v}) for k, v in pol.defaults.items()}  # the default is always a point
    res = sweep(list(replays), {**shared, **axes}, policy=name)
    per = res.per_probe.sort_values(["point"], kind="stable")
    G = len(res.per_point)
    P = len(per) // max(G, 1)
    col = "rr" if metric == "mrr" else metric
    values = per[col].to_numpy(dtype=np.float64).reshape(G, P) if G and P else np.full((G, 0), np.nan)
    tune = split.tune if split is not None else np.ones(P, dtype=bool)
    report = split.holdout if split is not None else np.ones(P, dtype=bool)
    with np.errstate(all="ignore"):
        chosen = np.array([np.nanmean(v[tune]) if np.any(~np.isnan(v[tune])) else np.nan for v in values])
    points = res.per_point.assign(tune_score=chosen)
    default_g = int(np.flatnonzero(np.all([points[k] == v for k, v in pol.defaults.items()], axis=0))[0]) \
        if pol.defaults else 0
    best_g = default_g
    if points["tune_score"].notna().any():
        pick = pick_best(points, "tune_score", list(pol.defaults), {}, pol.defaults,
                         lower=metric in M.LOWER_IS_BETTER)
        best_g = int(pick.row["point"])
    rows = []
    for setting, g in (("default", default_g), ("best", best_g)):
        at = per[per["point"] == g].iloc[np.flatnonzero(report)] if P else per.iloc[:0]
        ci = metric_intervals(at, metrics, n_boot=500).set_index("metric")
        params = {k: float(points.loc[points["point"] == g, k].iloc[0]) for k in pol.params}
        rows.append({"policy": name, "setting": setting,
                     "params": ", ".join(f"{k}={v:g}" for k, v in params.items()) or "(none)",
                     **{m: ci.loc[m, "mean"] for m in metrics},
                     **{f"{m}_{b}": ci.loc[m, b] for m in metrics for b in ("lo", "hi")},
                     "probes": int(ci["probes"].max()) if len(ci) else 0,  # the probes it is reported on
                     "tuned_on": int(np.count_nonzero(tune)) if setting == "best" and grid else 0,
                     "description": pol.description})
    return rows


def compare_policies(replays: Sequence[Replay], metric: str = "ndcg",
                     grids: Mapping[str, Mapping[str, list]] | None = None,
                     point: Mapping[str, Any] | None = None, *, holdout: float = 0.3, seed: int = 0) -> pd.DataFrame:
    """One row per policy at its default parameters and one at its best on ``metric``.

    The best is chosen on a tune share of the probes (:func:`vxmem.workbench.sweep.holdout.split_probes`, as the
    Sweep page's honest tuning) and both rows are reported on the held-out rest, so "best" is not judged on the
    probes that chose it (with fewer than two probes, on all of them). ``grids`` says where each policy's best is
    searched (default :data:`POLICY_GRIDS`); ``point`` may fix ``limit`` and ``token_budget`` for every policy.
    ``tuned_on``: the probes the best was chosen on; ``probes``: the probes it is reported on.
    """
    grids = POLICY_GRIDS if grids is None else grids
    shared = {k: [v] for k, v in grid_point(point or {}).items() if k in SIZE_AXES}
    split = _split(replays, holdout, seed)
    rows = []
    for name in POLICIES:
        rows += _policy_rows(replays, name, grids.get(name) or {}, shared, metric, split, REPORT_METRICS)
    return pd.DataFrame(rows)
