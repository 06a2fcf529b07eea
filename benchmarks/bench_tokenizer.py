"""Tokenizing time: vxmem's pure-Python WordPiece tokenizer beside the Rust ``tokenizers`` it replaced.

    .venv/bin/python -m benchmarks.bench_tokenizer [--texts 1000] [--rounds 10] [--locomo PATH]

Texts are the shipped datasets' turns (or a LoCoMo file's, with ``--locomo``), 1,000 of them, and
100 long texts of about 830 tokens each (80 dataset turns joined), which every model cuts at 512.
Each round tokenizes all of them once each way, the ways taking turns:

- ``vxmem cold``: a :class:`~vxmem.models.wordpiece.WordPieceTokenizer` with its word cache emptied;
- ``vxmem warm``: one tokenizer kept across rounds, as a loaded model keeps it;
- ``tokenizers``: ``encode_batch`` of the Rust library, as vxmem called it (``no_padding``, truncation
  at 512; it spreads a batch over the machine's cores), when it is installed (the ``dev`` extra).

Then each short text alone, one call each (a recall tokenizes its query so), the ways taking turns.
It prints the median ms per 1,000 texts, the time to read the ``tokenizer.json``, and whether every
text got the same ids both ways.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence

import vxmem  # noqa: F401  (onnxruntime before usearch)
from benchmarks.corpora import locomo_turns, synthetic_datasets
from benchmarks.harness import Report, best_of, flags, interleaved
from vxmem.models.packaged import BGE_SMALL
from vxmem.models.wordpiece import WordPieceTokenizer


def dataset_turns() -> list[str]:
    out = []
    for path in synthetic_datasets():
        with open(path, encoding="utf-8") as f:
            out.extend(e["text"] for e in map(json.loads, f) if e.get("type") == "turn")
    return list(dict.fromkeys(out))


def rust_tokenizer(path: str):
    """tokenizers' Tokenizer set up as vxmem set it up, or None when it is not installed."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.enable_truncation(max_length=512)
    return tok


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1000, help="short texts (dataset turns, repeated if needed)")
    ap.add_argument("--locomo", help="a LoCoMo JSON file whose turns are the texts (not shipped)")
    args = flags(ap, rounds=10, rounds_help="rounds, each way once a round").parse_args(argv)
    pool = locomo_turns(args.locomo) if args.locomo else dataset_turns()
    short = (pool * (args.texts // len(pool) + 1))[: args.texts]
    long = [" ".join(short[i:i + 80]) for i in range(0, 100 * 7, 7)]
    path = str(BGE_SMALL.files()["tokenizer.json"])
    rust = rust_tokenizer(path)
    warm = WordPieceTokenizer.from_file(path, max_length=512)
    cold = WordPieceTokenizer.from_file(path, max_length=512)
    tokens = sum(len(warm.tokenize(t)) for t in long) / len(long)
    report = Report(f"Tokenizing {len(short)} texts ({sum(map(len, short)) / len(short):.0f} characters on "
                    f"average) and {len(long)} long ones ({tokens:.0f} tokens, cut at 512); median of {args.rounds} "
                    "rounds")
    print(report.title)
    rows = []
    for name, texts in (("short", short), ("long", long)):
        ways = {"vxmem cold": lambda i, t=texts: cold.clear_cache() or cold.encode_batch(t),
                "vxmem warm": lambda i, t=texts: warm.encode_batch(t)}
        if rust is not None:
            ways["tokenizers"] = lambda i, t=texts: rust.encode_batch(t)
        got = interleaved(ways, args.rounds)
        row = {"texts": name, "n": len(texts)}
        for way, timings in got.items():
            row[f"{way}, ms per 1,000"] = f"{statistics.median(timings.wall) * 1e6 / len(texts):.1f}"
        if rust is not None:
            row["same ids"] = "yes" if [e.ids for e in warm.encode_batch(texts)] == \
                [e.ids for e in rust.encode_batch(texts)] else "NO"
        rows.append(row)
    one = {"vxmem warm": lambda i: warm.encode_batch([short[i]])}
    if rust is not None:
        one["tokenizers"] = lambda i: rust.encode_batch([short[i]])
    got = interleaved(one, len(short))
    rows.append({"texts": "one at a time (as a recall's query)", "n": len(short),
                 **{f"{way}, ms per 1,000": f"{statistics.median(t.wall) * 1e6:.1f}" for way, t in got.items()}})
    loads = {"vxmem": best_of(lambda: WordPieceTokenizer.from_file(path, max_length=512), 5)[0]}
    if rust is not None:
        loads["tokenizers"] = best_of(lambda: rust_tokenizer(path), 5)[0]
    report.table("tokenize", rows)
    report.table("load", [{"way": k, "ms to read tokenizer.json": f"{v * 1e3:.1f}"} for k, v in loads.items()])
    report.print()
    report.write(args.json, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
