"""Writes side by side in one run: a loop of remember() against remember_many() of the same
turns, and remember() on a database file with durability "normal" against "full".

    .venv/bin/python -m benchmarks.bench_writes [--turns 256] [--rounds 3] [--embedder default,hashing]

Each round writes the same turns into fresh databases every way, the order alternating between
rounds; the models are loaded (``warm()``) before the first timing. It prints ms per turn (the
median over rounds) and the ratios loop / batch and full / normal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import Report, Timer, flags
from vxmem import Vectrix

T0 = 1_700_000_000.0


def turns(n: int) -> list[str]:
    topics = ["the build", "dinner plans", "a trip to Lisbon", "the new laptop", "my sister", "the garden"]
    return [f"Turn {i}: a few words about {topics[i % len(topics)]} and what happened after {i % 7} days"
            for i in range(n)]


def _timed(embedder: str | None, write) -> float:
    """Seconds ``write(db)`` takes on a fresh in-memory database whose models are loaded."""
    db = Vectrix(embedder=embedder)
    db.warm()
    with Timer() as t:
        write(db)
    db.close()
    return t.wall


def loop(embedder: str | None, texts: list[str]) -> float:
    def write(db: Vectrix) -> None:
        for i, t in enumerate(texts):
            db.remember(t, session="s", timestamp=T0 + i)

    return _timed(embedder, write)


def batch(embedder: str | None, texts: list[str]) -> float:
    return _timed(embedder, lambda db: db.remember_many([{"text": t, "timestamp": T0 + i}
                                                         for i, t in enumerate(texts)], session="s"))


def on_file(durability: str, texts: list[str]) -> float:
    """remember() in a loop on a database file (the hashing embedder: the commit is the cost)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Vectrix(Path(tmp) / "w.vxdb", embedder="hashing", durability=durability)
        db.warm()
        with Timer() as timer:
            for i, t in enumerate(texts):
                db.remember(t, session="s", timestamp=T0 + i)
        db.close()
    return timer.wall


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=256)
    ap.add_argument("--embedder", default="default,hashing", help="comma-separated: default, hashing")
    args = flags(ap, rounds=3, rounds_help="rounds, the order alternating").parse_args(argv)
    texts = turns(args.turns)
    report = Report(f"{args.turns} turns, {args.rounds} rounds, median ms per turn")
    rows = []
    for name in args.embedder.split(","):
        emb = None if name == "default" else name
        times: dict[str, list[float]] = {"loop": [], "batch": []}
        for r in range(args.rounds):
            order = [("loop", loop), ("batch", batch)]
            for key, fn in order if r % 2 == 0 else order[::-1]:
                times[key].append(fn(emb, texts) / len(texts) * 1000)
        lo, ba = statistics.median(times["loop"]), statistics.median(times["batch"])
        rows.append({"embedder": name, "remember() loop": f"{lo:.3f}", "remember_many()": f"{ba:.3f}",
                     "ratio": f"{lo / ba:.1f}x"})
    report.table("loop or batch", rows)
    durable: dict[str, list[float]] = {"normal": [], "full": []}
    for r in range(args.rounds):
        for mode in ("normal", "full") if r % 2 == 0 else ("full", "normal"):
            durable[mode].append(on_file(mode, texts) / len(texts) * 1000)
    no, fu = statistics.median(durable["normal"]), statistics.median(durable["full"])
    report.table("on a file", [{"on a file": "remember()", "normal": f"{no:.3f}", "full": f"{fu:.3f}",
                                "ratio": f"{fu / no:.1f}x"}])
    print(report.title)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
