"""Which search mode wins where: dense, lexical (BM25) and hybrid recall quality, side by side.

    .venv/bin/python benchmarks/bench_mode_quality.py [--limit 10] [--embedder hashing|default|semantic]

Replays every shipped synthetic dataset and the LoCoMo / LongMemEval-format fixtures
through the memory once per mode (spec blend on top, default settings) and prints hit@k,
recall@k, MRR, nDCG@k and stale-leak@k per dataset and mode, best of each row marked.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from vxmem.workbench.analysis import metrics as M
from vxmem.workbench.datasets import load
from vxmem.workbench.replay.run import replay

ROOT = Path(__file__).resolve().parents[1] / "datasets"
MODES = ("dense", "lexical", "hybrid")


def datasets() -> list[tuple[str, list]]:
    out = [(p.stem, load(p)) for p in sorted(ROOT.glob("*.jsonl"))]
    out.append(("locomo fixture", load(ROOT / "fixtures" / "locomo_sample.json", format="locomo")))
    out.append(("longmemeval fixture", load(ROOT / "fixtures" / "longmemeval_sample.json", format="longmemeval")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--embedder", choices=("hashing", "default", "semantic"), default="hashing")
    args = ap.parse_args()
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
    print(f"embedder: {args.embedder}; limit {k}; best MRR per dataset in bold\n")
    print(f"| dataset | probes | mode | hit@{k} | recall@{k} | MRR | nDCG@{k} | stale-leak@{k} |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, group in frame.groupby("dataset", sort=False):
        best = group["mrr"].max()
        for _, r in group.iterrows():
            mode = f"**{r['mode']}**" if r["mrr"] == best else r["mode"]
            print(f"| {name} | {r['probes']} | {mode} | {r['hit']:.2f} | {r['recall']:.2f} | {r['mrr']:.3f} | "
                  f"{r['ndcg']:.3f} | {r['stale_leak']:.2f} |")
    means = frame.groupby("mode", sort=False)[["hit", "recall", "mrr", "ndcg", "stale_leak"]].mean()
    print("\nmean over datasets:")
    print(means.round(3).to_string())


if __name__ == "__main__":
    main()
