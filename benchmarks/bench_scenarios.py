"""Where recency helps and where it hurts: the spec's blend against plain relevance, per scenario.

    .venv/bin/python -m benchmarks.bench_scenarios [--scenarios knowledge_update,old_but_relevant]

Each shipped synthetic scenario (seed 0) is replayed once per pipeline: the shipped default
(bge-small, hybrid, the cross-encoder rerank) and the hashing embedder's (hybrid, no rerank).
The recorded pools are ranked by the blend (``recall()`` itself) and by relevance alone
(the ``cosine`` policy: no recency, no feedback), and MRR, nDCG@10 and stale-leak@10 printed
side by side. Replays go through the embedding cache (``VXMEM_CACHE_DIR``).
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.harness import Report, flags, parse_list
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import sweep
from vxmem.workbench.synth import SCENARIOS, generate

PIPELINES = {"default (bge + rerank)": None, "hashing (hybrid)": "hashing"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated scenario names")
    args = flags(ap).parse_args(argv)
    rows = []
    for name in parse_list(args.scenarios):
        conv = generate(name)
        for label, emb in PIPELINES.items():
            rep = replay(conv, embedder=emb)
            b = sweep(rep, {}).per_point.iloc[0]
            c = sweep(rep, {}, policy="cosine").per_point.iloc[0]
            best = "blend" if b["mrr"] > c["mrr"] else "cosine" if c["mrr"] > b["mrr"] else ""
            bm = f"**{b['mrr']:.3f}**" if best == "blend" else f"{b['mrr']:.3f}"
            cm = f"**{c['mrr']:.3f}**" if best == "cosine" else f"{c['mrr']:.3f}"
            rows.append({"scenario": name, "pipeline": label, "blend MRR": bm, "cosine MRR": cm,
                         "blend nDCG@10": f"{b['ndcg']:.3f}", "cosine nDCG@10": f"{c['ndcg']:.3f}",
                         "blend stale-leak": f"{b['stale_leak']:.2f}", "cosine stale-leak": f"{c['stale_leak']:.2f}"})
    report = Report("the spec's blend against plain relevance, per scenario")
    report.table("scenarios", rows)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
