"""Where recency helps and where it hurts: the spec's blend against plain relevance, per scenario.

    .venv/bin/python benchmarks/bench_scenarios.py [--scenarios knowledge_update,old_but_relevant]

Each shipped synthetic scenario (seed 0) is replayed once per pipeline: the shipped default
(bge-small, hybrid, the cross-encoder rerank) and the hashing embedder's (hybrid, no rerank).
The recorded pools are ranked by the blend (``recall()`` itself) and by relevance alone
(the ``cosine`` policy: no recency, no feedback), and MRR, nDCG@10 and stale-leak@10 printed
side by side. Replays go through the embedding cache (``VXMEM_CACHE_DIR``).
"""

from __future__ import annotations

import argparse
import sys

from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import sweep
from vxmem.workbench.synth import SCENARIOS, generate

PIPELINES = {"default (bge + rerank)": None, "hashing (hybrid)": "hashing"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated scenario names")
    args = ap.parse_args(argv)
    names = [s for s in args.scenarios.split(",") if s]
    print("| scenario | pipeline | blend MRR | cosine MRR | blend nDCG@10 | cosine nDCG@10 | "
          "blend stale-leak | cosine stale-leak |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        conv = generate(name)
        for label, emb in PIPELINES.items():
            rep = replay(conv, embedder=emb)
            b = sweep(rep, {}).per_point.iloc[0]
            c = sweep(rep, {}, policy="cosine").per_point.iloc[0]
            best = "blend" if b["mrr"] > c["mrr"] else "cosine" if c["mrr"] > b["mrr"] else ""
            bm = f"**{b['mrr']:.3f}**" if best == "blend" else f"{b['mrr']:.3f}"
            cm = f"**{c['mrr']:.3f}**" if best == "cosine" else f"{c['mrr']:.3f}"
            print(f"| {name} | {label} | {bm} | {cm} | {b['ndcg']:.3f} | {c['ndcg']:.3f} | "
                  f"{b['stale_leak']:.2f} | {c['stale_leak']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
