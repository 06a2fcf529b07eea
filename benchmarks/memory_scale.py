"""bench_memory's ``--scale N`` rows: vxmem at 100k or 1M memories, code trees side by side.

A database of N memories over 50 sessions, written once into ``--scale-dir`` with the
seeded 384-d "words" embedder of :mod:`benchmarks.corpora` (vectors precomputed, handed over
by a dict look-up), then a child process per code tree, each on a fresh copy of it; see
:mod:`benchmarks.bench_memory` for what each row measures. The children run this module:
``python -m benchmarks.memory_scale --_scale_worker JSON``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.corpora import SESSIONS, SPAN, T0, Lookup, WordsEmbedder, exact_top10, scale_corpus, short_sentence
from benchmarks.harness import Report, Timer, median, peak_rss_mb, percentiles, rss_mb, run_child, timed, vxmem_from

SCALE_QUERIES = 300
MODULE = "benchmarks.memory_scale"
NOW = T0 + SPAN + 3600.0


def scale_data(n: int, reps: int, out: str) -> None:
    """Texts and their vectors (corpus, queries, writes), and the database of ``n`` memories
    over 50 sessions written with the code in this process's path; reused when present."""
    if os.path.exists(os.path.join(out, "done")):
        return
    os.makedirs(out, exist_ok=True)
    rng = random.Random(14)
    texts = [short_sentence(rng) for _ in range(n)]
    q_texts = [short_sentence(random.Random(1414 + i)) for i in range(SCALE_QUERIES)]
    w_texts = [f"{short_sentence(rng)} #{i}" for i in range(reps + 10)]
    emb = WordsEmbedder("words")
    allt = texts + q_texts + w_texts
    vecs = np.concatenate([emb(allt[i:i + 5000]) for i in range(0, len(allt), 5000)])
    np.save(os.path.join(out, "vecs.npy"), vecs)
    with open(os.path.join(out, "texts.json"), "w") as f:
        json.dump({"corpus": texts, "queries": q_texts, "writes": w_texts}, f)
    from vxmem import Vectrix

    path = os.path.join(out, "base.vxdb")
    db = Vectrix(path, embedder=Lookup(allt, vecs), exact_threshold=10**9)
    for i, t in enumerate(texts):
        kind = "fact" if i % 10 == 0 else "turn"
        db.remember(t, session=f"s{i % SESSIONS}", kind=kind, timestamp=T0 + SPAN * i / n)
    db.close()
    for ext in (".usearch", ".usearch.json"):
        if os.path.exists(path + ext):
            os.remove(path + ext)
    open(os.path.join(out, "done"), "w").close()


def graph_dir(data: str) -> str:
    """Where the saved graph of this tree's HNSW settings lives in ``data``: one graph per
    settings (trees with the same settings load the same graph)."""
    from vxmem.store.vector.graph import settings_tag

    return os.path.join(data, "graph-" + hashlib.sha1(settings_tag().encode()).hexdigest()[:12])


def scale_index(data: str) -> None:
    """Build the database's HNSW index once per graph settings, in the foreground (every
    core), timed, and keep it in :func:`graph_dir`: every tree of these settings then loads
    the same graph."""
    from vxmem import Vectrix
    from vxmem.store.vector.graph import settings_tag

    keep = graph_dir(data)
    if os.path.exists(os.path.join(keep, "index.json")):
        return
    _, _, emb = scale_corpus(data)
    work = tempfile.mkdtemp(prefix="vxmem-scale-index-", dir=data)
    try:
        path = os.path.join(work, "base.vxdb")
        shutil.copy(os.path.join(data, "base.vxdb"), path)
        db = Vectrix(path, embedder=emb)
        with Timer("process") as t:
            db.build_index()
        built = {"build_s": t.wall, "build_cpu_s": t.cpu, "threads": os.cpu_count(), "load": os.getloadavg()[0],
                 "settings": settings_tag()}
        db.close()
        os.makedirs(keep, exist_ok=True)
        for ext in (".usearch", ".usearch.json"):
            os.replace(path + ext, os.path.join(keep, "base.vxdb" + ext))
        with open(os.path.join(keep, "index.json"), "w") as f:
            json.dump(built, f)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def scale_first_open(data: str, path: str) -> dict:
    """Open the copy at ``path`` once, ask one recall in a session and close it, in a process
    of its own: a tree whose schema is newer upgrades the file here, and one that saves files
    at close saves them here, so the worker's open is an everyday one."""
    from vxmem import Vectrix

    t, _, emb = scale_corpus(data)
    t0 = time.perf_counter()
    db = Vectrix(path, embedder=emb)
    opened = time.perf_counter() - t0
    db.recall(t["queries"][0], session="s1", now=NOW)
    t1 = time.perf_counter()
    db.close()
    return {"first_open_s": opened, "first_open_close_s": opened + time.perf_counter() - t1}


def _ms(samples_s: list[float]) -> dict:
    got = percentiles(samples_s, scale=1e3)
    return {k: got[k] for k in ("p50", "p99", "p999", "max", "n")}


def _open_and_first(path: str, emb: Lookup, t: dict, out: dict) -> Any:
    """Open, the first session and cross-session recalls, steady session recall; the open db.
    CPU (of the process, every thread) beside wall time: on a machine others share the wall
    clock also counts the waits for a core."""
    from vxmem import Vectrix

    with Timer("process") as tm:
        db = Vectrix(path, embedder=emb)
    out["open_s"], out["open_cpu_s"] = tm.wall, tm.cpu
    out["rss_open_mb"] = rss_mb()
    with Timer("process") as tm:
        db.recall(t["queries"][1], session="s3", now=NOW)
    out["first_session_ms"], out["first_session_cpu_ms"] = tm.wall * 1e3, tm.cpu * 1e3
    with Timer("process") as tm:
        db.recall(t["queries"][2], now=NOW)
    out["first_cross_ms"], out["first_cross_cpu_ms"] = tm.wall * 1e3, tm.cpu * 1e3
    db.build_index()  # a background load or build finished before the steady figures
    steady = timed(lambda i: db.recall(t["queries"][i], session=f"s{i % SESSIONS}", now=NOW), 200)
    out["session_steady_ms"] = _ms(steady.wall)["p50"]
    return db


def _cross_session(db: Any, qs: list[str], qv: np.ndarray, out: dict) -> None:
    """search() and recall() across sessions, and usearch searched directly on the same graph."""
    good = exact_top10(db, qv)
    got: list = [None] * len(qs)

    def search(i: int) -> None:
        got[i] = [r.id for r in db.search(qs[i], limit=10)]

    s = timed(search, len(qs), warmup=20)
    out["search"] = _ms(s.wall) | {"recall10": float(np.mean([len(set(g) & good[i]) / 10 for i, g in enumerate(got)]))}
    out["search_cpu"] = _ms(s.cpu)
    r = timed(lambda i: db.recall(qs[i], now=NOW), len(qs))
    out["recall"], out["recall_cpu"] = _ms(r.wall), _ms(r.cpu)
    index = db.engine.index.index
    es = index.expansion_search
    rowid_of = {}
    with db.engine.locked() as m:
        for p in m.live_positions().tolist():
            rowid_of[int(m.rowid[p])] = m.ids[p]
    ug: list = [None] * len(qs)

    def usearch_direct(i: int) -> None:
        ug[i] = index.search(qv[i], 10, threads=1).keys

    def found() -> float:
        return float(np.mean([len({rowid_of.get(int(k)) for k in g} & good[i]) / 10 for i, g in enumerate(ug)]))

    index.expansion_search = 128
    u = timed(usearch_direct, len(qs), warmup=20)
    out["usearch_cpu"], out["usearch"] = _ms(u.cpu), _ms(u.wall) | {"recall10": found()}
    index.expansion_search = es  # and at this tree's own setting: what vxmem adds to the graph's search
    u = timed(usearch_direct, len(qs))
    out["usearch_same_cpu"], out["usearch_same"] = _ms(u.cpu), _ms(u.wall) | {"es": int(es), "recall10": found()}


def _writes_and_reuse(db: Any, path: str, emb: Lookup, t: dict, reps: int, out: dict) -> None:
    """remember() with the index live, the close, then a write before the first cross-session
    query of a process. Not waited for: a tree that rebuilds answers by an exact scan meanwhile."""
    from vxmem import Vectrix

    w = t["writes"]
    clock = [NOW]

    def remember(i: int) -> None:
        clock[0] += 1.0
        db.remember(w[i], session=f"s{i % SESSIONS}", timestamp=clock[0])

    got = timed(remember, reps)
    out["remember_live"] = _ms(got.wall)
    out["remember_live_cpu"] = _ms(got.cpu)  # this thread's CPU: the call's own work, not waiting for a core
    with Timer("process") as tm:
        db.close()
    out["close_s"], out["close_cpu_s"] = tm.wall, tm.cpu
    db = Vectrix(path, embedder=emb)
    db.remember(w[reps], session="s1", timestamp=clock[0] + 1)
    t0 = time.perf_counter()
    db.recall(t["queries"][3], now=NOW)
    out["reuse_first_cross_s"] = time.perf_counter() - t0
    out["reuse_index_ready"] = float(db.engine.index.index is not None)
    out["reuse_building"] = float(bool(getattr(db.engine.index, "building", False)))


def scale_worker(data: str, reps: int, tree: str) -> dict:
    """One code tree's figures on a fresh copy of the database in ``data`` (opened and closed
    once before, in another process: see :func:`scale_first_open`)."""
    vxmem_from(tree)
    t, vecs, emb = scale_corpus(data)
    n = len(t["corpus"])
    qv = vecs[n: n + len(t["queries"])]
    work = tempfile.mkdtemp(prefix="vxmem-scale-")
    path = os.path.join(work, "db.vxdb")
    shutil.copy(os.path.join(data, "base.vxdb"), path)
    graph = graph_dir(data)
    for ext in (".usearch", ".usearch.json"):
        shutil.copy(os.path.join(graph, "base.vxdb" + ext), path + ext)
    with open(os.path.join(graph, "index.json")) as f:
        out: dict = json.load(f)  # the one build of this tree's graph settings
    out |= run_child(MODULE, "--_scale_first_open", {"data": data, "path": path}, tree=tree)
    try:
        db = _open_and_first(path, emb, t, out)
        _cross_session(db, t["queries"], qv, out)
        _writes_and_reuse(db, path, emb, t, reps, out)
        out["peak_rss_mb"] = peak_rss_mb()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def run_scale(args: argparse.Namespace, trees: list[tuple[str, str]]) -> int:
    """Make the data (once), build each graph settings' index (once), then the rounds over the trees."""
    data = os.path.join(args.scale_dir, f"n{args.scale}")
    t0 = time.perf_counter()
    log(f"[scale {args.scale}] data in {data} ...")
    run_child(MODULE, "--_scale_data", {"n": args.scale, "reps": args.scale_reps, "out": data}, tree=trees[0][1])
    for _, tree in trees:  # one graph per settings: built by the first tree of those settings
        run_child(MODULE, "--_scale_index", {"data": data}, tree=tree)
    log(f"[scale {args.scale}] data ready ({time.perf_counter() - t0:.0f} s)")
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        for name, tree in trees:
            t1 = time.perf_counter()
            spec = {"data": data, "reps": args.scale_reps, "tree": tree}
            results[name].append(run_child(MODULE, "--_scale_worker", spec, tree=tree))
            log(f"[scale {args.scale}] round {r + 1} {name}: {time.perf_counter() - t1:.0f} s")
    head = (f"vxmem at scale: {args.scale:,} memories, {SESSIONS} sessions, the corpora's words embedder, "
            f"{SCALE_QUERIES} queries, {args.scale_reps} remember() calls, {args.rounds} round(s), "
            f"{os.cpu_count()} cpus, load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after\n"
            "trees: " + ", ".join(f"{name} = {tree}" for name, tree in trees))
    report = scale_report(head, results)
    report.save(args)
    print_scale(report)
    return 0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


SCALE_ROWS = (
    ("index build, once per graph settings (foreground) s", ("build_s",)),
    ("  its CPU s (all threads)", ("build_cpu_s",)),
    ("first open of the copy s (a newer schema upgrades it)", ("first_open_s",)),
    ("  that open and its close s", ("first_open_close_s",)), ("open s", ("open_s",)),
    ("  open CPU s", ("open_cpu_s",)),
    ("RSS after open MB", ("rss_open_mb",)), ("first session recall after open ms", ("first_session_ms",)),
    ("  first session recall CPU ms", ("first_session_cpu_ms",)),
    ("steady session recall p50 ms", ("session_steady_ms",)),
    ("first cross-session recall after open ms", ("first_cross_ms",)),
    ("  first cross-session recall CPU ms", ("first_cross_cpu_ms",)),
    ("cross-session search(limit=10) p50 ms", ("search", "p50")),
    ("  search CPU p50 ms", ("search_cpu", "p50")),
    ("cross-session search p99 ms", ("search", "p99")),
    ("cross-session search recall@10", ("search", "recall10")),
    ("cross-session recall() p50 ms", ("recall", "p50")), ("  recall() CPU p50 ms", ("recall_cpu", "p50")),
    ("cross-session recall() p99 ms", ("recall", "p99")),
    ("usearch direct (same graph, es 128) p50 ms", ("usearch", "p50")),
    ("  usearch es 128 CPU p50 ms", ("usearch_cpu", "p50")),
    ("usearch direct recall@10", ("usearch", "recall10")),
    ("usearch direct at the tree's expansion_search p50 ms", ("usearch_same", "p50")),
    ("  usearch same es CPU p50 ms", ("usearch_same_cpu", "p50")),
    ("  its expansion_search", ("usearch_same", "es")),
    ("  its recall@10", ("usearch_same", "recall10")),
    ("remember() index live p50 ms", ("remember_live", "p50")),
    ("remember() index live p99 ms", ("remember_live", "p99")),
    ("remember() index live p99.9 ms", ("remember_live", "p999")),
    ("remember() index live max ms", ("remember_live", "max")),
    ("remember() index live, CPU of the call, p99.9 ms", ("remember_live_cpu", "p999")),
    ("remember() index live, CPU of the call, max ms", ("remember_live_cpu", "max")),
    ("close s", ("close_s",)), ("  close CPU s", ("close_cpu_s",)),
    ("write, then first cross-session query s", ("reuse_first_cross_s",)),
    ("  index ready after it (1 = reused)", ("reuse_index_ready",)),
    ("  a rebuild running after it (1 = yes)", ("reuse_building",)),
    ("peak RSS MB", ("peak_rss_mb",)))


def pick(rounds: list[dict], keys: Sequence[str]) -> float | None:
    """The median over the rounds of ``round[keys[0]][keys[1]]...`` (rounds without it left out)."""
    vals = []
    for x in rounds:
        for k in keys:
            x = x.get(k) if isinstance(x, dict) else None
        vals.append(x)
    return median(vals)


def scale_report(head: str, results: dict[str, list[dict]]) -> Report:
    """The ``--scale`` table (the median of the rounds per tree), with the raw rounds."""
    names = list(results)
    rows = []
    for label, keys in SCALE_ROWS:
        row: dict[str, Any] = {"figure (median of rounds)": label}
        vals = [pick(results[n], keys) for n in names]
        row.update(zip(names, vals))
        if len(names) == 2:
            row[f"{names[1]}/{names[0]}"] = vals[1] / vals[0] if vals[0] and vals[1] is not None else None
        rows.append(row)
    report = Report(head)
    report.table("at scale", rows)
    report.raw = {"head": head, "results": results}
    return report


def fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def print_scale(report: Report) -> None:
    """The table of :func:`run_scale` (also from a saved ``--json`` file: ``--scale-report``)."""
    print(report.title)
    print()
    rows = report.tables["at scale"]
    names = [k for k in rows[0] if k != "figure (median of rounds)" and "/" not in k]
    head = f"{'figure (median of rounds)':54}" + "".join(f"{n:>12}" for n in names)
    if len(names) == 2:
        head += f"{names[1] + '/' + names[0]:>14}"
    print(head)
    print("-" * len(head))
    for row in rows:
        vals = [row[n] for n in names]
        line = f"{row['figure (median of rounds)']:54}" + "".join(
            f"{fmt(v, 3 if v is not None and abs(v) < 10 else 1):>12}" for v in vals)
        if len(names) == 2 and vals[0] and vals[1] is not None:
            line += f"{vals[1] / vals[0]:>13.2f}x"
        print(line)
    print()
    med = {n: {row["figure (median of rounds)"]: row[n] for row in rows} for n in names}
    for n in names:
        print_goals(n, med[n])


def print_goals(n: str, m: dict[str, float | None]) -> None:
    """The ratios to usearch direct and the goals, of one tree."""
    s50, u50 = m["cross-session search(limit=10) p50 ms"], m["usearch direct (same graph, es 128) p50 ms"]
    r50 = m["cross-session recall() p50 ms"]
    sc, rc = m["  search CPU p50 ms"], m["  recall() CPU p50 ms"]
    uc, usc = m["  usearch es 128 CPU p50 ms"], m["  usearch same es CPU p50 ms"]
    if sc and uc and rc:
        print(f"{n} (CPU): search / usearch direct = {sc / uc:.2f}x, recall() / usearch direct = "
              f"{rc / uc:.2f}x, search / usearch at the same expansion_search = "
              f"{sc / usc if usc else float('nan'):.2f}x")
    same = m["usearch direct at the tree's expansion_search p50 ms"]
    if s50 and same:
        print(f"{n}: search / usearch direct at the same expansion_search = {s50 / same:.2f}x")
    if s50 and u50 and r50:
        print(f"{n}: search / usearch direct = {s50 / u50:.2f}x, recall() / usearch direct = {r50 / u50:.2f}x "
              f"(goal <= 1.5x); recall@10 {fmt(m['cross-session search recall@10'])} (goal >= 0.99); "
              f"remember p99.9 {fmt(m['remember() index live p99.9 ms'])} ms (goal <= 5); "
              f"open {fmt(m['open s'])} s (goal <= 0.5)")


def reprint(path: str) -> None:
    """``--scale-report``: the table again, from a ``--json`` file (this harness's, or an older raw one)."""
    with open(path) as f:
        saved = json.load(f)
    if "tables" in saved:
        print_scale(Report.from_json(saved))
        return
    if "results" not in saved:  # written before the file kept its heading
        saved = {"head": f"vxmem at scale, from {path}", "results": saved}
    print_scale(scale_report(saved["head"], saved["results"]))


def main(argv: Sequence[str] | None = None) -> int:
    """The child processes' entry: one of ``--_scale_data``, ``--_scale_index``,
    ``--_scale_first_open`` or ``--_scale_worker``, with its JSON arguments."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--_scale_data", "--_scale_index", "--_scale_first_open", "--_scale_worker"):
        ap.add_argument(flag, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._scale_data:
        scale_data(**json.loads(args._scale_data))
        print("{}")
    elif args._scale_index:
        scale_index(**json.loads(args._scale_index))
        print("{}")
    elif args._scale_first_open:
        print(json.dumps(scale_first_open(**json.loads(args._scale_first_open))), flush=True)
        os._exit(0)
    elif args._scale_worker:
        print(json.dumps(scale_worker(**json.loads(args._scale_worker))), flush=True)
        os._exit(0)  # a tree that started a background rebuild is not waited for
    return 0


if __name__ == "__main__":
    sys.exit(main())
