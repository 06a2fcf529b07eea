"""Peak memory of one large remember_many(): N memories in one call, one transaction.

    .venv/bin/python -m benchmarks.bench_remember_many --n 200000
    .venv/bin/python -m benchmarks.bench_remember_many --n 200000 --trees before=/tmp/old-tree,after=.

Each tree (``--trees``: vxmem imported from that tree, the benchmark from this one) runs in a
fresh child process, ``--rounds`` times, taking turns: it makes N turns over 50 sessions
(6-14 words each, ``benchmarks.corpora.bare_sentence``), opens a new database file, resets
the process's peak RSS (Linux's ``clear_refs``), stores them all with one ``remember_many()``
on the ``trivial`` embedder (a table lookup: the memory layer's own cost, no model's) and
reports the RSS before the call, its peak during the call, the RSS once it returned, and its
time. "peak beyond" is the peak less the RSS before: what the call itself needed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from benchmarks.corpora import TrivialEmbedder, bare_sentence
from benchmarks.harness import Report, Timer, flags, median, parse_trees, peak_rss_mb, rss_mb, run_child, vxmem_from

MODULE = "benchmarks.bench_remember_many"
T0 = 1_700_000_000.0


def reset_peak() -> bool:
    """Reset this process's peak RSS to its RSS now (Linux); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One call of ``remember_many()`` of ``spec["n"]`` turns into a new file, measured."""
    vxmem_from(spec["tree"])
    from vxmem import Vectrix

    rng = random.Random(11)
    items = [{"text": bare_sentence(rng, str(i)), "session": f"s{i % 50}", "timestamp": T0 + i * 60.0}
             for i in range(spec["n"])]
    with tempfile.TemporaryDirectory() as d:
        db = Vectrix(os.path.join(d, "many.vxdb"), embedder=TrivialEmbedder())
        before = rss_mb()
        reset_peak()
        with Timer() as t:
            ids = db.remember_many(items)
        out = {"seconds": t.wall, "rss_before_mb": before, "peak_mb": peak_rss_mb(), "rss_after_mb": rss_mb()}
        assert len(ids) == len(items) == len(db)
        db.close()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = flags(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]), rounds=1,
               rounds_help="runs of each tree, taking turns")
    ap.add_argument("--n", type=int, default=200_000, help="memories in the one call (default 200000)")
    ap.add_argument("--trees", help="name=path,... : vxmem from each tree (default: this one)")
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._worker:
        print(json.dumps(worker(json.loads(args._worker))))
        return
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for name, tree in parse_trees(args.trees):
            got = run_child(MODULE, "--_worker", {"n": args.n, "tree": tree}, tree=tree)
            print(f"{name}: {got}", file=sys.stderr, flush=True)
            runs.setdefault(name, []).append(got)
    rows = []
    for name, got in runs.items():
        med = {k: float(median(g[k] for g in got) or 0.0) for k in got[0]}
        rows.append({"tree": name, "memories": args.n, "seconds": f"{med['seconds']:.1f}",
                     "RSS before (MB)": f"{med['rss_before_mb']:.0f}", "peak (MB)": f"{med['peak_mb']:.0f}",
                     "peak beyond (MB)": f"{med['peak_mb'] - med['rss_before_mb']:.0f}",
                     "RSS after (MB)": f"{med['rss_after_mb']:.0f}"})
    report = Report(title="One remember_many() of N memories: peak memory")
    report.table("remember_many", rows, note=f"medians of {args.rounds} run(s) per tree; trivial embedder")
    report.raw = runs
    report.print()
    report.save(args)


if __name__ == "__main__":
    main()
