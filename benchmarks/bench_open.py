"""Open and warm-up: an open, the first recalls after it and steady session recall, code trees side by side.

    .venv/bin/python -m benchmarks.bench_memory --scale 100000        # makes the data (once), see there
    .venv/bin/python -m benchmarks.bench_open --trees before=/path/to/old/checkout,after=. --rounds 3
    .venv/bin/python -m benchmarks.bench_open --trees f32=.,f16=.@float16      # vector_dtype="float16" beside float32

The data is bench_memory's ``--scale`` directory (texts, their precomputed vectors and a
database of N memories over 50 sessions). Each tree gets its own copy of the database, and
an "everyday session" runs on it once, in a process of its own: open, one recall, an index
build, close (a tree that saves files beside the database at close saves them there). Then, each round,
for each tree in turn, one child process that imports vxmem from that tree:

1. warms itself on a small in-memory collection (imports, numpy's lazy modules, regexes),
   so what follows is the database's warm-up, not the interpreter's;
2. opens the copy (CPU time);
3. times the first recall in one session, then the first in another session (CPU time);
4. times ``--reps`` session recalls round-robin over the sessions after 50 warm-up calls:
   the steady CPU p50; the first recalls are printed as ratios to it;
5. prints the RSS before the open (the harness: interpreter, texts, vectors), after it, and
   the peak RSS of the process;
6. then (after the peak is read) times 100 dense searches across every session (the HNSW
   path), prints the RSS with the index loaded, and measures dense recall@10 against the
   exact top 10 of the float32 vectors, across sessions and within one: what
   ``vector_dtype="float16"`` (``name=path@float16``) costs in ranking.

CPU time of the process, not wall time: on a machine other work shares, wall time also
counts the waits for a core. Rounds alternate the trees so that drift hits both.
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

from benchmarks.corpora import SPAN, T0, scale_corpus
from benchmarks.harness import Report, Timer, flags, median, peak_rss_mb, rss_mb, run_child, timed, vxmem_from

FIGURES = (("open CPU s", "open_s", 1.0), ("first session recall CPU ms", "first_ms", 1e3),
           ("first recall in another session CPU ms", "second_ms", 1e3),
           ("steady session recall CPU p50 ms", "steady_ms", 1e3),
           ("RSS before open (the harness) MB", "rss_base_mb", 1.0), ("RSS after open MB", "rss_open_mb", 1.0),
           ("peak RSS MB", "peak_mb", 1.0), ("dense search across sessions CPU p50 ms", "cross_ms", 1e3),
           ("RSS after those searches (the index loaded) MB", "rss_index_mb", 1.0),
           ("dense recall@10 across sessions", "recall_cross", 1.0),
           ("dense recall@10 within a session", "recall_session", 1.0))
QUALITY_QUERIES = 100


def dense_quality(db, emb, queries: list[str], rss_now_mb) -> dict:
    """The CPU p50 of dense searches across sessions, and dense recall@10 of searches across
    sessions and within one against the exact top 10 of the float32 vectors (ties at the
    10th count as found), whatever dtype ``db`` holds. The searches are timed before the
    exact scores are computed: BLAS threads spin on after a matrix product, and CPU time
    would count them."""
    queries = queries[:QUALITY_QUERIES]
    cross, local, times = [], [], []
    for i, query in enumerate(queries):
        with Timer("process") as t:
            cross.append(db.search(query, limit=10, mode="dense").ids)
        times.append(t.cpu)
        local.append(db.search(query, limit=10, mode="dense", filter={"_vx_session": f"s{i % 50}"}).ids)
    rss_index = rss_now_mb()  # the graph loaded too, before the exact scores take their memory
    with db.engine.locked() as m:
        live = m.live_positions()
        ids = [m.ids[p] for p in live]
        truth_vecs = emb.vecs[[emb.rows[m.texts[p]] for p in live.tolist()]].astype(np.float64)
        codes = m.session[live].copy()
        code_of = {j: m.session_code(f"s{j}") for j in range(50)}
    truth_vecs /= np.linalg.norm(truth_vecs, axis=1, keepdims=True)
    qv = np.asarray(emb(queries), dtype=np.float64)
    sims = (qv / np.linalg.norm(qv, axis=1, keepdims=True)) @ truth_vecs.T
    found: dict[str, list[float]] = {"cross": [], "session": []}
    for i in range(len(queries)):
        inside = codes == code_of[i % 50]
        for key, got, scope in (("cross", cross[i], None), ("session", local[i], inside)):
            s = sims[i] if scope is None else np.where(scope, sims[i], -np.inf)
            tenth = np.partition(s, -10)[-10] - 1e-6
            truth = {ids[j] for j in np.flatnonzero(s >= tenth)}
            found[key].append(len(set(got) & truth) / 10)
    return {"cross_ms": float(np.median(times)), "rss_index_mb": rss_index,
            "recall_cross": float(np.mean(found["cross"])), "recall_session": float(np.mean(found["session"]))}


def child(tree: str, path: str, data: str, mode: str | None, reps: int, prepare: bool, dtype: str | None) -> dict:
    from vxmem import Vectrix

    vxmem_from(tree)
    t, _, emb = scale_corpus(data)
    now = T0 + SPAN + 3600.0
    q, kw = t["queries"], ({} if mode is None else {"mode": mode})
    opts = {} if dtype is None else {"vector_dtype": dtype}
    if prepare:  # the everyday session before
        db = Vectrix(path, embedder=emb, **opts)
        db.recall(q[0], session="s1", now=now, **kw)
        db.build_index()  # so the close saves it, and searches across sessions load it (step 6)
        db.close()
        return {}
    warm = Vectrix(None, embedder=emb)
    for i, text in enumerate(t["writes"][:60]):
        warm.remember(text, session=f"s{i % 3}", timestamp=T0 + i)
    warm.recall(q[1], session="s1", now=now, **kw)
    warm.recall(q[1], now=now, **kw)
    warm.close()
    base = rss_mb()  # the harness: the interpreter, the texts and their vectors
    with Timer("process") as tm:
        db = Vectrix(path, embedder=emb, **opts)
    out = {"open_s": tm.cpu, "rss_base_mb": base, "rss_open_mb": rss_mb()}
    with Timer("process") as tm:
        db.recall(q[2], session="s3", now=now, **kw)
    out["first_ms"] = tm.cpu
    with Timer("process") as tm:
        db.recall(q[3], session="s4", now=now, **kw)
    out["second_ms"] = tm.cpu
    for i in range(50):
        db.recall(q[i % len(q)], session=f"s{i % 50}", now=now, **kw)
    steady = timed(lambda i: db.recall(q[(50 + i) % len(q)], session=f"s{i % 50}", now=now, **kw), reps,
                   cpu="process")
    out["steady_ms"] = float(np.median(steady.cpu))
    out["peak_mb"] = peak_rss_mb()
    out.update(dense_quality(db, emb, q, rss_mb))
    db.close()
    return out


def parse_dtype_trees(text: str) -> tuple[dict[str, str], dict[str, str | None]]:
    """``name=path[@dtype],...`` -> the trees and their vector dtypes."""
    trees: dict[str, str] = {}
    dtypes: dict[str, str | None] = {}
    for item in text.split(","):
        name, where = item.split("=", 1)
        tree, _, dtype = where.partition("@")
        trees[name], dtypes[name] = os.path.abspath(tree), dtype or None
    return trees, dtypes


def run_rounds(args: argparse.Namespace, trees: dict[str, str], dtypes: dict[str, str | None]) -> dict[str, list]:
    """Each tree's everyday session on its own copy, then the rounds, the trees in turn."""
    work = tempfile.mkdtemp(prefix="vxmem-open-")
    module = __spec__.name if __spec__ else "benchmarks.bench_open"

    def run(name: str, prepare: bool) -> dict:
        spec = {"tree": trees[name], "path": os.path.join(work, name, "db.vxdb"), "data": args.data,
                "mode": args.mode, "reps": args.reps, "prepare": prepare, "dtype": dtypes[name]}
        return run_child(module, "--_child", spec, tree=trees[name])

    try:
        for name in trees:
            os.makedirs(os.path.join(work, name))
            for ext in ("", ".usearch", ".usearch.json"):
                if os.path.exists(os.path.join(args.data, "base.vxdb" + ext)):
                    shutil.copy(os.path.join(args.data, "base.vxdb" + ext), os.path.join(work, name, "db.vxdb" + ext))
            run(name, prepare=True)
        got: dict[str, list[dict]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name in trees:
                got[name].append(run(name, prepare=False))
                print(f"[round {r + 1}] {name}: " + ", ".join(f"{k} {v:.4f}" for k, v in got[name][-1].items()),
                      file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return got


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "vxmem-bench-scale", "n100000"),
                    help="a bench_memory --scale directory")
    ap.add_argument("--trees", default="this=.",
                    help="name=path[@float16],... code trees side by side (@dtype: that vector_dtype)")
    ap.add_argument("--reps", type=int, default=250, help="steady session recalls timed")
    ap.add_argument("--mode", choices=("dense", "lexical", "hybrid"), default=None, help="default: the library's")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = flags(ap, rounds=3, rounds_help="rounds over the trees").parse_args(argv)
    if args._child:
        print(json.dumps(child(**json.loads(args._child))))
        return 0
    if not os.path.exists(os.path.join(args.data, "done")):
        raise SystemExit(f"no data in {args.data}: run python -m benchmarks.bench_memory --scale N first")
    trees, dtypes = parse_dtype_trees(args.trees)
    got = run_rounds(args, trees, dtypes)
    names = list(trees)
    mode = args.mode or "the default mode"
    report = Report(f"open and warm-up, {mode}: {args.data}, {args.rounds} rounds (median), load average "
                    f"{os.getloadavg()[0]:.1f}")
    med = {n: {k: median(g[k] for g in got[n]) or 0.0 for _, k, _ in FIGURES} for n in names}
    ratio = f"{names[-1]}/{names[0]}"
    report.table("open", [{"figure": label} | {n: f"{med[n][key] * scale:.3f}" for n in names}
                          | ({ratio: f"{med[names[-1]][key] / med[names[0]][key]:.2f}x"} if len(names) > 1 else {})
                          for label, key, scale in FIGURES])
    report.raw = got
    print(report.title)
    report.print()
    for n in names:
        m = med[n]
        print(f"{n}: first session recall / steady = {m['first_ms'] / m['steady_ms']:.1f}x, first in another "
              f"session / steady = {m['second_ms'] / m['steady_ms']:.1f}x (goal <= 2x); open {m['open_s']:.3f} s "
              "(goal <= 0.5)")
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
