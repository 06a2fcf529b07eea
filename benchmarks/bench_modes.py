"""Latency of the search modes: dense, lexical (FTS5 BM25) and hybrid, side by side in one run.

    .venv/bin/python -m benchmarks.bench_modes                 # 10k and 100k memories
    .venv/bin/python -m benchmarks.bench_modes --sizes 10000   # quick

Memories are synthetic 14-word sentences (60% of the words drawn by Zipf's law from 5,000
made-up words that no stemmer merges, the rest function words) spread over 50 sessions,
stored in a database file with the default HashingEmbedder. Each query is timed through
recall() within one session and across all sessions; the HNSW index build (cross-session
dense above 20k memories) is done before timing and reported on its own. Target: lexical
and hybrid within 2x of dense.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import Report, Timer, flags, parse_list, timed
from vxmem import Vectrix

DAY = 86400.0
T0 = 1_700_000_000.0
MODES = ("dense", "lexical", "hybrid")


def vocabulary(size: int = 5000, seed: int = 7) -> list[str]:
    """Distinct made-up words (consonant-vowel syllables) that no stemmer merges."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4))))
    out = sorted(words)
    rng.shuffle(out)  # frequency rank independent of spelling
    return out


VOCAB = vocabulary()
# Zipf's law, as in real text: the r-th most common word has weight 1 / r.
ZIPF = [1.0 / r for r in range(1, len(VOCAB) + 1)]
COMMON = "the a of to and in is it you that was for on are with as i my".split()


def sentences(n: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choices(VOCAB, ZIPF, k=1)[0] if rng.random() < 0.6 else rng.choice(COMMON)
                     for _ in range(14)) for _ in range(n)]


def build(path: Path, n: int, rng: random.Random) -> Vectrix:
    db = Vectrix(path)
    texts = sentences(n, rng)
    step = 5000
    for i in range(0, n, step):
        chunk = texts[i:i + step]
        meta = [{"_vx_kind": "turn", "_vx_session": f"s{(i + j) % 50}", "_vx_role": "user",
                 "_vx_ts": T0 + (i + j) * 60.0, "_vx_turn": (i + j) // 50} for j in range(len(chunk))]
        db.add(chunk, metadata=meta)
    return db


def one_size(path: Path, n: int, rng: random.Random, rounds: int) -> tuple[list[dict], str]:
    """The rows of one size (each mode in turn, in a session and across all) and its build line."""
    with Timer() as t:
        db = build(path, n, rng)
    build_s = t.wall
    queries = [" ".join(s.split()[:5]) for s in sentences(rounds, rng)]
    now = T0 + n * 60.0
    with Timer() as t:
        db.recall(queries[0], now=now)
        db.build_index()  # timed apart: large builds otherwise run in the background
    warm_s = t.wall
    with Timer() as t:
        db.recall(queries[0], mode="lexical", now=now)  # reads the FTS5 postings into memory
    lex_s = t.wall
    rows = []
    for scope, session in (("session", "s7"), ("all sessions", None)):
        base = None
        for mode in MODES:
            got = timed(lambda i, session=session, mode=mode: db.recall(
                queries[i % len(queries)], session=session, mode=mode, now=now), rounds).ms()
            base = base or got["p50"]
            rows.append({"memories": f"{n:,}", "recall scope": scope, "mode": mode, "p50 ms": f"{got['p50']:.2f}",
                         "p95 ms": f"{got['p95']:.2f}", "p50 / dense": f"{got['p50'] / base:.2f}x"})
    db.close()
    return rows, (f"# {n:,} memories: built in {build_s:.1f} s; first cross-session recall "
                  f"(HNSW build included) {warm_s * 1000:.0f} ms; first lexical recall (postings "
                  f"read from FTS5) {lex_s * 1000:.0f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    args = flags(ap, rounds=50, rounds_help="timed recalls per mode and scope", aliases=("--reps",)).parse_args(argv)
    rng = random.Random(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in parse_list(args.sizes, int):
            got, line = one_size(Path(tmp) / f"m{n}.vxdb", n, rng, args.rounds)
            rows += got
            print(line)
    print()
    report = Report("latency of the search modes")
    report.table("modes", rows)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
