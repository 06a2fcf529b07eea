"""The file store and PostgreSQL side by side in one run: remember, recall, and a second
process's handle following the writes.

    .venv/bin/python -m benchmarks.bench_postgres [--memories 2000] [--rounds 200] [--url postgresql://...]

Without ``--url`` it starts a PostgreSQL 16 with pgvector through the pgserver wheel (the
``postgres`` extra) on a Unix socket in a temporary directory. Both stores get the same
memories (50 sessions, the hashing embedder, vectors embedded up front so the build times
the stores), then the timed calls alternate between them call by call: ``remember()``, a
session's recall, a recall across every session, and on PostgreSQL a recall by a second
handle on the same database right after each write of the first (it takes the write in
through the change log first). Prints p50/p99 in ms and the PostgreSQL / file ratio, then
the time to open each store with those memories.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import Report, best_of, flags, interleaved, paired_rows
from vxmem import Vectrix
from vxmem.models.embed import get_embedder

T0 = 1_700_000_000.0
TOPICS = ["the build", "dinner plans", "a trip to Lisbon", "the new laptop", "my sister", "the garden", "jazz",
          "the dentist", "a red bicycle", "the tax return"]


class Table:
    """The hashing embedder's vectors of the texts, looked up (so the build times the store)."""

    name = get_embedder("hashing").name

    def __init__(self, texts: list[str]):
        emb = get_embedder("hashing")
        self.vecs = dict(zip(texts, np.asarray(emb(texts), dtype=np.float32)))
        self.emb = emb

    def __call__(self, texts: list[str]) -> np.ndarray:
        got = [self.vecs.get(t) for t in texts]
        if any(v is None for v in got):
            return np.asarray(self.emb(texts), dtype=np.float32)
        return np.stack(got)


def texts(n: int) -> list[str]:
    return [f"turn {i}: a few words about {TOPICS[i % len(TOPICS)]} after {i % 7} days" for i in range(n)]


def build(db: Vectrix, items: list[str]) -> None:
    db.remember_many([{"text": t, "timestamp": T0 + i, "session": f"s{i % 50}"} for i, t in enumerate(items)])


def server(url: str | None) -> tuple[str, Any]:
    if url:
        return url, None
    import pgserver

    srv = pgserver.get_server(tempfile.mkdtemp(prefix="vxmem-bench-pg-"), cleanup_mode="delete")
    return srv.get_uri(), srv


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--url", help="an empty PostgreSQL database with pgvector (default: one pgserver starts)")
    args = flags(ap, rounds=200).parse_args(argv)
    items = texts(args.memories + args.rounds)
    table = Table(items + [f"new memory {i} about {TOPICS[i % 10]}" for i in range(args.rounds)])
    url, srv = server(args.url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores = {"file": Vectrix(Path(tmp) / "b.db", embedder=table), "postgres": Vectrix(url, embedder=table)}
            follower = Vectrix(url, embedder=table)
            for db in stores.values():
                build(db, items[: args.memories])
                db.warm()
            report = run(args, stores, follower)
            for db in (*stores.values(), follower):
                db.close()
            report.table("open", [{"store": name, "open ms (best of 3)": round(best_of(
                lambda where=where: Vectrix(where, embedder=table).close(), 3)[0] * 1e3, 1)}
                for name, where in (("file", Path(tmp) / "b.db"), ("postgres", url))],
                note="the file store maps the mirror file its close saved; PostgreSQL reads every row")
    finally:
        if srv is not None:
            srv.cleanup()
    print(report.title)
    report.print()
    report.save(args)
    return 0


def run(args: argparse.Namespace, stores: dict[str, Vectrix], follower: Vectrix) -> Report:
    calls: dict[str, Any] = {}
    for name, db in stores.items():
        calls[f"remember|{name}"] = lambda i, db=db: db.remember(f"new memory {i} about {TOPICS[i % 10]}",
                                                                 session=f"s{i % 50}", timestamp=T0 + 10**6 + i)
        calls[f"recall, one session|{name}"] = lambda i, db=db: db.recall(TOPICS[i % 10], session=f"s{i % 50}",
                                                                          now=T0 + 2 * 10**6)
        calls[f"recall, every session|{name}"] = lambda i, db=db: db.recall(TOPICS[i % 10], now=T0 + 2 * 10**6)
    calls["recall, one session, by a second handle after each write|postgres"] = \
        lambda i: follower.recall(TOPICS[i % 10], session=f"s{i % 50}", now=T0 + 2 * 10**6)
    got = interleaved(calls, args.rounds)
    rows = paired_rows(got, digits=3)
    report = Report(f"file store and PostgreSQL, {args.memories} memories, {args.rounds} calls each, ms")
    report.table("latency", rows, note="one process; PostgreSQL on a local Unix socket")
    return report


if __name__ == "__main__":
    sys.exit(main())
