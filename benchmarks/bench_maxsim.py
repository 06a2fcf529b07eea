"""MaxSim's time per recall at the depths a late-interaction stage reads, beside the float reference.

    .venv/bin/python -m benchmarks.bench_maxsim [--depths 60,120,240] [--rounds 300] [--locomo PATH]

A recall of the default preset scores its candidates twice, against each one's own token vectors
and against those read in context, in one MaxSim call over both: 120 candidates are 240 readings.
Readings are the stored sign bits of real turns: LoCoMo's (a path: the file is not shipped) or
texts of two memory-like sentences, about a LoCoMo turn's length. The query is a question of 18
tokens. For each depth (readings per call) it prints the median ms of

- ``maxsim``: :func:`vxmem.models.late.maxsim` as shipped (each doc's best token taken on the integer
  dot products, then scaled);
- ``scaled first``: the same integer dot products (:func:`vxmem.models.late.token_dots`), every one
  scaled to a cosine before the best is taken (the reference: the shipped scores must equal it bit
  for bit, which the run checks);

each way in turn, and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

import numpy as np

import vxmem  # noqa: F401  (onnxruntime before usearch)
from benchmarks.corpora import locomo_turns, sentence
from benchmarks.harness import Report, flags, timed
from vxmem.models.late import DIMS, LateInteraction, TokenBits, maxsim, token_dots

QUERY = "What did she say about the painting she finished for the art show last month?"


def scaled_first(query: np.ndarray, docs: Sequence[TokenBits]) -> np.ndarray:
    """The reference: MaxSim with every dot product scaled to a cosine before each doc's best is taken."""
    d = token_dots(query, docs)
    return np.maximum.reduceat(d.cosines(d.dots), d.starts, axis=0).mean(axis=1)


def texts(n: int, locomo: str | None) -> list[str]:
    if locomo:
        return locomo_turns(locomo)[:n]
    rng = np.random.default_rng(0)
    return [f"{sentence(rng)} {sentence(rng)}" for _ in range(n)]


def median_ms(fn, rounds: int) -> float:
    return timed(lambda i: fn(), rounds, warmup=1).ms()["p50"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="60,120,240", help="candidates a recall reads (two readings each)")
    ap.add_argument("--locomo", help="a LoCoMo JSON file whose turns are the readings (not shipped)")
    args = flags(ap, rounds=300, rounds_help="timed calls per depth and way").parse_args(argv)
    depths = [int(d) for d in args.depths.split(",")]
    late = LateInteraction()
    docs = late.encode(texts(2 * max(depths), args.locomo))
    query = late.query(QUERY)
    tokens = np.mean([len(d) // (DIMS // 8) for d in docs])
    report = Report(f"MaxSim: {len(docs)} readings of {tokens:.1f} tokens on average; a query of {len(query)} "
                    f"tokens; median of {args.rounds} calls, ms")
    print(report.title)
    rows = []
    for depth in depths:
        part = docs[: 2 * depth]
        same = np.array_equal(maxsim(query, part), scaled_first(query, part))
        times = {"maxsim": [], "scaled": []}
        for r in range(3):  # each way in turn, the order alternating
            ways = [("maxsim", maxsim), ("scaled", scaled_first)]
            for name, fn in ways if r % 2 == 0 else ways[::-1]:
                times[name].append(median_ms(lambda fn=fn, part=part: fn(query, part), args.rounds // 3))
        a, b = statistics.median(times["maxsim"]), statistics.median(times["scaled"])
        rows.append({"candidates": depth, "readings": 2 * depth, "maxsim": f"{a:.3f}", "scaled first": f"{b:.3f}",
                     "ratio": f"{b / a:.2f}x", "same scores": "yes" if same else "NO"})
    report.table("maxsim", rows)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
