"""Every mean the dashboard shows, with its bootstrap 95% interval and the number of probes
behind it (:func:`vxmem.workbench.sweep.holdout.bootstrap_ci`, the CLI's intervals too).

A metric's column in a sweep's ``per_probe`` frame is the probe's value; ``mrr`` is the mean of
``rr``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..sweep.holdout import bootstrap_ci

INTERVAL_COLUMNS = ["metric", "mean", "lo", "hi", "probes"]


def _column(metric: str) -> str:
    return "rr" if metric == "mrr" else metric


def metric_intervals(per_probe: pd.DataFrame, metrics: Sequence[str], *, n_boot: int = 1000,
                     seed: int = 0) -> pd.DataFrame:
    """One row per metric of ``per_probe`` (one row per probe): ``mean``, ``lo``, ``hi``
    (bootstrap 95%) and ``probes``, the probes the metric could score."""
    rows = []
    for m in metrics:
        col = _column(m)
        values = per_probe[col].to_numpy(dtype=np.float64) if col in per_probe else np.zeros(0)
        mean, lo, hi = bootstrap_ci(values, n_boot=n_boot, seed=seed)
        rows.append({"metric": m, "mean": mean, "lo": lo, "hi": hi, "probes": int(np.count_nonzero(~np.isnan(values)))})
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)


def point_intervals(per_probe: pd.DataFrame, metrics: Sequence[str], *, n_boot: int = 500,
                    seed: int = 0) -> pd.DataFrame:
    """For every sweep point of ``per_probe`` (its ``point`` column): ``<metric>_lo`` and
    ``<metric>_hi`` of each metric, and ``<metric>_probes`` scored; indexed by point."""
    out: dict[int, dict[str, float]] = {}
    for point, rows in per_probe.groupby("point", sort=True):
        entry: dict[str, float] = {}
        for m in metrics:
            col = _column(m)
            if col not in rows:
                continue
            values = rows[col].to_numpy(dtype=np.float64)
            _, lo, hi = bootstrap_ci(values, n_boot=n_boot, seed=seed)
            entry.update({f"{m}_lo": lo, f"{m}_hi": hi, f"{m}_probes": int(np.count_nonzero(~np.isnan(values)))})
        out[int(point)] = entry
    # every column even when no probe scored (a dataset without probes): NaN, not a missing column
    columns = [f"{m}_{part}" for m in metrics for part in ("lo", "hi", "probes")]
    return pd.DataFrame.from_dict(out, orient="index").reindex(columns=columns)


def with_intervals(per_point: pd.DataFrame, per_probe: pd.DataFrame, metrics: Sequence[str], *,
                   n_boot: int = 500) -> pd.DataFrame:
    """``per_point`` with each metric's interval and probe count beside it (see :func:`point_intervals`)."""
    ci = point_intervals(per_probe, [m for m in metrics if m in per_point], n_boot=n_boot)
    return per_point.join(ci, on="point") if "point" in per_point else per_point


def side_intervals(frame: pd.DataFrame, metric: str, sides: Sequence[str] = ("a", "b"), *,
                   n_boot: int = 1000) -> pd.DataFrame:
    """An A/B frame's mean of ``metric`` on each side (``<metric>_a``, ``<metric>_b``), with
    intervals and probes; one row per side."""
    per = pd.DataFrame({side: frame[f"{metric}_{side}"] for side in sides if f"{metric}_{side}" in frame})
    return metric_intervals(per, list(per.columns), n_boot=n_boot).rename(columns={"metric": "side"})
