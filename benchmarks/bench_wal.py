"""A writer that keeps committing: remember() latency and the size its WAL file reaches, trees side by side.

    python benchmarks/bench_wal.py --trees before=/path/to/old/checkout,after=. --calls 20000 --rounds 2

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
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def child(tree: str, path: str, calls: int) -> dict:
    sys.path.insert(0, tree)
    sys.path.insert(1, HERE)
    import bench_memory as bm

    import vxmem
    from vxmem import Vectrix

    if not os.path.abspath(vxmem.__file__).startswith(os.path.abspath(tree)):
        raise SystemExit(f"vxmem came from {vxmem.__file__}, not {tree}")
    db = Vectrix(path, embedder=bm.make_embedder("trivial"), exact_threshold=10**9)
    rng = np.random.default_rng(0)
    texts = [bm.sentence(rng) for _ in range(calls)]
    ts = []
    for i, text in enumerate(texts):
        t = time.perf_counter()
        db.remember(text, session=f"s{i % bm.SESSIONS}", timestamp=bm.T0 + i)
        ts.append(time.perf_counter() - t)
    wal = os.path.getsize(path + "-wal")
    db.close()
    ms = np.array(ts[1000:]) * 1e3
    return {"p50": float(np.median(ms)), "p99": float(np.percentile(ms, 99)), "p999": float(np.percentile(ms, 99.9)),
            "max": float(ms.max()), "wal_mb": wal / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default="this=.", help="name=path,... code trees side by side")
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._child:
        print(json.dumps(child(**json.loads(args._child))))
        return
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    work = tempfile.mkdtemp(prefix="vxmem-wal-")
    rows: dict[str, list[dict]] = {name: [] for name in trees}
    try:
        for r in range(args.rounds):
            for name, tree in trees.items():
                path = os.path.join(work, f"{name}{r}.vxdb")
                spec = {"tree": os.path.abspath(tree), "path": path, "calls": args.calls}
                got = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child", json.dumps(spec)],
                                     capture_output=True, text=True, check=True)
                rows[name].append(json.loads(got.stdout.strip().splitlines()[-1]))
                for ext in ("", "-wal", "-shm"):
                    if os.path.exists(path + ext):
                        os.remove(path + ext)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.calls} remember() calls in a row, one child per tree and round, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'tree':10s} {'round':>5s} {'p50 ms':>8s} {'p99 ms':>8s} {'p99.9 ms':>9s} {'max ms':>8s} {'WAL MB':>8s}")
    for name, got in rows.items():
        for r, g in enumerate(got):
            print(f"{name:10s} {r + 1:5d} {g['p50']:8.3f} {g['p99']:8.3f} {g['p999']:9.3f} {g['max']:8.1f} "
                  f"{g['wal_mb']:8.0f}")


if __name__ == "__main__":
    main()
