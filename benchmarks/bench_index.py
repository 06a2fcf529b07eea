"""The HNSW index build beside live traffic, and cross-session search through it, code trees side by side.

    python benchmarks/bench_memory.py --scale 100000        # makes the data (once), see there
    python benchmarks/bench_index.py --trees before=/path/to/old/checkout,after=.

The data is bench_memory's ``--scale`` directory (texts, their precomputed vectors and a
database of N memories over 50 sessions). For each tree in turn, a copy of the database
without any index file is opened, asked one recall and closed once, in a process of its own
(an everyday session before: a newer schema upgrades the copy there), then one child process
that imports vxmem from that tree:

1. opens it and calls ``build_index()`` in a thread, timed (wall and the process's CPU);
2. meanwhile, on the main thread, does what a chat product does (one ``remember()`` and one
   session ``recall()`` in turn, 20 ms apart) until the build is done, and times each call:
   a build that holds the collection's lock makes them wait for all of it;
3. then searches every query across all sessions through the index (``search(limit=10)``,
   one thread), with recall@10 against the exact top 10 of a numpy scan, and the same
   queries asked of the usearch index directly at the tree's expansion_search: the ratio is
   what vxmem adds to the graph's own search;
4. closes (saving the index) and prints the index file's size, the RSS after the build and
   the peak RSS of the process.

Trees whose graph settings differ build different graphs: that is the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = (("build_index() wall s", "build_s", 1.0), ("build_index() CPU s (every thread)", "build_cpu_s", 1.0),
           ("calls during the build", "during_n", 1.0), ("remember() during the build p50 ms", "rem_p50", 1.0),
           ("remember() during the build p99 ms", "rem_p99", 1.0),
           ("remember() during the build max ms", "rem_max", 1.0),
           ("  its start, s into the build", "rem_max_at", 1.0),
           ("session recall during the build p50 ms", "rec_p50", 1.0),
           ("session recall during the build p99 ms", "rec_p99", 1.0),
           ("session recall during the build max ms", "rec_max", 1.0),
           ("cross-session search p50 ms", "search_p50", 1.0), ("cross-session search recall@10", "recall10", 1.0),
           ("usearch direct, same expansion_search, p50 ms", "usearch_p50", 1.0),
           ("search / usearch direct", "ratio", 1.0), ("index file MB", "file_mb", 1.0),
           ("RSS after the build MB", "rss_built_mb", 1.0), ("peak RSS MB", "peak_mb", 1.0))


def child(tree: str, path: str, data: str, gap_s: float) -> dict:
    sys.path.insert(0, tree)
    sys.path.insert(1, HERE)
    import bench_memory as bm

    from vxmem import Vectrix

    bm.vxmem_from(tree)
    t, vecs, emb = bm.scale_corpus(data)
    n, qs, writes = len(t["corpus"]), t["queries"], t["writes"]
    qv = vecs[n: n + len(qs)]
    now = bm.T0 + bm.SPAN + 3600.0
    db = Vectrix(path, embedder=emb)
    db.recall(qs[0], session="s1", now=now)  # the session path warm, as in everyday use
    out: dict = {}
    done = threading.Event()

    def build() -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            db.build_index()
        finally:
            out["build_s"], out["build_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
            done.set()

    builder = threading.Thread(target=build)
    builder.start()
    rem, rec, rem_at = [], [], []
    i = 0
    start = time.perf_counter()
    while not done.is_set():
        t0 = time.perf_counter()
        db.remember(writes[i % len(writes)], session=f"s{i % bm.SESSIONS}", timestamp=now + i)
        rem.append(time.perf_counter() - t0)
        rem_at.append(t0 - start)
        t0 = time.perf_counter()
        db.recall(qs[i % len(qs)], session=f"s{(i + 7) % bm.SESSIONS}", now=now + i)
        rec.append(time.perf_counter() - t0)
        i += 1
        done.wait(gap_s)
    builder.join()
    out["rss_built_mb"] = bm.rss_now_mb()
    out["during_n"] = float(len(rem))
    for name, got in (("rem", rem), ("rec", rec)):
        ms = np.asarray(got or [np.nan]) * 1e3
        out[f"{name}_p50"], out[f"{name}_p99"], out[f"{name}_max"] = (float(np.median(ms)),
                                                                      float(np.percentile(ms, 99)), float(ms.max()))
    out["rem_max_at"] = float(rem_at[int(np.argmax(rem))]) if rem else float("nan")
    db.engine.index.flush()  # what was written during the build joins the graph, as it would in time
    good = bm.exact_top10(db, qv)
    for k in range(20):
        db.search(qs[k], limit=10)
    lat, found = [], []
    for k, q in enumerate(qs):
        t0 = time.perf_counter()
        got = db.search(q, limit=10)
        lat.append(time.perf_counter() - t0)
        found.append(len({r.id for r in got} & good[k]) / 10)
    out["search_p50"], out["recall10"] = float(np.median(lat)) * 1e3, float(np.mean(found))
    index = db.engine.index.index
    for k in range(20):
        index.search(qv[k], 10, threads=1)
    lat = []
    for q in qv:
        t0 = time.perf_counter()
        index.search(q, 10, threads=1)
        lat.append(time.perf_counter() - t0)
    out["usearch_p50"] = float(np.median(lat)) * 1e3
    out["ratio"] = out["search_p50"] / out["usearch_p50"]
    db.close()
    out["file_mb"] = os.path.getsize(path + ".usearch") / 2**20
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "vxmem-bench-scale", "n100000"),
                    help="a bench_memory --scale directory")
    ap.add_argument("--trees", default="this=.", help="name=path,... code trees side by side")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between a chat turn's calls during the build")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._child:
        print(json.dumps(child(**json.loads(args._child))))
        return
    if not os.path.exists(os.path.join(args.data, "done")):
        raise SystemExit(f"no data in {args.data}: run benchmarks/bench_memory.py --scale N first")
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    got: dict[str, dict] = {}
    for name, tree in trees.items():
        work = tempfile.mkdtemp(prefix="vxmem-index-")
        try:
            path = os.path.join(work, "db.vxdb")
            shutil.copy(os.path.join(args.data, "base.vxdb"), path)  # no index file: every tree builds its own
            # An everyday session first (open, one recall, close), in a process of its own: a tree
            # with a newer schema upgrades the copy there (storing every token count fills the WAL,
            # which the measured run would otherwise rewind), and one that saves files at close saves
            # them there.
            subprocess.run([sys.executable, os.path.join(HERE, "bench_memory.py"), "--_scale_first_open",
                            json.dumps({"data": args.data, "path": path})], check=True, capture_output=True,
                           env=dict(os.environ, PYTHONPATH=os.path.abspath(tree)))
            spec = {"tree": os.path.abspath(tree), "path": path, "data": args.data, "gap_s": args.gap}
            res = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child", json.dumps(spec)],
                                 capture_output=True, text=True)
            if res.returncode:
                raise SystemExit(f"{name} failed:\n{res.stderr}")
            got[name] = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{name}: " + ", ".join(f"{k} {v:.4g}" for k, v in got[name].items()), file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    names = list(trees)
    print(f"index build beside traffic and cross-session search: {args.data}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    head = f"{'figure':48s}" + "".join(f"{n:>12s}" for n in names)
    print(head + (f"{names[-1] + '/' + names[0]:>14s}" if len(names) > 1 else ""))
    print("-" * len(head + ("x" * 14 if len(names) > 1 else "")))
    for label, key, scale in FIGURES:
        row = f"{label:48s}" + "".join(f"{got[n][key] * scale:12.3f}" for n in names)
        if len(names) > 1 and got[names[0]][key]:
            row += f"{got[names[-1]][key] / got[names[0]][key]:13.2f}x"
        print(row)


if __name__ == "__main__":
    main()
