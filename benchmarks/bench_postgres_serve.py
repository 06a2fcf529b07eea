"""Many ``vxmem serve`` processes on one PostgreSQL against one server on a database file, under load.

    .venv/bin/python -m benchmarks.bench_postgres_serve                   # 32 clients, 60 s each way
    .venv/bin/python -m benchmarks.bench_postgres_serve --duration 15 --servers 2,4 --url postgresql://...

The same memories (``--memories``, one user, 50 sessions, the hashing embedder) go into a
database file and a PostgreSQL database (pgserver, unless ``--url`` names an empty one). Then,
for ``--duration`` seconds each, ``--clients`` concurrent HTTP clients write and recall
(``--recall-share`` recalls) through one ``vxmem serve`` on the file, and through 2 and then
4 ``vxmem serve`` on PostgreSQL (client k talks to server k mod n). Afterwards each database
is opened and every acknowledged remember must be in it exactly once (by id and by its
unique text), with nothing else added; errors (a refused or failed request) are counted.
Prints throughput and p50/p99 per verb.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_postgres import server
from benchmarks.bench_server import ROOT, USER, Record, build, check_durable, drive, free_port, row
from benchmarks.harness import Report, flags, parse_list


def start(db: str, n: int, embedder: str) -> tuple[list[subprocess.Popen], list[str]]:
    """``n`` ``vxmem serve --db db`` processes, started together; their base URLs once all answer."""
    ports = [free_port() for _ in range(n)]
    procs = [subprocess.Popen([sys.executable, "-m", "vxmem", "serve", "--db", db, "--port", str(p), "--user", USER,
                               "--embedder", embedder], cwd=ROOT, stderr=subprocess.DEVNULL) for p in ports]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    for url, proc in zip(urls, procs):
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"a server on {db} exited ({proc.returncode})")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)  # a poll interval
    return procs, urls


async def load(urls: list[str], args: argparse.Namespace) -> tuple[Record, float]:
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    clients = [httpx.AsyncClient(base_url=u, limits=limits, timeout=120) for u in urls]
    turn = {"k": 0}

    async def call(op: str, text: str, rec: Record) -> None:
        c = clients[turn["k"] % len(clients)]  # the clients take the servers in turn, call by call
        turn["k"] += 1
        if op == "recall":
            (await c.post("/v1/recall", json={"query": text, "limit": args.limit})).raise_for_status()
        else:
            r = await c.post("/v1/remember", json={"text": text, "session": "s0"})
            r.raise_for_status()
            rec.acked[r.json()["id"]] = text

    try:
        return await drive(args.clients, args.duration, args.recall_share, call)
    finally:
        for c in clients:
            await c.aclose()


def run(db: str, n: int, args: argparse.Namespace, preloaded: int) -> tuple[Record, float, str]:
    procs, urls = start(db, n, args.embedder)
    try:
        rec, secs = asyncio.run(load(urls, args))
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    return rec, secs, check_durable(db, preloaded, rec.acked, args.embedder)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load, each way")
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--servers", default="2,4", help="how many servers on PostgreSQL, one run each")
    p.add_argument("--recall-share", type=float, default=0.7, dest="recall_share")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--url", help="an empty PostgreSQL database with pgvector (default: one pgserver starts)")
    args = flags(p).parse_args(argv)
    args.embedder = "hashing"
    work = Path(tempfile.mkdtemp(prefix="vxmem-bench-pg-serve-"))
    url, srv = server(args.url)
    rows: list[dict[str, Any]] = []
    notes = []
    try:
        for where in (str(work / "served.vxdb"), url):
            build(where, args.memories, args.embedder)
        total = {"file": args.memories, "pg": args.memories}
        for name, db, n in [("1 server, database file", str(work / "served.vxdb"), 1),
                            *((f"{k} servers, PostgreSQL", url, k) for k in parse_list(args.servers, int))]:
            key = "file" if n == 1 and db != url else "pg"
            print(f"{name} ...", flush=True)
            rec, secs, durable = run(db, n, args, total[key])
            total[key] += len(rec.acked)
            rows.append(row(name, rec, secs))
            notes.append(f"{name}: {durable}")
    finally:
        if srv is not None:
            srv.cleanup()
    report = Report(f"{args.memories:,} memories (hashing), {args.clients} clients, {args.duration:g} s each, "
                    f"{args.recall_share:.0%} recall / {1 - args.recall_share:.0%} remember")
    report.table("load", rows, note="\n".join(notes))
    print(report.title)
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
