"""Which search mode wins where: dense, lexical (BM25) and hybrid recall quality, side by side.

    .venv/bin/python -m benchmarks.bench_mode_quality [--limit 10] [--embedder hashing|default|semantic]

Replays every shipped synthetic dataset and the LoCoMo / LongMemEval-format fixtures
through the memory once per mode (spec blend on top, default settings) and prints hit@k,
recall@k, MRR, nDCG@k and stale-leak@k per dataset and mode, best of each row marked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import pandas as pd

from benchmarks.corpora import DATASETS
from benchmarks.harness import Report, flags
from vxmem.workbench.analysis import metrics as M
from vxmem.workbench.datasets import load
from vxmem.workbench.replay.run import replay

MODES = ("dense", "lexical", "hybrid")


def datasets() -> list[tuple[str, list]]:
    out = [(p.stem, load(p)) for p in sorted(DATASETS.glob("*.jsonl"))]
    out.append(("locomo fixture", load(DATASETS / "fixtures" / "locomo_sample.json", format="locomo")))
    out.append(("longmemeval fixture", load(DATASETS / "fixtures" / "longmemeval_sample.json", format="longmemeval")))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--embedder", choices=("hashing", "default", "semantic"), default="hashing")
    args = flags(ap).parse_args(argv)
    embedder = {"hashing": "hashing", "default": "bge-small"}.get(args.embedder)  # default: with its rerank
    if args.embedder == "semantic":
        from vxmem.models.embed import SemanticEmbedder

        embedder = SemanticEmbedder()
    rows = []
    for name, convs in datasets():
        for mode in MODES:
            probes = pd.concat([replay(c, {"mode": mode, "limit": args.limit}, embedder=embedder).to_frames()["probes"]
                                for c in convs], ignore_index=True)
            agg = M.aggregate(probes).iloc[0]
            rows.append({"dataset": name, "mode": mode, "probes": int(agg["probes"]), "hit": agg["hit"],
                         "recall": agg["recall"], "mrr": agg["mrr"], "ndcg": agg["ndcg"],
                         "stale_leak": agg["stale_leak"]})
    frame = pd.DataFrame(rows)
    k = args.limit
    report = Report(f"embedder: {args.embedder}; limit {k}; best MRR per dataset in bold")
    table = []
    for name, group in frame.groupby("dataset", sort=False):
        best = group["mrr"].max()
        for _, r in group.iterrows():
            table.append({"dataset": name, "probes": r["probes"],
                          "mode": f"**{r['mode']}**" if r["mrr"] == best else r["mode"], f"hit@{k}": f"{r['hit']:.2f}",
                          f"recall@{k}": f"{r['recall']:.2f}", "MRR": f"{r['mrr']:.3f}",
                          f"nDCG@{k}": f"{r['ndcg']:.3f}", f"stale-leak@{k}": f"{r['stale_leak']:.2f}"})
    report.table("modes", table)
    means = frame.groupby("mode", sort=False)[["hit", "recall", "mrr", "ndcg", "stale_leak"]].mean().round(3)
    report.table("mean over datasets", means.reset_index().to_dict("records"))
    print(report.title + "\n")
    report.print("modes")
    print("mean over datasets:")
    print(means.to_string())
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
