"""Writes side by side in one run: a loop of remember() against remember_many() of the same
turns, and remember() on a database file with durability "normal" against "full".

    python benchmarks/bench_writes.py [--turns 256] [--rounds 3] [--embedder default,hashing]

Each round writes the same turns into fresh databases every way, the order alternating between
rounds; the models are loaded (``warm()``) before the first timing. It prints ms per turn (the
median over rounds) and the ratios loop / batch and full / normal.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

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
    start = time.perf_counter()
    write(db)
    spent = time.perf_counter() - start
    db.close()
    return spent


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
        start = time.perf_counter()
        for i, t in enumerate(texts):
            db.remember(t, session="s", timestamp=T0 + i)
        spent = time.perf_counter() - start
        db.close()
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--embedder", default="default,hashing", help="comma-separated: default, hashing")
    args = ap.parse_args()
    texts = turns(args.turns)
    print(f"{args.turns} turns, {args.rounds} rounds, median ms per turn")
    print(f"{'embedder':<10} {'remember() loop':>16} {'remember_many()':>16} {'ratio':>7}")
    for name in args.embedder.split(","):
        emb = None if name == "default" else name
        times: dict[str, list[float]] = {"loop": [], "batch": []}
        for r in range(args.rounds):
            order = [("loop", loop), ("batch", batch)]
            for key, fn in order if r % 2 == 0 else order[::-1]:
                times[key].append(fn(emb, texts) / len(texts) * 1000)
        lo, ba = statistics.median(times["loop"]), statistics.median(times["batch"])
        print(f"{name:<10} {lo:>16.3f} {ba:>16.3f} {lo / ba:>6.1f}x")
    print()
    print(f"{'on a file':<10} {'normal':>16} {'full':>16} {'ratio':>7}")
    durable: dict[str, list[float]] = {"normal": [], "full": []}
    for r in range(args.rounds):
        for mode in ("normal", "full") if r % 2 == 0 else ("full", "normal"):
            durable[mode].append(on_file(mode, texts) / len(texts) * 1000)
    no, fu = statistics.median(durable["normal"]), statistics.median(durable["full"])
    print(f"{'remember()':<10} {no:>16.3f} {fu:>16.3f} {fu / no:>6.1f}x")


if __name__ == "__main__":
    main()
