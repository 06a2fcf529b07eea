"""The HNSW index build beside live traffic, and cross-session search through it, code trees side by side.

    .venv/bin/python -m benchmarks.bench_memory --scale 100000        # makes the data (once), see there
    .venv/bin/python -m benchmarks.bench_index --trees before=/path/to/old/checkout,after=.

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
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

import numpy as np

from benchmarks.corpora import SESSIONS, SPAN, T0, exact_top10, scale_corpus
from benchmarks.harness import (
    Report,
    Timer,
    flags,
    parse_trees,
    peak_rss_mb,
    percentiles,
    rss_mb,
    run_child,
    timed,
    vxmem_from,
)

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


def during_build(db, qs: list[str], writes: list[str], now: float, gap_s: float, out: dict) -> None:
    """build_index() in a thread while the main thread does what a chat product does."""
    done = threading.Event()

    def build() -> None:
        try:
            with Timer("process") as t:
                db.build_index()
        finally:
            out["build_s"], out["build_cpu_s"] = t.wall, t.cpu
            done.set()

    builder = threading.Thread(target=build)
    builder.start()
    rem, rec, rem_at = [], [], []
    i = 0
    start = time.perf_counter()
    while not done.is_set():
        with Timer() as t:
            db.remember(writes[i % len(writes)], session=f"s{i % SESSIONS}", timestamp=now + i)
        rem.append(t.wall)
        rem_at.append(t.t0 - start)
        with Timer() as t:
            db.recall(qs[i % len(qs)], session=f"s{(i + 7) % SESSIONS}", now=now + i)
        rec.append(t.wall)
        i += 1
        done.wait(gap_s)
    builder.join()
    out["rss_built_mb"] = rss_mb()
    out["during_n"] = float(len(rem))
    for name, got in (("rem", rem), ("rec", rec)):
        p = percentiles(got, scale=1e3)
        out[f"{name}_p50"], out[f"{name}_p99"], out[f"{name}_max"] = p["p50"], p["p99"], p["max"]
    out["rem_max_at"] = float(rem_at[int(np.argmax(rem))]) if rem else float("nan")


def child(tree: str, path: str, data: str, gap_s: float) -> dict:
    from vxmem import Vectrix

    vxmem_from(tree)
    t, vecs, emb = scale_corpus(data)
    n, qs, writes = len(t["corpus"]), t["queries"], t["writes"]
    qv = vecs[n: n + len(qs)]
    now = T0 + SPAN + 3600.0
    db = Vectrix(path, embedder=emb)
    db.recall(qs[0], session="s1", now=now)  # the session path warm, as in everyday use
    out: dict = {}
    during_build(db, qs, writes, now, gap_s, out)
    db.engine.index.flush()  # what was written during the build joins the graph, as it would in time
    good = exact_top10(db, qv)
    found = []

    def search(k: int) -> None:
        found.append(len({r.id for r in db.search(qs[k], limit=10)} & good[k]) / 10)

    got = timed(search, len(qs), warmup=20)
    out["search_p50"], out["recall10"] = got.ms()["p50"], float(np.mean(found[20:]))
    index = db.engine.index.index
    out["usearch_p50"] = timed(lambda k: index.search(qv[k], 10, threads=1), len(qv), warmup=20).ms()["p50"]
    out["ratio"] = out["search_p50"] / out["usearch_p50"]
    db.close()
    out["file_mb"] = os.path.getsize(path + ".usearch") / 2**20
    out["peak_mb"] = peak_rss_mb()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "vxmem-bench-scale", "n100000"),
                    help="a bench_memory --scale directory")
    ap.add_argument("--trees", default="this=.", help="name=path,... code trees side by side")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between a chat turn's calls during the build")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = flags(ap).parse_args(argv)
    if args._child:
        print(json.dumps(child(**json.loads(args._child))))
        return 0
    if not os.path.exists(os.path.join(args.data, "done")):
        raise SystemExit(f"no data in {args.data}: run python -m benchmarks.bench_memory --scale N first")
    trees = dict(parse_trees(args.trees))
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
            run_child("benchmarks.memory_scale", "--_scale_first_open", {"data": args.data, "path": path}, tree=tree)
            spec = {"tree": tree, "path": path, "data": args.data, "gap_s": args.gap}
            got[name] = run_child(__spec__.name if __spec__ else "benchmarks.bench_index", "--_child", spec, tree=tree)
            print(f"{name}: " + ", ".join(f"{k} {v:.4g}" for k, v in got[name].items()), file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    names = list(trees)
    report = Report(f"index build beside traffic and cross-session search: {args.data}, {os.cpu_count()} cores, "
                    f"load average {os.getloadavg()[0]:.1f}")
    ratio = f"{names[-1]}/{names[0]}"
    report.table("index", [{"figure": label} | {n: f"{got[n][key] * scale:.3f}" for n in names}
                           | ({ratio: f"{got[names[-1]][key] / got[names[0]][key]:.2f}x" if got[names[0]][key] else "-"}
                              if len(names) > 1 else {})
                           for label, key, scale in FIGURES])
    report.raw = got
    print(report.title)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
