"""Recall on PostgreSQL against the file store: every probe of the shipped datasets, replayed into both.

    .venv/bin/python -m benchmarks.bench_postgres_equality [--embedder hashing] [--url postgresql://...]
    .venv/bin/python -m benchmarks.bench_postgres_equality --locomo path/to/locomo10.json

Each conversation (the shipped ``datasets/*.jsonl``, the LoCoMo and LongMemEval fixtures, and
``--locomo`` files) is replayed event by event into a new database file and a new PostgreSQL
database (pgserver, unless ``--url`` names a server), as the workbench's replay drives a
memory; at every probe both recall in each mode (dense, lexical, hybrid), and the run counts
the recalls whose memories (by rowid), order and scores (within 1e-6) are the same.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from benchmarks.bench_postgres import server
from benchmarks.harness import Report, flags
from vxmem import Vectrix
from vxmem.memory.rules import get_judge, get_summarizer
from vxmem.workbench.datasets.jsonl import load_jsonl
from vxmem.workbench.datasets.locomo import load_locomo
from vxmem.workbench.datasets.longmemeval import load_longmemeval

ROOT = Path(__file__).resolve().parent.parent
MODES = ("dense", "lexical", "hybrid")


def drive(db: Vectrix, conv: Any) -> list[tuple[list[int], list[float]]]:
    """Replay ``conv`` into ``db``; every probe's recall in each mode as (rowids, scores)."""
    labels: dict[Any, list[str]] = {}
    answers = []
    summarize = get_summarizer(conv.meta.get("summarizer"))
    for ev in conv.events:
        if ev.type in ("turn", "fact"):
            fact = ev.type == "fact"
            mid = db.remember(ev.text, session=ev.session, role=ev.role, timestamp=ev.time, ttl_days=ev.ttl_days,
                              pinned=fact and ev.pinned, kind="fact" if fact and not ev.pinned else None)
            labels.setdefault(ev.label, []).append(mid)
        elif ev.type == "feedback":
            targets = [i for i in labels.get(ev.target, []) if i in db]
            if targets:
                db.feedback(targets[-1], ev.outcome, correction=ev.correction, timestamp=ev.time)
        elif ev.type == "forget":
            if ev.targets:
                db.forget(ids=[i for lab in ev.targets for i in labels.get(lab, ())], now=ev.time)
            else:
                db.forget(session=ev.session, kinds=ev.kinds or ("turn",), older_than=ev.older_than,
                          superseded=ev.superseded, now=ev.time)
        elif ev.type == "expire":
            db.expire(now=ev.time)
        elif ev.type == "consolidate":
            db.consolidate(ev.session, summarize, keep_recent=ev.keep_recent, older_than=ev.older_than,
                           batch_turns=ev.batch_turns, now=ev.time)
        elif ev.type == "probe":
            for mode in MODES:
                res = db.recall(ev.query, session=ev.session, limit=ev.limit or 10, mode=mode, now=ev.time)
                m = db.engine.mirror
                answers.append(([int(m.rowid[m.pos_of_id[i]]) for i in res.ids], [r.score for r in res]))
    return answers


def with_scope(url: str, scope: str) -> str:
    """``url`` with vxmem's ``scope`` parameter (left out for the default)."""
    return url if scope == "all" else f"{url}{'&' if '?' in url else '?'}scope={scope}"


def same(a: tuple[list[int], list[float]], b: tuple[list[int], list[float]]) -> bool:
    return a[0] == b[0] and bool(np.allclose(a[1], b[1], rtol=0, atol=1e-6))


def conversations(extra: Sequence[str]) -> list[Any]:
    convs = [load_jsonl(p) for p in sorted((ROOT / "datasets").glob("*.jsonl"))]
    convs += load_locomo(ROOT / "datasets" / "fixtures" / "locomo_sample.json")
    convs += load_longmemeval(ROOT / "datasets" / "fixtures" / "longmemeval_sample.json")
    for path in extra:
        convs += load_locomo(path)
    return convs


def main(argv: Sequence[str] | None = None) -> int:
    import psycopg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", default="hashing", help="a name of vxmem.models.embed.EMBEDDERS")
    ap.add_argument("--url", help="a PostgreSQL server with pgvector whose user may create databases")
    ap.add_argument("--locomo", action="append", default=[], help="a LoCoMo file to add (repeatable)")
    ap.add_argument("--scope", choices=("all", "user"), default="all",
                    help="the PostgreSQL handles' scope= (user: a probe's session is read alone, one naming none "
                         "through the HNSW index)")
    args = flags(ap).parse_args(argv)
    url, srv = server(args.url)
    rows = []
    try:
        for conv in conversations(args.locomo):
            name = f"vx_eq_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {name}")
            judge = get_judge(conv.meta.get("judge"))
            with tempfile.TemporaryDirectory() as tmp, \
                    Vectrix(Path(tmp) / "f.db", embedder=args.embedder, judge=judge) as file_db, \
                    Vectrix(with_scope(urlunsplit(urlsplit(url)._replace(path=f"/{name}")), args.scope),
                            embedder=args.embedder, judge=judge) as pg_db:
                want, got = drive(file_db, conv), drive(pg_db, conv)
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            equal = sum(same(w, g) for w, g in zip(want, got, strict=True))
            rows.append({"conversation": conv.name, "events": len(conv.events), "recalls": len(want),
                         "identical": equal, "share": f"{equal / max(len(want), 1):.0%}"})
    finally:
        if srv is not None:
            srv.cleanup()
    total, equal = sum(r["recalls"] for r in rows), sum(r["identical"] for r in rows)
    rows.append({"conversation": "all", "events": sum(r["events"] for r in rows), "recalls": total,
                 "identical": equal, "share": f"{equal / max(total, 1):.0%}"})
    report = Report(f"recall on PostgreSQL (scope={args.scope}) against the file store ({args.embedder} embedder)")
    report.table("equality", rows, note="identical: the same memories in the same order, scores within 1e-6")
    print(report.title)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
