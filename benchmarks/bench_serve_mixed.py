"""REST and MCP clients at once on one ``vxmem serve``, each with its user's key.

    .venv/bin/python -m benchmarks.bench_serve_mixed                      # 48 REST + 16 MCP clients, 60 s
    .venv/bin/python -m benchmarks.bench_serve_mixed --rest 8 --mcp 4 --duration 10

A database of ``--memories`` memories spread over ``--users`` users is built, a key made for
each user (``vxmem keys``), and ``vxmem serve`` started on it (a child process). Then ``--rest``
httpx clients (over ``/v1/``) and ``--mcp`` clients of the official MCP SDK (streamable HTTP at
``/mcp``, a session each) run at once for ``--duration`` seconds, each as one user with the
same mix (``--recall-share`` recalls, the rest remembers). Prints throughput and p50/p99 per
transport and verb, and errors; afterwards the database is opened and every acknowledged
remember must be in it exactly once, as its user's (by id, by its unique text and by
``_vx_user``), with nothing else added. The clients share the machine's cores with the server.

A benchmark, not a test: it times things and asserts nothing but the durability check.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO

import httpx
import httpx2
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from benchmarks.bench_server import Record, free_port
from benchmarks.corpora import WORDS, bare_sentence
from benchmarks.harness import Report, flags, percentiles
from vxmem import Vectrix
from vxmem.serve.keyring import KeyRing

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000.0


def build(path: Path, n: int, users: int) -> dict[str, str]:
    """``n`` memories over ``users`` users (stored as the server stores them) and a key each."""
    rng = random.Random(0)
    with Vectrix(path, embedder="hashing") as db:
        for lo in range(0, n, 1000):
            batch = range(lo, min(n, lo + 1000))
            for u in range(users):
                db.remember_many([{"text": bare_sentence(rng), "session": f"s{i % 20}",
                                   "timestamp": T0 + i} for i in batch if i % users == u], user=f"u{u}")
    ring = KeyRing(path)
    try:
        return {f"u{u}": ring.add(f"u{u}")[1] for u in range(users)}
    finally:
        ring.close()


def start(path: Path) -> tuple[subprocess.Popen, str, IO[str]]:
    """``vxmem serve`` on the database (no access log: the load would be the log's), ready."""
    port = free_port()
    log = open(path.with_suffix(".log"), "w")  # noqa: SIM115 - the child writes it while it runs
    proc = subprocess.Popen([sys.executable, "-m", "vxmem", "serve", "--db", str(path), "--port", str(port),
                             "--embedder", "hashing", "--no-access-log"], cwd=ROOT, stderr=log)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {path.with_suffix('.log').read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url, log
        except httpx.TransportError:
            time.sleep(0.1)


class Load:
    """What the clients did, by transport: latencies by verb, errors, acknowledged writes."""

    def __init__(self):
        self.by = {"REST": Record(), "MCP": Record()}
        self.owner: dict[str, str] = {}  # acknowledged id -> its user
        self.sessions_lost = 0  # MCP sessions that failed (and were opened again)


async def client(load: Load, transport: str, user: str, call, stop: float, share: float, seed: int) -> None:
    rec, rng = load.by[transport], random.Random(seed)
    while time.perf_counter() < stop:
        op = "recall" if rng.random() < share else "remember"
        text = " ".join(rng.choice(WORDS) for _ in range(3)) if op == "recall" else bare_sentence(rng, uuid.uuid4().hex)
        t = time.perf_counter()
        try:
            id = await call(op, text)
        except Exception:  # noqa: BLE001 - counted, the load goes on
            rec.errors += 1
            continue
        rec.lat[op].append(time.perf_counter() - t)
        if op == "remember":
            rec.acked[id] = text
            load.owner[id] = user


async def rest_client(load: Load, url: str, user: str, key: str, stop: float, args, seed: int) -> None:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        async def call(op: str, text: str) -> str | None:
            if op == "recall":
                (await c.post("/v1/recall", json={"query": text, "limit": args.limit})).raise_for_status()
                return None
            r = await c.post("/v1/remember", json={"text": text, "session": "s0"})
            r.raise_for_status()
            return r.json()["id"]

        await client(load, "REST", user, call, stop, args.recall_share, seed)


async def mcp_client(load: Load, url: str, user: str, key: str, stop: float, args, seed: int) -> None:
    """One MCP client; a session that fails is counted (``sessions_lost``) and opened again."""
    while time.perf_counter() < stop:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
        try:
            async with McpClient(streamable_http_client(f"{url}/mcp", http_client=http)) as session:
                async def call(op: str, text: str) -> str | None:
                    if op == "recall":
                        got = await session.call_tool("recall", {"query": text, "limit": args.limit})
                    else:
                        got = await session.call_tool("remember", {"text": text, "session": "s0"})
                    if got.is_error:
                        raise RuntimeError(got.content[0].text)
                    return None if op == "recall" else got.structured_content["id"]

                await client(load, "MCP", user, call, stop, args.recall_share, seed)
        except Exception:  # noqa: BLE001 - the SDK's task group raises what its transport met
            load.sessions_lost += 1


async def run(url: str, keys: dict[str, str], args) -> tuple[Load, float]:
    load, users = Load(), sorted(keys)
    stop = time.perf_counter() + args.duration
    tasks = [rest_client(load, url, users[k % len(users)], keys[users[k % len(users)]], stop, args, k)
             for k in range(args.rest)]
    tasks += [mcp_client(load, url, users[k % len(users)], keys[users[k % len(users)]], stop, args, 1000 + k)
              for k in range(args.mcp)]
    start = time.perf_counter()
    await asyncio.gather(*tasks)
    return load, time.perf_counter() - start


def check(path: Path, preloaded: int, load: Load) -> str:
    """Every acknowledged remember once, by id and text, as its user's; nothing else added."""
    acked = {i: t for rec in load.by.values() for i, t in rec.acked.items()}
    with Vectrix(path, embedder="hashing", read_only=True) as db:
        texts = collections.Counter(r.text for r in db.scan())
        stored = {r.id: r for r in db.scan()}
        total = len(db)
    # An id the server answered is as its user named it: stored as is (the server makes it).
    missing = [i for i in acked if i not in stored]
    wrong = [i for i, t in acked.items() if texts[t] != 1 or
             (i in stored and stored[i].metadata.get("_vx_user") != load.owner[i])]
    ok = not missing and not wrong and total == preloaded + len(acked)
    return (f"{len(acked)} acknowledged remembers: {len(missing)} missing, {len(wrong)} not exactly once or not "
            f"their user's; database holds {total} = {preloaded} + {total - preloaded}: {'OK' if ok else 'FAILED'}")


def report(args, load: Load, secs: float, durable: str) -> Report:
    out = Report(f"{args.rest} REST + {args.mcp} MCP clients on one vxmem serve, {args.users} users with keys, "
                 f"{args.memories:,} memories (hashing), {args.duration:g} s, {args.recall_share:.0%} recall")
    rows = []
    for transport, rec in load.by.items():
        for op in ("recall", "remember"):
            got = percentiles(rec.lat.get(op, []), scale=1e3)
            rows.append({"transport": transport, "verb": op, "calls": len(rec.lat.get(op, [])),
                         "per s": f"{len(rec.lat.get(op, [])) / secs:,.0f}", "p50 ms": f"{got['p50']:.1f}",
                         "p99 ms": f"{got['p99']:.1f}", "errors": rec.errors if op == "recall" else ""})
    total = sum(r.ops() for r in load.by.values())
    out.table("load", rows, note=f"{total / secs:,.0f} calls/s in all; MCP sessions lost: {load.sessions_lost}; "
                                 f"durability: {durable}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rest", type=int, default=48, help="REST clients")
    p.add_argument("--mcp", type=int, default=16, help="MCP clients (streamable HTTP)")
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--recall-share", type=float, default=0.7, dest="recall_share")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--dir", help="where the database goes (default: a temporary directory)")
    args = flags(p).parse_args(argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix="vxmem-bench-mixed-"))
    path = work / "served.vxdb"
    print(f"building {args.memories:,} memories of {args.users} users in {work} ...", flush=True)
    keys = build(path, args.memories, args.users)
    proc, url, log = start(path)
    try:
        print(f"{args.rest} REST + {args.mcp} MCP clients for {args.duration:g} s ...", flush=True)
        load, secs = asyncio.run(run(url, keys, args))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    out = report(args, load, secs, check(path, args.memories, load))
    print(f"\n{out.title}\n")
    out.print()
    out.save(args)
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
