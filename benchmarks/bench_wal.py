"""A writer that keeps committing: remember() latency and the size its WAL file reaches, trees side by side.

    .venv/bin/python -m benchmarks.bench_wal --trees before=/path/to/old/checkout,after=. --calls 20000 --rounds 2

Each round, for each tree in turn, a child process that imports vxmem from that tree writes
``--calls`` memories one ``remember()`` at a time into a fresh database file (bench_memory's
trivial embedder and sentences, 50 sessions, no HNSW index), and prints the wall-clock
p50 / p99 / p99.9 / max of the calls after the first 1,000 and the size of the WAL file at
the end. PASSIVE checkpoints alone never rewound a busy writer's WAL, so it grew by about
58 MB per 1,000 calls; the WAL column shows whether a tree bounds it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

import numpy as np

from benchmarks.corpora import SESSIONS, T0, make_embedder, sentence
from benchmarks.harness import Report, flags, parse_trees, percentiles, run_child, timed, vxmem_from

SKIP = 1000  # the first calls, left out of the figures


def child(tree: str, path: str, calls: int) -> dict:
    from vxmem import Vectrix

    vxmem_from(tree)
    db = Vectrix(path, embedder=make_embedder("trivial"), exact_threshold=10**9)
    rng = np.random.default_rng(0)
    texts = [sentence(rng) for _ in range(calls)]
    got = timed(lambda i: db.remember(texts[i], session=f"s{i % SESSIONS}", timestamp=T0 + i), calls)
    wal = os.path.getsize(path + "-wal")
    db.close()
    return percentiles(got.wall[SKIP:], scale=1e3) | {"wal_mb": wal / 2**20}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default="this=.", help="name=path,... code trees side by side")
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = flags(ap, rounds=2, rounds_help="rounds over the trees").parse_args(argv)
    if args._child:
        print(json.dumps(child(**json.loads(args._child))))
        return 0
    trees = dict(parse_trees(args.trees))
    work = tempfile.mkdtemp(prefix="vxmem-wal-")
    rows: dict[str, list[dict]] = {name: [] for name in trees}
    try:
        for r in range(args.rounds):
            for name, tree in trees.items():
                path = os.path.join(work, f"{name}{r}.vxdb")
                spec = {"tree": tree, "path": path, "calls": args.calls}
                rows[name].append(run_child(__spec__.name, "--_child", spec, tree=tree))
                for ext in ("", "-wal", "-shm"):
                    if os.path.exists(path + ext):
                        os.remove(path + ext)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = Report(f"{args.calls} remember() calls in a row, one child per tree and round, load average "
                    f"{os.getloadavg()[0]:.1f}")
    report.table("wal", [{"tree": name, "round": r + 1, "p50 ms": f"{g['p50']:.3f}", "p99 ms": f"{g['p99']:.3f}",
                          "p99.9 ms": f"{g['p999']:.3f}", "max ms": f"{g['max']:.1f}", "WAL MB": f"{g['wal_mb']:.0f}"}
                         for name, got in rows.items() for r, g in enumerate(got)])
    report.raw = rows
    print(report.title)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
