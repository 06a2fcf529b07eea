"""Many users' memories in PostgreSQL: a user's recall against the file store at that user's size, the
HNSW index across users against the exact answer, process memory, and what 1M memories would cost.

    .venv/bin/python -m benchmarks.bench_postgres_scale                      # 20k memories, 200 users
    .venv/bin/python -m benchmarks.bench_postgres_scale --memories 100000 --users 1000
    .venv/bin/python -m benchmarks.bench_postgres_scale --memories 1000000 --users 10000 --index-memory 4GB

The default takes a few minutes on a loaded 2-core machine, 100,000 memories about 8, a
million about 45 (loading them 37: see docs/POSTGRES.md). Without ``--url`` it starts a
PostgreSQL 16 with pgvector through the pgserver wheel. The memories (``corpora.sentence``
texts, ``WordsEmbedder`` vectors computed up front so the build times the stores) belong to
``--users`` users, three sessions each, and are loaded as docs/POSTGRES.md advises for many
memories: written one user per transaction through a handle opened without ``scope=user`` (so
no write inserts into pgvector's HNSW index), then the index made once over every row with
``maintenance_work_mem`` raised (``--index-memory``), as the first ``scope=user`` handle would.
A database file holds one user's memories, as many as each user has in PostgreSQL. Then,
call by call in turn:

- a user's recall on PostgreSQL (``scope=user``, the user's rows already read) and on that
  file, and a user's first recall on PostgreSQL (the user's rows read through the index);
- a remember by one user on each;
- a recall naming no user on PostgreSQL (the rows nearest the query by pgvector's HNSW index);
- a user's ``context()`` of one of their sessions, ``count()`` and ``scan()`` of their memories.

Then recall@10 of pgvector's HNSW search against the exact (sequential) one over every
memory, at several ``hnsw.ef_search``; each per-request database query timed alone; the
process memory of a scoped handle that read ``--rounds`` users and of a handle that reads
every row; the database's size; and the arithmetic from those measures to ``--target``
memories over ``--target-users`` users.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from benchmarks.bench_postgres import server
from benchmarks.corpora import T0, Lookup, WordsEmbedder, query, sentence
from benchmarks.harness import Report, flags, interleaved, paired_rows, percentiles, rss_mb, timed
from vxmem import Vectrix
from vxmem.core.keys import K_USER
from vxmem.store.postgres.database import NEAREST
from vxmem.store.postgres.schema import make_vector_index

USER_ROWS = "a user's rows (first read of a user)"


def scoped(url: str, option: str = "scope=user") -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


def corpus(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str], Lookup]:
    """The memories (by user, in order), the queries, and an embedder that looks their vectors up."""
    rng = np.random.default_rng(7)
    per_user = args.memories // args.users
    items = [{"text": f"{sentence(rng)} ({u}.{j})", "user": f"user{u}", "session": f"user{u}-s{j % 3}",
              "timestamp": T0 + (u * per_user + j) * 60.0} for u in range(args.users) for j in range(per_user)]
    queries = [query(rng) for _ in range(max(args.rounds, args.probes))]
    extra = [f"a new memory {i}: {sentence(rng)}" for i in range(args.rounds)]
    texts = [m["text"] for m in items] + queries + extra
    emb = WordsEmbedder()
    vecs = np.concatenate([emb(texts[a: a + 5000]) for a in range(0, len(texts), 5000)])
    return items, queries + extra, Lookup(texts, vecs, fallback=emb)


def build(url: str, items: list[dict[str, Any]], per_user: int, emb: Lookup) -> float:
    """Write every user's memories (one transaction per user) through a handle opened without
    ``scope=user``, which keeps no HNSW index (each write would insert into it); seconds per memory.

    It runs in a child process: that handle mirrors every row, which must not stay in the
    process whose memory is measured later."""
    ctx = mp.get_context("fork")  # the child shares the corpus; this process holds no connection yet
    got, put = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_load, args=(url, items, per_user, emb, put))
    child.start()
    put.close()
    seconds = float(got.recv())
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"the loading process failed (exit code {child.exitcode})")
    return seconds / len(items)


def _load(url: str, items: list[dict[str, Any]], per_user: int, emb: Lookup, put: Any) -> None:
    t = time.perf_counter()
    with Vectrix(url, embedder=emb) as db:
        for a in range(0, len(items), per_user):
            db.remember_many(items[a: a + per_user])
    put.send(time.perf_counter() - t)


def index(url: str, dim: int, memory: str) -> float:
    """Make the HNSW index once over every row, as the first ``scope=user`` handle would, with
    ``maintenance_work_mem`` raised so that pgvector builds the graph in memory; seconds."""
    t = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (memory,))  # the flag as a value
        with conn.transaction():
            make_vector_index(conn, dim)
    return time.perf_counter() - t


def moment(memories: int) -> float:
    """The recalls' moment: after every memory (one a minute from T0), the timed writes' included.
    A recall of the past would take away the documents created after it, reading them: at a
    million memories (694 days of them), 400 days in read 420,000 rows per recall."""
    return max(T0 + 400 * 86400.0, T0 + (memories + 1440) * 60.0)


def latency(args: argparse.Namespace, url: str, items: list[dict[str, Any]], texts: list[str],
            emb: Lookup) -> tuple[dict[str, Any], Vectrix]:
    """The interleaved timings (see the module's docstring); the scoped handle, for its memory."""
    per_user, now = args.memories // args.users, moment(args.memories)
    warm = [f"user{u}" for u in range(0, args.users, 2)][: args.rounds]  # read once before the timing
    cold = [f"user{u}" for u in range(1, args.users, 2)]
    queries, extra = texts[: len(texts) - args.rounds], texts[len(texts) - args.rounds:]
    tmp = tempfile.mkdtemp(prefix="vxmem-bench-scale-")
    file = Vectrix(Path(tmp) / "user.db", embedder=emb)
    file.remember_many(items[:per_user])  # user0's memories: one user's size
    file.warm()
    rss_before = rss_mb()
    pg = Vectrix(scoped(url), embedder=emb)
    for user in warm:
        pg.recall(queries[0], user=user, now=now)
    calls = {
        "a user's recall|file": lambda i: file.recall(queries[i], user="user0", now=now),
        "a user's recall|postgres": lambda i: pg.recall(queries[i], user=warm[i % len(warm)], now=now),
        "a user's first recall (reads their rows)|postgres":
            lambda i: pg.recall(queries[i], user=cold[i % len(cold)], now=now),
        "remember, one user|file": lambda i: file.remember(extra[i], user="user0", session="user0-s0",
                                                          timestamp=now - 3600 + i),
        "remember, one user|postgres": lambda i: pg.remember(extra[i], user=warm[i % len(warm)],
                                                            session=f"{warm[i % len(warm)]}-s0",
                                                            timestamp=now - 3600 + i),
        "recall across users (HNSW)|postgres": lambda i: pg.recall(queries[i], now=now),
        "a user's context (one session's)|file": lambda i: file.context(queries[i], user="user0",
                                                                       session="user0-s0", now=now),
        "a user's context (one session's)|postgres": lambda i: pg.context(
            queries[i], user=warm[i % len(warm)], session=f"{warm[i % len(warm)]}-s0", now=now),
        "a user's count|file": lambda i: file.count({K_USER: "user0"}),
        "a user's count|postgres": lambda i: pg.count({K_USER: warm[i % len(warm)]}),
        "a user's scan|file": lambda i: list(file.scan({K_USER: "user0"})),
        "a user's scan|postgres": lambda i: list(pg.scan({K_USER: warm[i % len(warm)]})),
    }
    got = interleaved(calls, args.rounds)
    file.close()
    return {"timings": got, "rss_scoped": rss_mb() - rss_before}, pg


def hnsw_recall(conn: psycopg.Connection, dim: int, qvecs: np.ndarray, efs: Sequence[int]) -> list[dict[str, Any]]:
    """recall@10 of the HNSW search against the exact one, and each one's time, per ef_search."""
    expr = f"vector::vector({dim})"
    sql = f"SELECT rowid FROM vx_docs ORDER BY {expr} <=> %s::vector({dim}) LIMIT 10"
    lit = ["[" + ",".join(f"{x:.7g}" for x in q) + "]" for q in qvecs]
    conn.execute("SET enable_indexscan = off")  # the exact answer: a scan of every row
    exact, t_exact = [], []
    for q in lit:
        t = time.perf_counter()
        exact.append({r for (r,) in conn.execute(sql, (q,)).fetchall()})
        t_exact.append(time.perf_counter() - t)
    conn.execute("SET enable_indexscan = on")
    rows = [{"search": "exact (sequential scan)", "recall@10": 1.0,
             "p50 ms": round(percentiles(t_exact, 1e3)["p50"], 2)}]
    for ef in efs:
        conn.execute(f"SET hnsw.ef_search = {int(ef)}")
        hits, times = 0, []
        for q, want in zip(lit, exact):
            t = time.perf_counter()
            got = {r for (r,) in conn.execute(sql, (q,)).fetchall()}
            times.append(time.perf_counter() - t)
            hits += len(got & want)
        rows.append({"search": f"HNSW, ef_search {ef}", "recall@10": round(hits / (10 * len(lit)), 4),
                     "p50 ms": round(percentiles(times, 1e3)["p50"], 2)})
    return rows


def query_costs(conn: psycopg.Connection, dim: int, qvecs: np.ndarray, users: int, rounds: int) -> dict[str, float]:
    """p50 ms of each database query a request makes, timed alone on one connection."""
    lit = ["[" + ",".join(f"{x:.7g}" for x in q) + "]" for q in qvecs]
    queries = {
        "generation check (every request)": ("SELECT value FROM vx_meta WHERE key = 'generation'", lambda i: ()),
        "BM25 statistics (every lexical or hybrid recall)": (
            "SELECT term, df FROM vx_terms WHERE term = ANY(%s)", lambda i: (["what", "about", "tea", f"w{i}"],)),
        USER_ROWS: (
            "SELECT rowid, id, text, metadata, vector, tokens FROM vx_docs WHERE user_id = %s ORDER BY rowid",
            lambda i: (f"user{(i * 7919) % users}",)),
        f"{NEAREST} nearest rows by HNSW (recall across users)": (
            f"SELECT rowid, id, text, metadata, vector, tokens FROM vx_docs ORDER BY vector::vector({dim}) <=> "
            f"%s::vector({dim}) LIMIT {NEAREST}", lambda i: (lit[i % len(lit)],)),
    }
    conn.execute(f"SET hnsw.ef_search = {NEAREST}")
    out = {}
    for name, (sql, params) in queries.items():
        got = timed(lambda i, sql=sql, params=params: conn.execute(sql, params(i)).fetchall(), rounds, warmup=5)
        out[name] = round(got.ms()["p50"], 3)
    return out


def sizes(conn: psycopg.Connection) -> dict[str, float]:
    row = conn.execute("SELECT pg_total_relation_size('vx_docs'), pg_relation_size('vx_docs_hnsw'), "
                       "pg_total_relation_size('vx_terms'), pg_database_size(current_database())").fetchone()
    assert row is not None
    return {"vx_docs with its indexes": row[0], "of which the HNSW index": row[1], "vx_terms": row[2],
            "whole database": row[3]}


def memory_rows(url: str, emb: Lookup, pg: Vectrix, rss_scoped: float, args: argparse.Namespace) -> list[dict]:
    """Process memory the handles took: the scoped one's users, and a handle that reads every row."""
    kept = len(pg.engine.scopes.states)
    rows_kept = sum(s.mirror.n for s in pg.engine.scopes.states.values())
    base = rss_mb()
    t = time.perf_counter()
    full = Vectrix(url, embedder=emb)
    opened = time.perf_counter() - t
    full.warm()
    grown = rss_mb() - base
    full.close()
    return [{"handle": f"scope=user, {kept} users read ({rows_kept} memories)", "open s": "-",
             "resident MB it added": round(rss_scoped, 1),
             "KB per memory held": round(rss_scoped * 1024 / max(rows_kept, 1), 2)},
            {"handle": f"every row ({args.memories} memories)", "open s": round(opened, 2),
             "resident MB it added": round(grown, 1), "KB per memory held": round(grown * 1024 / args.memories, 2)}]


def arithmetic(args: argparse.Namespace, costs: dict[str, float], size: dict[str, float], write_s: float,
               full_mb: float) -> list[dict[str, Any]]:
    """What ``--target`` memories over ``--target-users`` users would cost, from the measures above."""
    scale = args.target / args.memories
    per_memory = size["whole database"] / args.memories
    warm_ms = costs["generation check (every request)"] + costs["BM25 statistics (every lexical or hybrid recall)"]
    return [
        {"quantity": "database size", "measured": f"{size['whole database'] / 2**20:.0f} MB",
         f"at {args.target} memories": f"{per_memory * args.target / 2**30:.1f} GB ({per_memory:.0f} B/memory)"},
        {"quantity": "a user's rows (memories per user unchanged)",
         "measured": f"{args.memories // args.users} rows, {costs[USER_ROWS]} ms",
         f"at {args.target} memories": f"{args.target // args.target_users} rows per user: the same index scan"},
        {"quantity": "database time of a warm user's recall (2 queries)", "measured": f"{warm_ms:.2f} ms",
         f"at {args.target} memories": f"{warm_ms:.2f} ms (index lookups: log of the size); one core serves "
                                       f"about {1000 / warm_ms:.0f}/s"},
        {"quantity": "a handle that reads every row (process memory)", "measured": f"{full_mb:.0f} MB",
         f"at {args.target} memories": f"{full_mb * scale / 1024:.1f} GB in every process: why scope=user"},
        {"quantity": "loading, per memory (the rows, then the HNSW index once)", "measured": f"{write_s * 1e3:.2f} ms",
         f"at {args.target} memories": f"{write_s * args.target / 60:.0f} min to load on this machine"},
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=20_000)
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--probes", type=int, default=100, help="queries of the HNSW recall@10 (default 100)")
    ap.add_argument("--target", type=int, default=1_000_000, help="memories of the arithmetic (default 1M)")
    ap.add_argument("--target-users", type=int, default=10_000)
    ap.add_argument("--index-memory", default="1GB",
                    help="maintenance_work_mem of the HNSW index's build (default 1GB; some 3GB for 1M memories)")
    ap.add_argument("--url", help="an empty PostgreSQL database with pgvector (default: one pgserver starts)")
    args = flags(ap, rounds=200).parse_args(argv)
    items, texts, emb = corpus(args)
    url, srv = server(args.url)
    report = Report(f"{args.memories} memories over {args.users} users in PostgreSQL, {args.rounds} calls each")
    try:
        rows_s = build(url, items, args.memories // args.users, emb)
        index_s = index(url, int(emb(texts[:1]).shape[1]), args.index_memory)
        write_s = rows_s + index_s / args.memories
        report.table("load", [
            {"step": "the rows (one user per transaction, no HNSW index)", "ms per memory": round(rows_s * 1e3, 3),
             "minutes": round(rows_s * args.memories / 60, 1)},
            {"step": f"the HNSW index, once (maintenance_work_mem {args.index_memory})",
             "ms per memory": round(index_s * 1e3 / args.memories, 3), "minutes": round(index_s / 60, 1)}],
            note="one writer")
        got, pg = latency(args, url, items, texts, emb)
        report.table("latency", paired_rows(got["timings"]), note="ms; one process; PostgreSQL on a Unix socket; "
                     "the file holds one user's memories, as many as each user has in PostgreSQL")
        qvecs = emb(texts[: args.probes])
        with psycopg.connect(url, autocommit=True) as conn:
            dim = int(qvecs.shape[1])
            report.table("HNSW across users", hnsw_recall(conn, dim, qvecs, (40, 100, 400)),
                         note=f"recall@10 against the exact top 10 of all {args.memories} memories, "
                              f"{args.probes} queries")
            costs = query_costs(conn, dim, qvecs, args.users, args.rounds)
            size = sizes(conn)
        report.table("database queries", [{"query": k, "p50 ms": v} for k, v in costs.items()],
                     note="each timed alone on one connection, after the calls above")
        mem = memory_rows(url, emb, pg, got["rss_scoped"], args)
        pg.close()
        report.table("process memory", mem, note="resident memory the handle added to the process")
        full_mb = float(mem[1]["resident MB it added"])
        report.table("size", [{"part": k, "MB": round(v / 2**20, 1)} for k, v in size.items()])
        report.table(f"arithmetic to {args.target} memories", arithmetic(args, costs, size, write_s, full_mb))
    finally:
        if srv is not None:
            srv.cleanup()
    print(report.title)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
