"""The REST server under load: concurrent clients on loopback against the same work in-process.

    .venv/bin/python -m benchmarks.bench_server                        # 32 clients, 60 s, 10k memories, hashing
    .venv/bin/python -m benchmarks.bench_server --clients 8 --duration 15
    .venv/bin/python -m benchmarks.bench_server --embedder default     # bge-small, its default second stage

A database of ``--memories`` memories (one user, 50 sessions) is built once and copied twice:
one copy is loaded in-process through :class:`vxmem.AsyncVectrix` by ``--clients`` concurrent
tasks, the other through ``vxmem serve`` (a child process) by as many concurrent HTTP clients,
each for ``--duration`` seconds with the same mix (``--recall-share`` recalls, the rest
remembers) and the same recall options. Then one client alone times ``--single`` recalls each
way, in turn: in-process, over HTTP with a bare client (the server's own cost per call, without
queueing) and with httpx (a Python client's cost added). Prints throughput, p50/p99 latency and
the REST / in-process ratios; afterwards the server's database is opened and every
acknowledged remember must be in it exactly once (by id and by its unique text), with nothing
else added. The client runs on the same machine as the server and shares its cores.

A benchmark, not a test: it times things and asserts nothing but the durability check.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import http.client
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from benchmarks.corpora import WORDS, bare_sentence
from benchmarks.harness import Report, flags, percentiles
from vxmem import AsyncVectrix, Vectrix

ROOT = Path(__file__).resolve().parent.parent
USER = "bench"
T0 = 1_700_000_000.0


def embedder_arg(name: str) -> str | None:
    return None if name == "default" else name


def build(path: Path, n: int, embedder: str) -> float:
    """``n`` memories of USER in 50 sessions, stored as the server stores them; returns the seconds."""
    rng = random.Random(0)
    start = time.perf_counter()
    with Vectrix(path, embedder=embedder_arg(embedder)) as db:
        for lo in range(0, n, 1000):
            db.remember_many([{"text": bare_sentence(rng), "session": f"{USER}/s{i % 50}", "timestamp": T0 + i * 60}
                              for i in range(lo, min(n, lo + 1000))], user=USER)
        db.warm()
    return time.perf_counter() - start


def copy_db(src: Path, dst: Path) -> None:
    """The database file and everything its close() left beside it, under a new name."""
    for f in src.parent.iterdir():
        if f.name.startswith(src.name):
            shutil.copy2(f, dst.parent / (dst.name + f.name[len(src.name):]))


class Record:
    """Latencies by operation, errors, and the remembers acknowledged (id -> text)."""

    def __init__(self):
        self.lat: dict[str, list[float]] = collections.defaultdict(list)
        self.errors = 0
        self.acked: dict[str, str] = {}

    def ops(self) -> int:
        return sum(len(v) for v in self.lat.values())

    def pct(self, op: str, q: str) -> float:
        return percentiles(self.lat.get(op, []), scale=1e3)[q]


async def drive(clients: int, duration: float, share: float, call) -> tuple[Record, float]:
    """``clients`` tasks calling ``call(op, text, record)`` in a loop for ``duration`` seconds."""
    rec = Record()
    stop = time.perf_counter() + duration

    async def client(k: int) -> None:
        rng = random.Random(k)
        while time.perf_counter() < stop:
            op = "recall" if rng.random() < share else "remember"
            text = " ".join(rng.choice(WORDS) for _ in range(3)) if op == "recall" else \
                bare_sentence(rng, uuid.uuid4().hex)
            t = time.perf_counter()
            try:
                await call(op, text, rec)
            except Exception:  # noqa: BLE001 - counted, the load goes on
                rec.errors += 1
                continue
            rec.lat[op].append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return rec, time.perf_counter() - start


async def in_process(path: Path, args) -> tuple[Record, float]:
    db = Vectrix(path, embedder=embedder_arg(args.embedder))
    db.warm()
    adb = AsyncVectrix.of(db)

    async def call(op: str, text: str, rec: Record) -> None:
        if op == "recall":
            await adb.recall(text, user=USER, limit=args.limit)
        else:
            rec.acked[await adb.remember(text, session=f"{USER}/s0", user=USER)] = text

    loaded = await drive(args.clients, args.duration, args.recall_share, call)
    adb.close()
    db.close()
    return loaded


async def one_client(path: Path, url: str, args) -> dict[str, list[float]]:
    """One client alone, the same recall three ways in turn (so each sees the same machine):
    in-process, over HTTP with a bare client (http.client: the server's own cost) and with httpx."""
    db = Vectrix(path, embedder=embedder_arg(args.embedder))
    db.warm()
    adb = AsyncVectrix.of(db)
    conn = http.client.HTTPConnection(url.removeprefix("http://"))
    lat: dict[str, list[float]] = {"in-process": [], "HTTP, bare client": [], "HTTP, httpx": []}
    rng = random.Random(1)
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:
        for i in range(args.single):
            query = " ".join(rng.choice(WORDS) for _ in range(3))
            body = json.dumps({"query": query, "limit": args.limit})
            t = time.perf_counter()
            await adb.recall(query, user=USER, limit=args.limit)
            t1 = time.perf_counter()
            conn.request("POST", "/v1/recall", body=body, headers={"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            t2 = time.perf_counter()
            (await c.post("/v1/recall", content=body, headers={"Content-Type": "application/json"})).raise_for_status()
            t3 = time.perf_counter()
            if answer.status != 200:
                raise SystemExit(f"recall answered {answer.status}")
            if i >= 20:  # the first ones warm the caches
                for name, secs in zip(lat, (t1 - t, t2 - t1, t3 - t2)):
                    lat[name].append(secs)
    conn.close()
    adb.close()
    db.close()
    return lat


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(path: Path, args) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "vxmem", "serve", "--db", str(path), "--port", str(port), "--user", USER]
    if args.embedder != "default":
        cmd += ["--embedder", args.embedder]
    log = path.with_suffix(".log")
    with open(log, "w") as err:  # the child keeps its own copy of the file
        proc = subprocess.Popen(cmd, cwd=ROOT, stderr=err, text=True)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)


async def over_rest(url: str, args) -> tuple[Record, float]:
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as c:
        async def call(op: str, text: str, rec: Record) -> None:
            if op == "recall":
                r = await c.post("/v1/recall", json={"query": text, "limit": args.limit})
                r.raise_for_status()
            else:
                r = await c.post("/v1/remember", json={"text": text, "session": "s0"})
                r.raise_for_status()
                rec.acked[r.json()["id"]] = text

        return await drive(args.clients, args.duration, args.recall_share, call)


def check_durable(path: Path, preloaded: int, acked: dict[str, str], embedder: str) -> str:
    """Every acknowledged remember in the database once, by id and by text; nothing else added."""
    with Vectrix(path, embedder=embedder_arg(embedder), read_only=True) as db:
        texts = collections.Counter(r.text for r in db.scan())
        missing = [i for i in acked if i not in db]
        wrong = [i for i, t in acked.items() if texts[t] != 1]
        total = len(db)
    ok = not missing and not wrong and total == preloaded + len(acked)
    return (f"{len(acked)} acknowledged remembers: {len(missing)} missing, {len(wrong)} not exactly once; "
            f"database holds {total} = {preloaded} + {total - preloaded}: {'OK' if ok else 'FAILED'}")


def row(name: str, rec: Record, secs: float) -> dict:
    return {"path": name, "ops/s": f"{rec.ops() / secs:,.0f}", "recall p50 ms": f"{rec.pct('recall', 'p50'):.2f}",
            "recall p99 ms": f"{rec.pct('recall', 'p99'):.2f}", "remember p50 ms": f"{rec.pct('remember', 'p50'):.2f}",
            "remember p99 ms": f"{rec.pct('remember', 'p99'):.2f}", "errors": rec.errors}


def report(args, inproc, rest, single: dict[str, list[float]], durable: str) -> Report:
    (ip, ip_s), (rs, rs_s) = inproc, rest
    out = Report(f"{args.memories:,} memories ({args.embedder}), {args.clients} clients, {args.duration:g} s, "
                 f"{args.recall_share:.0%} recall / {1 - args.recall_share:.0%} remember, limit {args.limit}")

    def ratio(op: str, q: str) -> str:
        return f"{rs.pct(op, q) / ip.pct(op, q):.2f}x"

    out.table("load", [row("in-process (AsyncVectrix)", ip, ip_s), row("REST (vxmem serve, httpx clients)", rs, rs_s),
                       {"path": "REST / in-process", "ops/s": f"{rs.ops() / rs_s / (ip.ops() / ip_s):.2f}x",
                        "recall p50 ms": ratio("recall", "p50"), "recall p99 ms": ratio("recall", "p99"),
                        "remember p50 ms": ratio("remember", "p50"), "remember p99 ms": ratio("remember", "p99"),
                        "errors": ""}])
    base = percentiles(single["in-process"], scale=1e3)["p50"]
    rows = []
    for name, lat in single.items():
        got = percentiles(lat, scale=1e3)
        rows.append({"recall": name, "p50 ms": f"{got['p50']:.2f}", "p99 ms": f"{got['p99']:.2f}",
                     "added p50 ms": f"{got['p50'] - base:+.2f}"})
    out.table("one client", rows, note=f"one client alone, {len(single['in-process'])} recalls each way, in turn; "
                                      f"durability: {durable}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load, each way")
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--embedder", choices=("hashing", "default"), default="hashing")
    p.add_argument("--recall-share", type=float, default=0.7, dest="recall_share")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--single", type=int, default=500, help="recalls of one client alone, each way")
    p.add_argument("--dir", help="where the databases go (default: a temporary directory)")
    args = flags(p).parse_args(argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix="vxmem-bench-server-"))
    base, mine, served = work / "base.vxdb", work / "inproc.vxdb", work / "served.vxdb"
    print(f"building {args.memories:,} memories ({args.embedder}) in {work} ...", flush=True)
    print(f"built in {build(base, args.memories, args.embedder):.1f} s", flush=True)
    copy_db(base, mine)
    copy_db(base, served)
    print("in-process ...", flush=True)
    inproc = asyncio.run(in_process(mine, args))
    print("REST ...", flush=True)
    proc, url = start_server(served, args)
    try:
        rest = asyncio.run(over_rest(url, args))
        print("one client ...", flush=True)
        single = asyncio.run(one_client(mine, url, args))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    out = report(args, inproc, rest, single, check_durable(served, args.memories, rest[0].acked, args.embedder))
    print(f"\n{out.title}\n")
    out.print()
    out.save(args)
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
