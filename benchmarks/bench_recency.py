"""Does the default recency earn its place? A half-life x weight sweep per scenario, paired against none.

    .venv/bin/python -m benchmarks.bench_recency [--scenarios knowledge_update,plain_chat] [--locomo PATH]

Each shipped synthetic scenario (seed 0, the default pipeline: bge-small, hybrid, the
cross-encoder rerank) is replayed once and its recorded pools ranked at every point of a
grid of ``half_life_days`` x ``recency_weight`` (:func:`vxmem.workbench.sweep.run.sweep`,
the functions ``recall()`` ranks with). Per scenario it prints nDCG@10 and stale-leak@10 with
no recency (weight 0) and at the seed's defaults (7 days, 0.5), the paired difference of the
two over probes with its 95% bootstrap interval, and the grid's best nDCG (ties go to the
point nearest the defaults). A difference whose interval excludes 0 is marked: recency
helps (+) or hurts (-) there. ``--locomo`` adds each conversation of a LoCoMo file, with
recall@10 as well.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.harness import Report, flags, parse_list
from vxmem.workbench.datasets import load_locomo
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.holdout import bootstrap_ci
from vxmem.workbench.sweep.run import sweep
from vxmem.workbench.synth import SCENARIOS, generate

HALF_LIVES = (1.0, 3.0, 7.0, 14.0, 30.0, 90.0)
WEIGHTS = (0.0, 0.1, 0.25, 0.5, 1.0)
DEFAULT = {"half_life_days": 7.0, "recency_weight": 0.5}


def at(per_probe: pd.DataFrame, half_life: float, weight: float) -> pd.DataFrame:
    """The per-probe rows of one grid point, in probe order."""
    rows = per_probe[(per_probe["half_life_days"] == half_life) & (per_probe["recency_weight"] == weight)]
    return rows.sort_values(["conversation", "probe"], kind="stable")


def best_point(per_point: pd.DataFrame) -> pd.Series:
    """The grid point with the best nDCG; among equals, the one nearest the defaults."""
    near = sum(np.abs(per_point[k].astype(float) - v) / (per_point[k].max() - per_point[k].min() or 1.0)
               for k, v in DEFAULT.items())
    frame = per_point.assign(_near=near, _ndcg=per_point["ndcg"].round(4))
    return frame.sort_values(["_ndcg", "_near"], ascending=[False, True], kind="stable").iloc[0]


def row(name: str, rep: Any, with_recall: bool = False, points: list[pd.DataFrame] | None = None) -> dict[str, Any]:
    """One table row: ``rep`` (a replay) swept over the grid and read at no recency and the defaults;
    the sweep's per-point table is appended to ``points``."""
    res = sweep(rep, {"half_life_days": list(HALF_LIVES), "recency_weight": list(WEIGHTS)}, progress=False)
    if points is not None:
        points.append(res.per_point)
    none = at(res.per_probe, HALF_LIVES[0], 0.0)  # every half-life ranks alike at weight 0
    dflt = at(res.per_probe, DEFAULT["half_life_days"], DEFAULT["recency_weight"])
    diff = dflt["ndcg"].to_numpy() - none["ndcg"].to_numpy()
    mean, lo, hi = bootstrap_ci(diff)
    sign = "+" if lo > 0 else "-" if hi < 0 else ""
    best = best_point(res.per_point)
    out = {"dataset": name, "probes": int(np.isfinite(diff).sum()),
           "nDCG, no recency": f"{np.nanmean(none['ndcg']):.3f}", "nDCG, default": f"{np.nanmean(dflt['ndcg']):.3f}",
           "default - none [95%]": f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}] {sign}".rstrip(),
           "best nDCG (half-life, weight)": f"{best['ndcg']:.3f} ({best['half_life_days']:g}, "
                                            f"{best['recency_weight']:g})",
           "stale-leak, none / default": f"{np.nanmean(none['stale_leak']):.2f} / {np.nanmean(dflt['stale_leak']):.2f}"}
    if with_recall:
        out["R@10, none / default"] = f"{np.nanmean(none['recall']):.3f} / {np.nanmean(dflt['recall']):.3f}"
    return out


def scenario_rows(names: Iterable[str], points: list[pd.DataFrame]) -> list[dict[str, Any]]:
    return [row(name, replay(generate(name)), points=points) for name in names]


def across(points: list[pd.DataFrame], top: int = 5) -> list[dict[str, Any]]:
    """Every grid point's nDCG averaged over the scenarios (each counts once): the best ``top``,
    then no recency and the defaults with their rank among all points."""
    mean = pd.concat(points).groupby(list(DEFAULT))["ndcg"].mean().sort_values(ascending=False, kind="stable")
    ranks = {key: i + 1 for i, key in enumerate(mean.index)}

    def line(key: tuple[float, float], label: str = "") -> dict[str, Any]:
        return {"half-life (days)": f"{key[0]:g}", "weight": f"{key[1]:g}", "mean nDCG": f"{mean[key]:.3f}",
                "rank": f"{ranks[key]} of {len(mean)}", "": label}

    rows = [line(key) for key in list(mean.index)[:top]]
    rows.append(line((DEFAULT["half_life_days"], DEFAULT["recency_weight"]), "the defaults"))
    rows.append(line(min(k for k in mean.index if k[1] == 0.0), "no recency"))  # every half-life ties at 0
    return rows


def locomo_rows(path: str) -> list[dict[str, Any]]:
    return [row(f"LoCoMo {conv.name}", replay(conv), with_recall=True) for conv in load_locomo(path)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated scenario names ('' for none)")
    ap.add_argument("--locomo", help="a LoCoMo JSON file (not shipped): its conversations too")
    args = flags(ap).parse_args(argv)
    report = Report("does the default recency earn its place? (half-life x weight, paired against none)")
    note = (f"grid: half-life {', '.join(f'{h:g}' for h in HALF_LIVES)} days x weight "
            f"{', '.join(f'{w:g}' for w in WEIGHTS)}; default = 7 days, 0.5; + / -: the interval excludes 0")
    if args.scenarios:
        points: list[pd.DataFrame] = []
        report.table("scenarios", scenario_rows(parse_list(args.scenarios), points), note)
        report.table("across the scenarios", across(points), "each scenario's nDCG@10 counts once")
    if args.locomo:
        report.table("LoCoMo", locomo_rows(args.locomo), note)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
