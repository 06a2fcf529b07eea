"""The dashboard's one-click report: the figures of the picked dataset at the shared settings, as
:func:`vxmem.workbench.analysis.report.report_bundle` writes them, a bundle read back beside them, and
the benchmark table papers print (a metric per category and conversation, with intervals)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..analysis.metrics import by_category_and_conversation
from ..analysis.report import REPORT_METRICS, report_bundle
from ..replay.record import Replay
from ..sweep.holdout import bootstrap_ci
from .replays import probe_metrics_at

__all__ = ["run_report", "report_versus", "category_table"]


def run_report(replays: Sequence[Replay], params: Mapping[str, Any], dataset: str, sha256: str,
               settings: Mapping[str, Any]) -> dict[str, Any]:
    """The report of ``replays`` ranked at ``params`` (the page's point: exactly ``recall()``'s
    figures with them), recording ``settings`` (the page's, sliders included)."""
    per = probe_metrics_at(replays, params).reset_index(drop=True)
    recorded = [(r, p) for r in replays for p in r.probes]
    rows = [{"label": p.get("label"), "query": p.get("query"), "session": p.get("session"),
             "category": p.get("category"), "conversation": r.name, "recall_ms": p.get("recall_ms"),
             **{m: per.at[i, m] for m in REPORT_METRICS}} for i, (r, p) in enumerate(recorded)]
    return report_bundle(replays, dataset, sha256, probes=rows, settings=dict(settings))


def report_versus(loaded: Mapping[str, Any], current: Mapping[str, Any]) -> pd.DataFrame:
    """A loaded report's overall figures beside the current run's: one row per metric, each
    with its mean and interval, and whether the two intervals overlap."""
    rows = []
    for m, old in loaded["metrics"]["overall"].items():
        new = current["metrics"]["overall"].get(m, {})
        both = old.get("value") is not None and new.get("value") is not None
        rows.append({"metric": m, "report": old.get("value"), "report_lo": old.get("lo"), "report_hi": old.get("hi"),
                     "now": new.get("value"), "now_lo": new.get("lo"), "now_hi": new.get("hi"),
                     "intervals_overlap": bool(both and old["lo"] <= new["hi"] and new["lo"] <= old["hi"])
                     if both else None})
    return pd.DataFrame(rows)


def category_table(replays: Sequence[Replay], params: Mapping[str, Any], metric: str = "recall") -> pd.DataFrame:
    """``metric`` at ``params`` per probe category (rows, then "all") and conversation (columns, then
    "all"), each cell its mean and bootstrap 95% interval: the table ``vxmem replay`` prints for a
    benchmark file (:func:`vxmem.workbench.analysis.metrics.by_category_and_conversation`)."""
    per = probe_metrics_at(replays, params)
    return by_category_and_conversation(per.assign(category=per["category"].fillna("(none)")),
                                        "rr" if metric == "mrr" else metric, bootstrap_ci)
