"""Named settings side by side: each named point's metric on every dataset, with intervals, and
over all of them (the probes pooled), so one configuration is judged on more than one scenario;
and each one's headline metrics on the dataset at hand, beside the current settings'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..replay.record import Replay
from ..sweep.holdout import bootstrap_ci
from .replays import probe_metrics_at

__all__ = ["ALL_DATASETS", "across_datasets", "named_here"]

ALL_DATASETS = "all datasets"  # the row of the probes of every dataset pooled


def across_datasets(replays: Mapping[str, Sequence[Replay]], points: Mapping[str, Mapping[str, Any]],
                    metric: str = "ndcg", n_boot: int = 500) -> pd.DataFrame:
    """One row per (dataset, named point): ``metric``'s mean over the dataset's probes at that point
    (exactly ``recall()``'s), its bootstrap 95% interval and the probes scored; then one row per
    point over :data:`ALL_DATASETS` (the probes pooled) with ``macro``, the mean of the datasets'
    means (every dataset weighs the same, however many probes it has)."""
    col = "rr" if metric == "mrr" else metric
    rows = []
    for name, point in points.items():
        pooled, means = [], []
        for dataset, reps in replays.items():
            values = probe_metrics_at(list(reps), point)[col].to_numpy(dtype=np.float64)
            mean, lo, hi = bootstrap_ci(values, n_boot=n_boot)
            rows.append({"dataset": dataset, "config": name, "mean": mean, "lo": lo, "hi": hi,
                         "probes": int(np.count_nonzero(~np.isnan(values))), "macro": np.nan})
            pooled.append(values)
            if not np.isnan(mean):
                means.append(mean)
        values = np.concatenate(pooled) if pooled else np.zeros(0)
        mean, lo, hi = bootstrap_ci(values, n_boot=n_boot)
        rows.append({"dataset": ALL_DATASETS, "config": name, "mean": mean, "lo": lo, "hi": hi,
                     "probes": int(np.count_nonzero(~np.isnan(values))),
                     "macro": float(np.mean(means)) if means else np.nan})
    return pd.DataFrame(rows, columns=["dataset", "config", "mean", "lo", "hi", "probes", "macro"])


def named_here(replays: Sequence[Replay], points: Mapping[str, Mapping[str, Any]],
               metrics: Sequence[str] = ("hit", "mrr", "ndcg", "stale_leak"), n_boot: int = 500) -> pd.DataFrame:
    """One row per (named point, metric) on one dataset: the metric's mean over ``replays``' probes at
    that point (exactly ``recall()``'s), its bootstrap 95% interval and the probes scored, in the
    order of ``points``. A point these replays cannot rank (a limit wider than a reranked replay's
    pools) gets NaN and the reason in ``note``, so one such setting does not hide the others."""
    rows = []
    for name, point in points.items():
        try:
            per = probe_metrics_at(list(replays), point)
        except ValueError as exc:
            rows += [{"config": name, "metric": m, "mean": np.nan, "lo": np.nan, "hi": np.nan, "probes": 0,
                      "note": str(exc)} for m in metrics]
            continue
        for m in metrics:
            values = per["rr" if m == "mrr" else m].to_numpy(dtype=np.float64)
            mean, lo, hi = bootstrap_ci(values, n_boot=n_boot)
            rows.append({"config": name, "metric": m, "mean": mean, "lo": lo, "hi": hi,
                         "probes": int(np.count_nonzero(~np.isnan(values))), "note": ""})
    return pd.DataFrame(rows, columns=["config", "metric", "mean", "lo", "hi", "probes", "note"])
