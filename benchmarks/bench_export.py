"""Export and restore at scale: rows/s each way, and the export's peak RSS beyond the open database.

    .venv/bin/python -m benchmarks.bench_export [--n 1000000] [--dir /tmp/vxmem-bench-export]

Builds (once per N, kept in ``--dir``) a database of N memories on the hashing embedder, over
200 sessions, with a history: turns with a 30-day TTL, one in ten a fact, one in a hundred
pinned, feedback on one in a hundred, a correction (supersession) on one in five hundred, and
two sessions consolidated. Then, each step in a fresh process:

1. ``db.export(path)`` on an open handle (read-only), without and with ``vectors=True``: rows/s,
   the RSS of the open database, and the peak RSS while exporting less that (the peak is
   reset after the open: Linux's ``/proc/self/clear_refs``, so the open's own peak is not counted);
2. ``vxmem export`` (``export_file``: the file read without opening it as a collection):
   rows/s and peak RSS beyond the interpreter with vxmem imported;
3. ``Vectrix.restore()`` of each file into a new database file: rows/s (from the file's
   vectors, and embedding every text again) and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from benchmarks.harness import Report, Timer, flags, peak_rss_mb, rss_mb, run_child

T0 = 1_700_000_000.0
SESSIONS = 200


def reset_peak() -> bool:
    """Reset the process's peak RSS to its current RSS (Linux); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def summarize(turns: list[dict]) -> list[str]:
    return [f"Summary: {t['text']}" for t in turns[:2]]


def build(path: str, n: int) -> None:
    from vxmem import Vectrix

    db = Vectrix(path, embedder="hashing", ttl_days={"turn": 30})
    step = 10_000
    for a in range(0, n, step):
        items = []
        for i in range(a, min(a + step, n)):
            item = {"text": f"Turn {i}: a few words about topic {i % 37} and what happened after {i % 7} days",
                    "session": f"s{i % SESSIONS}", "timestamp": T0 + i}
            if i % 100 == 1:
                item["pinned"] = True
            elif i % 10 == 0:
                item["kind"] = "fact"
            items.append(item)
        ids = db.remember_many(items)
        for j, mid in enumerate(ids):
            i = a + j
            if i % 100 == 3:
                db.feedback(mid, "useful" if i % 200 == 3 else "dead_end", timestamp=T0 + n + i)
            if i % 500 == 7:
                db.feedback(mid, "corrected", correction=f"Correction of turn {i}", timestamp=T0 + n + i)
        print(f"  built {min(a + step, n):,} of {n:,}", file=sys.stderr, end="\r")
    for s in ("s5", "s6"):
        db.consolidate(s, summarize, keep_recent=20, batch_turns=40, now=T0 + 2 * n)
    db.close()
    print(file=sys.stderr)


def child(step: str, db_path: str, out: str) -> dict:
    """One measured step, in this (fresh) process."""
    import vxmem.store.portable.export as portable
    from vxmem import Vectrix

    base = rss_mb()
    if step in ("export", "export-vectors"):
        db = Vectrix(db_path, embedder="hashing", read_only=True)
        opened = rss_mb()
        exact = reset_peak()
        with Timer() as t:
            report = db.export(out, vectors=step == "export-vectors", progress=False)
        spent = t.wall
        peak = peak_rss_mb()
        db.close()
        return {"rows": report.counts["documents"], "s": spent, "open_mb": opened - base,
                "beyond_mb": peak - opened, "exact_peak": exact, "bytes": report.bytes}
    if step == "export-file":
        exact = reset_peak()
        with Timer() as t:
            report = portable.export_file(db_path, out, progress=False)
        spent = t.wall
        return {"rows": report.counts["documents"], "s": spent, "beyond_mb": peak_rss_mb() - base, "exact_peak": exact,
                "bytes": report.bytes}
    # restore: db_path is the export, out the new database
    from vxmem.models.embed import get_embedder

    get_embedder("hashing")  # loaded before the clock starts, as an open database has it
    base = rss_mb()
    exact = reset_peak()
    with Timer() as t:
        db = Vectrix.restore(db_path, out, embedder="hashing", progress=False)
    spent = t.wall
    rows = len(db)
    peak = peak_rss_mb()
    opened = rss_mb()
    db.close()
    return {"rows": rows, "s": spent, "beyond_mb": peak - base, "open_mb": opened - base, "exact_peak": exact}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="memories (default 1,000,000)")
    ap.add_argument("--dir", default="/tmp/vxmem-bench-export", help="where the data lives (kept between runs)")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = flags(ap).parse_args(argv)
    if args._child:
        print(json.dumps(child(**json.loads(args._child))))
        return 0
    os.makedirs(args.dir, exist_ok=True)
    db_path = os.path.join(args.dir, f"n{args.n}.vxdb")
    if not os.path.exists(db_path):
        start = time.perf_counter()
        build(db_path, args.n)
        print(f"built {db_path} in {time.perf_counter() - start:.0f} s")
    plain, with_vectors = os.path.join(args.dir, "plain.jsonl"), os.path.join(args.dir, "vectors.jsonl")
    rows = []
    for label, step, a, b in (("db.export()", "export", db_path, plain),
                              ("db.export(vectors=True)", "export-vectors", db_path, with_vectors),
                              ("vxmem export (export_file)", "export-file", db_path, plain),
                              ("restore, embedding again", "restore", plain, os.path.join(args.dir, "r1.vxdb")),
                              ("restore, the file's vectors", "restore", with_vectors,
                               os.path.join(args.dir, "r2.vxdb"))):
        for p in (b, b + "-wal", b + "-shm", b + ".mirror", b + ".lexical") if b.endswith(".vxdb") else ():
            if os.path.exists(p):
                os.remove(p)
        got = run_child(__spec__.name if __spec__ else "benchmarks.bench_export", "--_child",
                        {"step": step, "db_path": a, "out": b})
        rows.append({"step": label} | got)
        size = f"  {got['bytes'] / 2**20:,.0f} MB file" if "bytes" in got else ""
        opened = f"  open database {got['open_mb']:,.0f} MB" if "open_mb" in got else ""
        beyond = "the open database" if step.startswith("export") and "open_mb" in got else "the start"
        print(f"{label:<30} {got['rows']:>10,} rows {got['s']:>8.1f} s {got['rows'] / got['s']:>10,.0f} rows/s  "
              f"peak RSS beyond {beyond} {got['beyond_mb']:>7,.0f} MB{opened}{size}"
              f"{'' if got['exact_peak'] else ' (peak: ru_maxrss, not reset)'}", flush=True)
    report = Report(f"export and restore of {args.n:,} memories")
    report.table("steps", rows)
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
