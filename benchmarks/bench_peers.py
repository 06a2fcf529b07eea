"""vxmem against its peers: write, recall, memory and disk, measured side by side in one run.

    make bench-peers                                            # makes .venv-peers, then runs this at 1k/10k/100k
    .venv-peers/bin/python -m benchmarks.bench_peers --sizes 1000,10000
    .venv-peers/bin/python -m benchmarks.bench_peers --sizes 100000 --systems vxmem,usearch,chroma --queries 300

Systems (``--systems``, default all):

- ``vxmem``      ``Vectrix(path, embedder=E, recency_weight=0, feedback_weight=0)``; memories written with
                 ``db.remember(text, session=, timestamp=, id=)``; recall with ``db.recall(q, session=, limit=10,
                 now=, mode="dense")``, ranked by cosine as the peers rank; search with
                 ``db.search(q, limit=10[, filter={"_vx_session": s}])``.
- ``vxmem-hybrid``  the same, recalling in the library's default mode (hybrid: BM25 over the words fused
                 with the cosine), so its recall@10 against the exact cosine top 10 is not the point: its
                 latency is what the default costs.
- ``vxmem-f16``  ``vxmem`` with ``vector_dtype="float16"``: the vectors it searches held at half the memory.
- ``floor``      the raw floor: a numpy float32 matrix + an SQLite table in WAL mode (synchronous=NORMAL, as
                 vxmem), one INSERT + COMMIT per row; exact numpy search (the session's rows, or all).
- ``usearch``    the usearch floor: a usearch ``Index`` over the same vectors with vxmem's settings (ip, i8,
                 connectivity 16, expansion_add 48, expansion_search 384), searched directly for the top 10
                 (vxmem re-scores the graph's top 20 against float32 vectors; this floor does not).
                 It has no metadata filter and no durable per-row write, so only the cross-session rows apply.
- ``vectrixdb``  vectrixdb 2.2.0 ``Vectrix(name, path, embed_fn=E, dimension=384)`` and its memory:
                 ``remember()`` / ``recall()`` (recency_weight and feedback_weight set to 0) / ``search()``.
- ``chroma``     chromadb 1.5.9 ``PersistentClient``, cosine HNSW at its defaults (M 16, ef 100), embeddings
                 passed in, ``where={"session": s}`` for a session.
- ``lancedb``    lancedb 0.40 table, cosine distance, ``.where("session = ...", prefilter=True)``; no vector
                 index is created (LanceDB's default: an exact flat scan).
- ``langchain``  LangChain's ``TimeWeightedVectorStoreRetriever`` (langchain-classic) over FAISS
                 (langchain-community, exact ``IndexFlatL2`` on unit vectors), ``decay_rate=0``, ``k=10``,
                 ``search_kwargs={"k": 40}`` (plus ``filter`` and ``fetch_k=4000`` for a session: FAISS filters
                 after the search). Durable = ``add_documents()`` + ``save_local()``, which rewrites the store.

Every system gets the same texts, sessions, timestamps and vectors. The embedder is cheap and deterministic so
that embedding is not what is measured: each word of the 107-word vocabulary of ``benchmarks.corpora`` (the
one bench_memory uses; figures before it were measured on a 132-word copy) has a fixed random 384-d vector
(seeded by its crc32), a text is the sum of its words' vectors plus a small random part seeded by the crc32 of
the whole text, L2-normalised (``--embedder random``: the random part alone). Every corpus and query vector is
computed once, up front; each system is handed either the vectors or a callable that looks them up
(``embed_fn`` / ``embedder`` / a LangChain ``Embeddings``), and the look-up is inside every timed call.
No system downloads a model.

Each (system, size) runs in child processes of its own, so its peak RSS is its own, and no child imports
both usearch and onnxruntime (the chroma and lancedb children never import vxmem or usearch):

1. ``build``: create the database in a temporary directory on disk and load the N memories by the system's
   fastest durable bulk path (vxmem: ``remember()`` per memory, its only memory-write API; the floor: INSERT +
   COMMIT per row; the peers: their batch add); close.
2. ``serve``: open it (timed), build the ANN index where the system has one to build (vxmem:
   ``db.build_index()``, timed on its own; above ``exact_threshold=20000`` selected rows vxmem's cross-session
   search goes through it), 10 warm-up queries of each kind, then ``--queries`` queries of each kind,
   interleaved query by query; peak RSS (``VmHWM``) of this process; close. Disk bytes are counted after it.
3. ``write``: open, then ``remember()`` per call, durable (committed / saved) on return, up to
   ``--remember-calls`` calls or ``--remember-seconds``, whichever comes first.

The phases run system after system (build all, serve all, write all), with ``--rounds`` > 1 repeating serve and
write with the system order rotated and reporting the median of the rounds, so that systems are interleaved
in time.

recall@10 is the share of the 10 returned ids whose exact cosine to the query (numpy brute force) is at least
the 10th best exact cosine among the memories searched (the session's, or all), so ties cannot count against
a system. vxmem and vectrixdb recall with recency_weight=0 and feedback_weight=0, so their recall ranks by
cosine alone; LangChain with decay_rate=0. Latencies are the median (p50) and p99 of the timed calls.
Ratios are peer / vxmem (above 1: vxmem is faster or smaller).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

from benchmarks.corpora import SESSIONS, Lookup, WordsEmbedder, short_sentence
from benchmarks.harness import Report, Timer, child_env, flags, module_command, peak_rss_mb, percentiles, rss_mb
from benchmarks.peers_report import goals, report
from benchmarks.peers_systems import ADAPTERS, OPS

WARMUP = 10
SYSTEMS = ("vxmem", "vxmem-hybrid", "vxmem-f16", "floor", "usearch", "vectrixdb", "chroma", "lancedb", "langchain")
# What each child must be able to import (checked without importing it).
REQUIRES = {
    "vxmem": ("vxmem", "usearch"), "vxmem-hybrid": ("vxmem", "usearch"), "vxmem-f16": ("vxmem", "usearch", "numkong"),
    "floor": (), "usearch": ("usearch",),
    "vectrixdb": ("vectrixdb",),
    "chroma": ("chromadb",), "lancedb": ("lancedb", "pyarrow"),
    "langchain": ("langchain_classic", "langchain_community", "faiss"),
}
PINS = {"vectrixdb": "vectrixdb", "chroma": "chromadb", "lancedb": "lancedb", "langchain": "langchain-community",
        "usearch": "usearch", "vxmem": "vxmem", "vxmem-hybrid": "vxmem",
        "vxmem-f16": "vxmem"}


# ---------------------------------------------------------------------------- data

def make_data(n: int, queries: int, extra: int, kind: str, out: str) -> None:
    """Write the corpus, the queries, the remember() texts and the exact answers to ``out``."""
    rng = random.Random(14)
    texts = [short_sentence(rng) for _ in range(n)]
    qrng = random.Random(1414)
    q_texts = [short_sentence(qrng) for _ in range(WARMUP + queries)]
    q_sessions = [f"s{qrng.randrange(SESSIONS)}" for _ in q_texts]
    wrng = random.Random(141414)
    w_texts = [short_sentence(wrng) for _ in range(extra)]
    emb = WordsEmbedder(kind)
    vecs = np.concatenate([emb(texts[i:i + 5000]) for i in range(0, n, 5000)])
    q_vecs, w_vecs = emb(q_texts), emb(w_texts)
    sessions = np.arange(n) % SESSIONS
    # Exact answers: every id whose cosine reaches the 10th best (the session's rows, or all rows).
    sims = q_vecs @ vecs.T
    cross, in_session = [], []
    for j in range(len(q_texts)):
        s = sims[j]
        thr = np.partition(s, -10)[-10] - 1e-5
        cross.append(np.flatnonzero(s >= thr).tolist())
        rows = np.flatnonzero(sessions == int(q_sessions[j][1:]))
        ss = s[rows]
        thr = np.partition(ss, -10)[-10] - 1e-5 if rows.size > 10 else -np.inf
        in_session.append(rows[ss >= thr].tolist())
    np.save(os.path.join(out, "vecs.npy"), vecs)
    np.save(os.path.join(out, "q_vecs.npy"), q_vecs)
    np.save(os.path.join(out, "w_vecs.npy"), w_vecs)
    # One file per phase, so a child parses only what it needs (its peak RSS is the system's, not ours).
    for name, obj in (("corpus", {"n": n, "texts": texts}), ("writes", {"n": n, "texts": w_texts}),
                      ("queries", {"n": n, "texts": q_texts, "sessions": q_sessions, "truth_cross": cross,
                                   "truth_session": in_session})):
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(obj, f)




def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total



# ---------------------------------------------------------------------------- child phases

def _load(work: str, name: str) -> dict:
    with open(os.path.join(work, f"{name}.json")) as f:
        return json.load(f)


def imports(system: str, out: dict) -> None:
    """The system's modules, after the harness's data is loaded: import time is not open or build time."""
    out["harness_rss_mb"] = rss_mb()
    for mod in ADAPTERS[system].imports:
        importlib.import_module(mod)
    out["imported_rss_mb"] = rss_mb()


def child(spec: dict) -> dict:
    work, system, phase = spec["work"], spec["system"], spec["phase"]
    sysdir = os.path.join(work, system)
    os.makedirs(sysdir, exist_ok=True)
    out: dict = {"system": system, "phase": phase}
    phases = {"build": build_phase, "serve": serve_phase, "write": write_phase}
    if phase not in phases:
        raise ValueError(f"unknown phase {phase!r}")
    return phases[phase](spec, sysdir, out)


def build_phase(spec: dict, sysdir: str, out: dict) -> dict:
    """Load the corpus by the system's fastest durable bulk path, and build its index."""
    work, system = spec["work"], spec["system"]
    corpus = _load(work, "corpus")
    n, texts = corpus["n"], corpus["texts"]
    vecs = np.load(os.path.join(work, "vecs.npy"))
    imports(system, out)
    adapter = ADAPTERS[system](sysdir, Lookup(texts, vecs))
    with Timer() as t:
        adapter.build(n, texts, vecs)
    out["build_s"] = t.wall
    if hasattr(adapter, "build_index"):
        with Timer() as t:
            adapter.build_index()
        out["index_s"] = t.wall
    out["build_peak_rss_mb"] = peak_rss_mb()
    return out


def serve_phase(spec: dict, sysdir: str, out: dict) -> dict:
    """Open, the index, then every query of each kind, interleaved query by query."""
    work, system = spec["work"], spec["system"]
    qs = _load(work, "queries")
    q_texts, q_sessions = qs["texts"], qs["sessions"]
    truth = {"session": qs["truth_session"], "cross": qs["truth_cross"]}
    q_vecs = np.load(os.path.join(work, "q_vecs.npy"))
    imports(system, out)
    adapter = ADAPTERS[system](sysdir, Lookup(q_texts, q_vecs, WordsEmbedder(spec["embedder"])))
    with Timer() as t:
        adapter.open()
    out["open_s"] = t.wall
    with Timer() as t:
        adapter.index()
    if hasattr(adapter, "build_index"):
        out["index_load_s"] = t.wall
    ops = [op for op in OPS if getattr(adapter, op) is not None]
    lat: dict[str, list[float]] = {op: [] for op in ops}
    hits: dict[str, list[float]] = {op: [] for op in ops}
    for j, (q, s) in enumerate(zip(q_texts, q_sessions)):
        for op in ops:  # interleaved query by query
            fn = getattr(adapter, op)
            with Timer() as t:
                ids = fn(q, s)
            dt = t.wall
            if j == 0:
                out[f"first_{op}_ms"] = dt * 1000
            if j < WARMUP:
                continue
            lat[op].append(dt)
            good = set(truth["session" if op.startswith("session") else "cross"][j])
            hits[op].append(sum(int(i) in good for i in ids[:10]) / 10)
    for op in ops:
        got = percentiles(lat[op], scale=1e3)
        out[op] = {"p50_ms": got["p50"], "p99_ms": got["p99"], "recall10": float(np.mean(hits[op])), "n": got["n"]}
    out["peak_rss_mb"] = peak_rss_mb()
    out["rss_after_mb"] = rss_mb()
    with Timer() as t:
        adapter.close()
    out["close_s"] = t.wall
    return out


def write_phase(spec: dict, sysdir: str, out: dict) -> dict:
    """remember() per call, durable on return, up to --remember-calls or --remember-seconds."""
    work, system = spec["work"], spec["system"]
    if getattr(ADAPTERS[system], "remember", None) is None:
        return out
    writes = _load(work, "writes")
    n, w_texts = writes["n"], writes["texts"][: spec["remember_calls"]]
    w_vecs = np.load(os.path.join(work, "w_vecs.npy"))
    imports(system, out)
    adapter = ADAPTERS[system](sysdir, Lookup(w_texts, w_vecs, WordsEmbedder(spec["embedder"])))
    adapter.open()
    adapter.index()  # vxmem: the saved HNSW index is loaded, so new memories go through its pending buffer
    base = n + spec["round"] * len(w_texts)
    lat_w: list[float] = []
    stop = time.perf_counter() + spec["remember_seconds"]
    for k, text in enumerate(w_texts):
        with Timer() as t:
            adapter.remember(base + k, text, n)
        lat_w.append(t.wall)
        if time.perf_counter() > stop and k >= 20:
            break
    got = percentiles(lat_w, scale=1e3)
    out["remember"] = {"p50_ms": got["p50"], "p99_ms": got["p99"], "mean_ms": got["mean"], "n": got["n"]}
    adapter.close()
    return out


def child_main(raw: str) -> None:
    spec = json.loads(raw)
    try:
        out = child(spec)
    except Exception as exc:  # noqa: BLE001 - reported in the table, never hidden
        out = {"system": spec["system"], "phase": spec["phase"], "error": f"{type(exc).__name__}: {exc}"}
        traceback.print_exc()
    print("RESULT " + json.dumps(out), flush=True)


# ---------------------------------------------------------------------------- parent

def missing_modules(system: str) -> list[str]:
    return [m for m in REQUIRES[system] if importlib.util.find_spec(m) is None]


def version_of(system: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    if system == "floor":
        import sqlite3

        return f"numpy {np.__version__}, sqlite {sqlite3.sqlite_version}"
    names = {"langchain": ("langchain-classic", "langchain-community", "faiss-cpu")}.get(system, (PINS[system],))
    try:
        return ", ".join(f"{nm} {version(nm)}" for nm in names)
    except PackageNotFoundError:
        return "?"


def run_child(spec: dict, timeout: float) -> dict:
    cmd = module_command(__spec__.name if __spec__ else "benchmarks.bench_peers", "--child", json.dumps(spec))
    env = child_env() | {"RUST_LOG": "error", "LANCE_LOG": "error", "ANONYMIZED_TELEMETRY": "False",
                         "TOKENIZERS_PARALLELISM": "false"}
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=spec["work"])
    except subprocess.TimeoutExpired:
        return {"system": spec["system"], "phase": spec["phase"], "error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("RESULT "):
            out = json.loads(line[7:])
            out["wall_s"] = wall
            if "error" in out:
                sys.stderr.write(p.stderr[-3000:])
            return out
    tail = (p.stderr or "").strip().splitlines()[-5:]
    return {"system": spec["system"], "phase": spec["phase"],
            "error": f"child exited {p.returncode} without a result: {' | '.join(tail)[-400:]}"}


def run_size(n: int, systems: list[str], args, tmp_root: str) -> dict:
    if tmp_root:
        os.makedirs(tmp_root, exist_ok=True)  # --tmp /somewhere/new
    work = tempfile.mkdtemp(prefix=f"peers{n}_", dir=tmp_root)
    t = time.perf_counter()
    make_data(n, args.queries, args.remember_calls, args.embedder, work)
    log(f"[{n:,}] data made in {time.perf_counter() - t:.1f} s ({work})")
    res: dict = {s: {"build": None, "serve": [], "write": [], "disk": None} for s in systems}
    base = {"work": work, "remember_calls": args.remember_calls, "remember_seconds": args.remember_seconds,
            "embedder": args.embedder}
    for s in systems:
        out = run_child(dict(base, system=s, phase="build", round=0), args.timeout)
        res[s]["build"] = out
        log(f"[{n:,}] {s}: build "
            + (out.get("error") or f"{out['build_s']:.1f} s, index {out.get('index_s', 0):.1f} s"))
        if "error" in out:
            res[s]["failed"] = out["error"]
    for rnd in range(args.rounds):
        order = systems[rnd % len(systems):] + systems[: rnd % len(systems)]
        for s in order:
            if res[s].get("failed"):
                continue
            out = run_child(dict(base, system=s, phase="serve", round=rnd), args.timeout)
            res[s]["serve"].append(out)
            if "error" in out:
                res[s]["failed"] = out["error"]
                log(f"[{n:,}] {s}: serve {out['error']}")
                continue
            if res[s]["disk"] is None:
                res[s]["disk"] = dir_bytes(os.path.join(work, s))
            log(f"[{n:,}] {s}: serve open {out['open_s']:.2f} s, index load {out.get('index_load_s', 0):.2f} s, "
                f"cross {out.get('cross_recall', {}).get('p50_ms', float('nan')):.2f} ms, "
                f"peak RSS {out['peak_rss_mb']:.0f} MB ({out['wall_s']:.0f} s)")
    for rnd in range(args.rounds):
        order = systems[rnd % len(systems):] + systems[: rnd % len(systems)]
        for s in order:
            if res[s].get("failed") or s == "usearch":
                continue
            out = run_child(dict(base, system=s, phase="write", round=rnd), args.timeout)
            res[s]["write"].append(out)
            if "error" in out:
                res[s]["failed"] = out["error"]
                log(f"[{n:,}] {s}: write {out['error']}")
            elif "remember" in out:
                log(f"[{n:,}] {s}: remember p50 {out['remember']['p50_ms']:.2f} ms over {out['remember']['n']} calls")
    res["_elapsed_s"] = time.perf_counter() - t
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return res


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from {','.join(SYSTEMS)}")
    ap.add_argument("--queries", type=int, default=200, help="timed queries of each kind (after 10 warm-up ones)")
    ap.add_argument("--remember-calls", type=int, default=2000, help="remember() calls timed at most")
    ap.add_argument("--remember-seconds", type=float, default=20.0, help="time budget of the remember() sample")
    ap.add_argument("--embedder", choices=("words", "random"), default="words")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds a child may take")
    ap.add_argument("--tmp", default=None, help="where the databases go (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the databases")
    return flags(ap, rounds=1, rounds_help="serve and write phases repeated, system order rotated")


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    if any(s < 20 for s in sizes):
        ap.error("--sizes must each be at least 20")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        ap.error(f"unknown system(s) {unknown}; choose from {SYSTEMS}")
    if args.queries < 1 or args.remember_calls < 1 or args.rounds < 1:
        ap.error("--queries, --remember-calls and --rounds must be at least 1")
    skipped = {s: missing_modules(s) for s in systems}
    skipped = {s: m for s, m in skipped.items() if m}
    runnable = [s for s in systems if s not in skipped]
    print(f"bench_peers: sizes {sizes}, {SESSIONS} sessions, {args.queries} queries, embedder {args.embedder}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
    for s in systems:
        print(f"  {s}: " + (f"NOT RUN: cannot import {', '.join(skipped[s])} (install the peers with "
                            "`make bench-peers`)" if s in skipped else version_of(s)))
    out = Report(f"vxmem against its peers at sizes {sizes}")
    for n in sizes:
        res = run_size(n, runnable, args, args.tmp)
        table = report(n, res, runnable, args)
        out.table(f"{n:,} memories", table["rows"], note=table["note"])
        print(table["text"])
        print(goals(n, res, runnable), flush=True)
    out.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
