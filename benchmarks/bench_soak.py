"""Soak: minutes of mixed operations from 4 processes, the writer SIGKILLed every few seconds.

    .venv/bin/python -m benchmarks.bench_soak --minutes 30

One writer process (remember, corrections, grades, forget, consolidate with a summarizer,
expire, build_index, close and reopen) and three reader processes (read-only handles:
recall, hybrid and lexical search, get, count) share one database file. Every few seconds
(a seeded draw between ``--kill-min`` and ``--kill-max``) the writer is killed with
SIGKILL at whatever it was doing, and restarted. The writer acknowledges each call that
returned on a pipe; after every kill, before the restart, the file is checked against
what was acknowledged: every acknowledged memory there (or in the fact a consolidation
made of it), no acknowledged forget undone, no write stored twice, FTS5 whole. At the
end a writer opens the file once more and a search through its HNSW index must score as
an exact scan. It prints the operations done, the kills survived and anything lost (the
goal is 0). Not part of CI: the last result is in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

from benchmarks.harness import ROOT, Report, child_env, flags, module_command

WORDS = ("tea coffee paris london dark light mode pdf csv report cat dog blue red green rome oslo "
         "monday meeting invoice budget travel train flight hotel").split()
SESSIONS = [f"s{i}" for i in range(8)]
K_FROM, K_EXPIRES = "_vx_consolidated_from", "_vx_expires"


def ack(*parts: object) -> None:
    os.write(1, (" ".join(str(p) for p in parts) + "\n").encode())


def _open(path: str, read_only: bool = False):
    from vxmem import Vectrix

    return Vectrix(path, embedder="hashing", exact_threshold=64, read_only=read_only)


def writer(path: str, seed: int) -> None:
    """The writer: random writes until killed, each acknowledged once it returned."""
    from vxmem.store.mirror import file as mirror_file
    from vxmem.store.vector import hnsw

    hnsw.PENDING_FLUSH = 64  # the background flush runs often
    mirror_file.MIN_DOCUMENTS = 200  # the mirror file is saved and read
    rng = random.Random(seed)
    db = _open(path)
    mine = [r.id for r in db.scan() if r.metadata.get("_vx_kind") == "fact"
            and "_vx_superseded_by" not in r.metadata][-200:]  # live facts: never expired, never consolidated
    i = 0
    while True:
        i += 1
        ts = seed * 1_000_000 + i
        op = rng.random()
        text = f"k{seed}n{i} " + " ".join(rng.choice(WORDS) for _ in range(4))
        if op < 0.50 or not mine:
            kind = "fact" if rng.random() < 0.3 else "turn"
            ttl = rng.choice([None, None, None, 0.5]) if kind == "turn" else None
            mid = db.remember(text, session=rng.choice(SESSIONS), kind=kind, timestamp=ts, ttl_days=ttl)
            expires = db.get(mid).metadata.get(K_EXPIRES)
            ack("mem", mid, "none" if expires is None else repr(float(expires)))
            if kind == "fact":
                mine.append(mid)
        elif op < 0.60:
            old = mine.pop(rng.randrange(len(mine)))  # superseded now: not corrected again
            new = db.feedback(old, "corrected", correction="actually " + text, timestamp=ts)
            ack("mem", new, "none")
        elif op < 0.70:
            db.feedback(rng.choice(mine), rng.choice(["useful", "dead_end"]), timestamp=ts)
            ack("op", "grade")
        elif op < 0.78:
            mid = mine.pop(rng.randrange(len(mine)))
            ack("forgetting", mid)
            db.forget(ids=[mid])
            ack("gone", mid)
        elif op < 0.80:
            rep = db.consolidate(rng.choice(SESSIONS), lambda items: ["summary of " + items[0]["text"]],
                                 keep_recent=4, batch_turns=8, now=ts)
            ack("op", "consolidate", len(rep.facts))
        elif op < 0.81:
            ack("expiring", ts)
            ack("op", "expire", db.expire(now=ts))
        elif op < 0.812:
            db.build_index()
            ack("op", "build_index")
        elif op < 0.815:
            db.close()
            db = _open(path)
            ack("op", "reopen")
        else:
            db.recall(text, session=rng.choice(SESSIONS), limit=5, now=ts, preset="fast")
            ack("op", "recall")


def reader(path: str, seed: int, seconds: float, pause: float) -> None:
    """A reader: reads until the deadline, ``pause`` seconds between reads (so three readers
    leave the writer a share of two cores); prints its counts as JSON."""
    rng = random.Random(seed)
    done = errors = 0
    deadline = time.monotonic() + seconds
    first_error = None
    with _open(path, read_only=True) as db:
        while time.monotonic() < deadline:
            q = " ".join(rng.choice(WORDS) for _ in range(2))
            try:
                op = rng.random()
                if op < 0.4:
                    res = db.recall(q, limit=5, now=10**10, preset="fast")
                elif op < 0.7:
                    res = db.search(q, limit=5, mode="hybrid")
                else:
                    res = db.search(q, limit=5, mode="lexical")
                assert len(res) <= 5
                db.count()
                done += 1
                time.sleep(pause)
            except Exception as exc:  # noqa: BLE001 - counted and shown, never hidden
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
    print(json.dumps({"ops": done, "errors": errors, "first_error": first_error}))


class Ledger:
    """What the writers acknowledged."""

    def __init__(self) -> None:
        self.present: dict[str, float | None] = {}
        self.gone: set[str] = set()
        self.ops: dict[str, int] = defaultdict(int)

    def read(self, line: str) -> None:
        parts = line.split()
        tag = parts[0]
        if tag == "mem":
            self.present[parts[1]] = None if parts[2] == "none" else float(parts[2])
            self.ops["remember/correct"] += 1
        elif tag == "forgetting":
            self.present.pop(parts[1], None)
        elif tag == "gone":
            self.gone.add(parts[1])
            self.ops["forget"] += 1
        elif tag == "expiring":  # what has expired by then may go, acknowledged or not
            now = float(parts[1])
            for mid in [m for m, e in self.present.items() if e is not None and e <= now]:
                del self.present[mid]
        elif tag == "op":
            self.ops[parts[1]] += 1


def check(path: str, ledger: Ledger) -> dict[str, int]:
    """The file as the kill left it, against the acknowledgements."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, text, metadata FROM vx_docs")
        docs = {id: (text, json.loads(meta)) for id, text, meta in rows}
        conn.execute("INSERT INTO vx_fts (vx_fts) VALUES ('integrity-check')")
    finally:
        conn.close()
    carried = {t for _, meta in docs.values() for t in meta.get(K_FROM) or ()}
    lost = [m for m in ledger.present if m not in docs and m not in carried]
    back = [m for m in ledger.gone if m in docs]
    texts = [t for t, _ in docs.values() if not t.startswith("summary of ")]
    for mid in [m for m in ledger.present if m not in docs]:  # consolidated: the fact carries it now
        del ledger.present[mid]
    return {"lost": len(lost), "back": len(back), "twice": len(texts) - len(set(texts)), "docs": len(docs)}


def final_check(path: str) -> bool:
    db = _open(path)
    try:
        hnsw = db.search("tea coffee paris", limit=10)
        db.exact_threshold = 0
        exact = {r.id: round(r.score, 5) for r in db.search("tea coffee paris", limit=db.count())}
        return [round(r.score, 5) for r in hnsw] == [exact[r.id] for r in hnsw]
    finally:
        db.close()


def role_command(role: str, *args: str) -> list[str]:
    """The command line of a writer or reader process: this module, run with ``--_role``."""
    return module_command(__spec__.name if __spec__ else "benchmarks.bench_soak", "--_role", role, *args)


def run_writer(path: str, seed: int, ledger: Ledger, wait: float) -> None:
    proc = subprocess.Popen(role_command("writer", path, str(seed)), env=child_env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[bytes] = []
    pump = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    pump.start()
    try:
        proc.wait(timeout=wait)
        raise SystemExit(f"the writer exited on its own: {proc.stderr.read().decode()[-2000:]}")
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    pump.join()
    proc.stdout.close()
    proc.stderr.close()
    for raw in lines:
        line = raw.decode()
        if line.endswith("\n") and line.strip():
            ledger.read(line)


def summary(args: argparse.Namespace, ledger: Ledger, outs: list[dict], got: dict[str, int]) -> Report:
    """The soak's one table: operations, kills and anything lost."""
    errors = sum(o["errors"] for o in outs)
    first = next((o["first_error"] for o in outs if o["first_error"]), None)
    report = Report(f"soak: {args.minutes:g} min, 1 writer killed with SIGKILL every {args.kill_min:g}-"
                    f"{args.kill_max:g} s and restarted, 3 readers (resting {args.reader_pause:g} s between reads); "
                    f"hashing embedder; {os.cpu_count()} cores")
    parts = ", ".join(f"{k} {v:,}" for k, v in sorted(ledger.ops.items()))
    report.table("soak", [
        {"figure": "writer operations acknowledged", "value": f"{sum(ledger.ops.values()):,} ({parts})"},
        {"figure": "reader operations", "value": f"{sum(o['ops'] for o in outs):,} (errors: {errors}"
                                                 + (f", first: {first}" if errors else "") + ")"},
        {"figure": "kills survived", "value": f"{got['kills']} (each followed by a check of the file, FTS5 "
                                              "integrity included)"},
        {"figure": "acknowledged writes lost", "value": got["lost"]},
        {"figure": "forgets undone", "value": got["back"]}, {"figure": "writes stored twice", "value": got["twice"]},
        {"figure": "final documents", "value": f"{got['docs']:,}"},
        {"figure": "a search through the reopened HNSW index scores as an exact scan", "value": got["exact"]}])
    return report


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--kill-min", type=float, default=1.0, help="seconds a writer runs at least before its kill")
    ap.add_argument("--kill-max", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reader-pause", type=float, default=0.01, help="seconds each reader rests between reads")
    ap.add_argument("--dir", default=None, help="where the database goes (default: a temporary directory)")
    ap.add_argument("--_role", default=None)
    args, rest = flags(ap).parse_known_args(argv)
    if args._role == "writer":
        writer(rest[0], int(rest[1]))
        return 0
    if args._role == "reader":
        reader(rest[0], int(rest[1]), float(rest[2]), float(rest[3]))
        return 0
    os.environ.setdefault("VXMEM_EMBEDDER", "hashing")
    directory = args.dir or tempfile.mkdtemp(prefix="vxsoak")
    path = os.path.join(directory, "soak.db")
    _open(path).close()
    seconds = args.minutes * 60
    rng = random.Random(args.seed)
    readers = [subprocess.Popen(role_command("reader", path, str(k), str(seconds), str(args.reader_pause)),
                                env=child_env(), cwd=ROOT, stdout=subprocess.PIPE, text=True) for k in range(3)]
    ledger = Ledger()
    start = time.monotonic()
    got = {"kills": 0, "lost": 0, "back": 0, "twice": 0, "docs": 0}
    while time.monotonic() - start < seconds:
        run_writer(path, args.seed * 100_000 + got["kills"] + 1, ledger, rng.uniform(args.kill_min, args.kill_max))
        got["kills"] += 1
        one = check(path, ledger)
        for key in ("lost", "back", "twice"):
            got[key] += one[key]
        got["docs"] = one["docs"]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in readers]
    got["exact"] = final_check(path)
    report = summary(args, ledger, outs, got)
    print(report.title)
    report.print()
    report.save(args)
    return 1 if got["lost"] or got["back"] or got["twice"] or not got["exact"] or any(o["errors"] for o in outs) else 0


if __name__ == "__main__":
    sys.exit(main())
