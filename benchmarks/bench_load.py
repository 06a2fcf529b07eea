"""Load: four threads mixing 80% recall / 20% remember on one handle, for a bounded time,
with read-only reader processes beside the writer.

    .venv/bin/python -m benchmarks.bench_load                      # builds a 100k memories, then loads them
    .venv/bin/python -m benchmarks.bench_load --db /tmp/load.db    # reuses (or builds once) a database file
    .venv/bin/python -m benchmarks.bench_load --memories 25000 --readers incremental,full

Prints throughput, p50/p99 latency per operation and the error count (which must be 0).
Each reader is a separate process with a ``read_only=True`` handle recalling in a loop
while the writer works: it reports the latency of the first recall after each commit it
takes in (the catch-up included) against the latency of the others, how many commits it
was behind when it read (its lag), and its lag once the writer has stopped (which must be
0). The ``full`` reader reloads everything on every change, as read-only handles did before
the change log, for comparison in the same run.
A benchmark, not a test: it times things and asserts nothing but the absence of errors.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sqlite3
import sys
import tempfile
import threading
import time
import zlib
from typing import Any

import numpy as np

from benchmarks.corpora import bare_sentence
from benchmarks.harness import Report, flags, percentiles
from vxmem import HashingEmbedder, Vectrix


class TrivialEmbedder:
    """Bag of crc32-hashed words, 64-d: times the memory layer, not the embedder."""

    dim = 64

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return out


def build(path: str, n: int, sessions: int, embedder, seed: int = 0) -> None:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    with Vectrix(path, embedder=embedder) as db:
        have = db.count()
        for i in range(have, n):
            db.remember(bare_sentence(rng), session=f"user-{i % sessions}", role="user" if i % 2 else "assistant",
                        timestamp=1_700_000_000 + i * 30)
            if i and i % 20_000 == 0:
                print(f"  built {i:,} memories in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        db.recall("warm up", limit=10, now=1_800_000_000)
        db.build_index()  # the HNSW index, saved on close
    print(f"built {n:,} memories over {sessions} sessions in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def _file_generation(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT value FROM vx_meta WHERE key = 'generation'").fetchone()[0])


def reader(path: str, embedder_name: str, sessions: int, mode: str, ready, stop, out) -> None:
    """A reader process: recall in a loop on a read-only handle until ``stop``, then once more."""
    from vxmem.store.sqlite import database

    if mode == "full":  # the old behaviour: any change reloads everything (in one read transaction)
        def full_reload(self, mirror, token_counter):
            return None if self._probe() == self._data_version else self.refresh_full(token_counter)
        database.Database.refresh = full_reload
    embedder = HashingEmbedder() if embedder_name == "hashing" else TrivialEmbedder()
    rng = random.Random(7)
    db = Vectrix(path, embedder=embedder, read_only=True)
    db.recall("warm up", limit=10, now=1_800_000_000)
    probe = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    after_commit: list[float] = []
    idle: list[float] = []
    lags: list[int] = []
    taken = 0
    gen = db.engine.database.generation
    ready.set()
    while not stop.is_set():
        session = f"user-{rng.randrange(sessions)}"
        t = time.perf_counter()
        db.recall(bare_sentence(rng), session=session, limit=10, now=1_800_000_000)
        dt = time.perf_counter() - t
        now_gen = db.engine.database.generation
        lags.append(_file_generation(probe) - now_gen)  # commits the reader's answer did not see
        if now_gen != gen:
            after_commit.append(dt)
            taken += 1
            gen = now_gen
        else:
            idle.append(dt)
    # The writer has stopped and closed: one more read must see everything.
    db.count()
    final = {"generation": db.engine.database.generation, "count": db.count()}
    probe.close()
    db.close()
    out.put({"mode": mode, "after_commit": after_commit, "idle": idle, "lags": lags, "catch_ups": taken,
             "final": final})


def run(path: str, embedder, threads: int, seconds: float, sessions: int, seed: int = 1):
    db = Vectrix(path, embedder=embedder)
    db.recall("warm up", limit=10, now=1_800_000_000)
    db.build_index()  # index loaded (or built) before the clock starts
    lat = {"recall (session)": [], "recall (all sessions)": [], "remember": []}
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads + 1)
    stop = [0.0]

    def worker(k: int) -> None:
        rng = random.Random(seed * 100 + k)
        mine = {key: [] for key in lat}
        n_err = []
        barrier.wait()
        clock = 1_800_000_000 + k
        while time.perf_counter() < stop[0]:
            clock += 1
            session = f"user-{rng.randrange(sessions)}"
            r = rng.random()
            if r < 0.8:
                op = "recall (all sessions)" if r < 0.08 else "recall (session)"
            else:
                op = "remember"
            t = time.perf_counter()
            try:
                if op == "remember":
                    db.remember(bare_sentence(rng), session=session, timestamp=clock)
                elif op == "recall (session)":
                    res = db.recall(bare_sentence(rng), session=session, limit=10, now=clock)
                    assert len(res) > 0
                else:
                    res = db.recall(bare_sentence(rng), limit=10, now=clock)
                    assert len(res) == 10
            except Exception as exc:  # noqa: BLE001 - counted and reported
                n_err.append(f"{op}: {type(exc).__name__}: {exc}")
                continue
            mine[op].append(time.perf_counter() - t)
        with lock:
            for key, v in mine.items():
                lat[key].extend(v)
            errors.extend(n_err)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    stop[0] = time.perf_counter() + seconds
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    total = db.count()
    db.close()
    return lat, errors, elapsed, total


def start_readers(path: str, args: argparse.Namespace) -> tuple[list, Any, Any]:
    """The reader processes, each ready (its first recall done) before the writer starts."""
    ctx = mp.get_context("spawn")  # a fresh interpreter: never a fork of this threaded one
    stop, results = ctx.Event(), ctx.Queue()
    procs = []
    for mode in [m for m in args.readers.split(",") if m]:
        ready = ctx.Event()
        proc = ctx.Process(target=reader, args=(path, args.embedder, args.sessions, mode, ready, stop, results))
        proc.start()
        ready.wait()
        procs.append(proc)
    return procs, stop, results


def p50_p99(samples: list[float]) -> str:
    got = percentiles(samples or [float("nan")], scale=1e3)
    return f"{got['p50']:.2f} / {got['p99']:.2f}"


def reader_rows(readers: list[dict], writer_generation: int, total: int, errors: list[str]) -> list[dict]:
    rows = []
    for r in readers:
        lags = np.array(r["lags"] or [0])
        lag_after = writer_generation - r["final"]["generation"]
        rows.append({"reader": r["mode"], "recalls": f"{len(r['after_commit']) + len(r['idle']):,}",
                     "catch-ups": f"{r['catch_ups']:,}",
                     "recall after a commit p50 / p99 ms": p50_p99(r["after_commit"]),
                     "other recalls p50 / p99 ms": p50_p99(r["idle"]),
                     "lag while writing: mean / max commits": f"{lags.mean():.1f} / {lags.max()}",
                     "lag after the writer stopped": lag_after, "count": f"{r['final']['count']:,} of {total:,}"})
        if lag_after != 0 or r["final"]["count"] != total:
            errors.append(f"reader {r['mode']}: {lag_after} commits behind after the writer stopped")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="database file (built if missing or smaller than --memories)")
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--embedder", choices=["hashing", "trivial"], default="hashing",
                    help="hashing: the default offline embedder; trivial: 64-d word hashing, times the memory layer")
    ap.add_argument("--readers", default="incremental",
                    help="comma-separated reader processes beside the writer: incremental (the change log), full "
                         "(reload everything on each change, the old way); '' for none")
    args = flags(ap).parse_args(argv)

    embedder = HashingEmbedder() if args.embedder == "hashing" else TrivialEmbedder()
    with tempfile.TemporaryDirectory(prefix="vxload") as tmp:
        path = args.db or os.path.join(tmp, "load.db")
        build(path, args.memories, args.sessions, embedder)
        procs, stop, results = start_readers(path, args)
        lat, errors, elapsed, total = run(path, embedder, args.threads, args.seconds, args.sessions)
        with sqlite3.connect(path) as conn:
            writer_generation = _file_generation(conn)
        stop.set()
        readers = [results.get() for _ in procs]
        for proc in procs:
            proc.join()
    n_ops = sum(len(v) for v in lat.values())
    report = Report(f"bench_load: {args.threads} threads, one handle, {args.seconds:.0f} s, database of "
                    f"{args.memories:,} memories over {args.sessions} sessions ({total:,} at the end), "
                    f"embedder={args.embedder}, {os.cpu_count()} cores")
    ops = []
    for op, v in lat.items():
        got = percentiles(v or [float("nan")], scale=1e3)
        ops.append({"operation": op, "share": f"{len(v) / max(n_ops, 1):.0%}", "ops": f"{len(v):,}",
                    "ops/s": f"{len(v) / elapsed:,.0f}", "p50 ms": f"{got['p50']:.2f}", "p99 ms": f"{got['p99']:.2f}"})
    ops.append({"operation": "**all**", "share": "100%", "ops": f"{n_ops:,}", "ops/s": f"{n_ops / elapsed:,.0f}",
                "p50 ms": "", "p99 ms": ""})
    report.table("operations", ops)
    if readers:
        report.table("readers", reader_rows(readers, writer_generation, total, errors), note=(
            f"reader processes (read_only=True, recalling in a loop; the writer committed "
            f"{writer_generation:,} generations in all)"))
    print(f"\n{report.title}\n")
    report.print()
    print(f"errors: {len(errors)}")
    for e in errors[:10]:
        print("  " + e)
    report.save(args)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
