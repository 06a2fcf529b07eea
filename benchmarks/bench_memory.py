"""Speed of the memory layer: remember, recall (in a session, across sessions), context.

    python benchmarks/bench_memory.py                      # 1k, 10k, 100k; both embedders
    python benchmarks/bench_memory.py --sizes 1000,10000 --quick

Each (embedder, size) runs in its own child process, so its peak RSS is its own. A run:

1. builds a database file (in a temporary directory) of N memories over 50 sessions:
   ``remember()`` in a loop (turns, ~10% facts, 2 pinned facts per session, roles
   alternating, timestamps spread over 90 days), with ``feedback()`` on 2% of them and a
   ``corrected`` feedback with correction text on 0.2%. The texts are embedded up front
   in chunks of 2,000 by the same embedder (one batch call per chunk), so the build
   times the memory layer and not 100k single-text embedder calls;
2. closes it and reopens it in the same process (the close saves the mirror file beside
   the database, so the reopen reads that file and no rows; see ``vxmem/store/mirror/file.py``);
3. times, on the reopened file, each operation below with the real embedder.

Three embedders: ``default`` (bge-small-en-v1.5 on onnxruntime, what ``Vectrix()`` uses; its
recall also runs the cross-encoder rerank, and two more rows time recall with
``rerank=False``), ``hashing`` (``vxmem.models.embed.HashingEmbedder``) and ``trivial`` (a table
lookup: crc32 of the text picks two of 4,096 fixed random unit vectors; ~5 us a call), so
the ``trivial`` rows time the memory layer itself. Recall runs the default mode, hybrid
(``--mode dense`` gives the mode the memory layer's targets were set for). Those
targets apply to the ``trivial`` rows on a database file; the other rows show
what a user of that embedder sees, and print no target. The ``default`` rows time at most
``--default-reps`` calls each (a reranked recall takes a few hundred ms).

Every memory belongs to its session's user (``remember(user=...)``) and carries a
``{"topic": ...}`` of five values, so the scopes table can time, side by side in one
interleaved loop, session recall at the present, as of a moment mid-history (a different
one each call, between a quarter and three quarters of the history; the as-of checks run),
with ``filter=`` on the topic, with ``user=``, a user's recall across every session, ranked
from the access log (``recency_from="accessed"`` per call: reads it) and by a memory that
ages from access (reads it and records its results); its ratios are to the first row.

Cross-session recall selects every live memory; above ``Vectrix(exact_threshold=20000)``
selected rows it goes through the usearch HNSW index, which is built lazily on the first
such call. That first call is timed on its own ("first cross-session recall, builds
index") and left out of the latency figures.

Issue 14's rows (``--scale N``): a database of N memories written once into
``--scale-dir`` (default /tmp/vxmem-bench-scale) with bench_peers' seeded 384-d "words"
embedder (vectors precomputed, handed over by a dict look-up); then a child process per
code tree (``--trees before=/work/main,after=.``: each child imports vxmem from that tree,
so old and new code are measured in one run, one after the other, ``--rounds`` times),
each on a fresh copy of the database:

- the index build, once per graph settings (in the foreground, every core, by the first
  tree of those settings), kept in ``graph-<hash of the settings>/`` of the data: every tree
  of the same settings loads that same graph (the graph moved to 8 bits, so trees
  before and after it each load their own);
- open, the first session recall and the first cross-session recall after open (the copy is
  opened, asked one recall and closed once before, in a process of its own, timed apart: a
  tree with a newer schema upgrades the file there, and a tree that saves files beside the
  database at close saves them there, so "open s" is an everyday open after a session);
- cross-session ``search(limit=10)`` and ``recall()``: p50/p99, and recall@10 against the
  exact top 10 (numpy over every live row; a returned id counts when its exact cosine
  reaches the 10th best), beside usearch searched directly on the tree's graph (top 10, at
  expansion_search 128, vxmem's earlier setting, and at the tree's own), with the ratio;
- ``remember()`` with the index live: p50/p99/p99.9 over ``--scale-reps`` calls (crossing the
  1,024-row flush and the WAL checkpoints several times);
- reuse: reopen, one ``remember()``, then the first cross-session recall: whether the saved
  index was reused (load + the new row) or a rebuild started (not waited for).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

SESSIONS = 50
DAY = 86400.0
T0 = 1_700_000_000.0
SPAN = 90 * DAY
BATCH = 100  # documents per add() call in the batch row
CHUNK = 2000  # texts embedded per batch call during the build
TOPICS = ("billing", "travel", "health", "work", "home")

# Issue 2, section 5 (trivial embedder, database file), and the reference figures it quotes.
TARGET_REMEMBER = 0.25
TARGET_SESSION_RECALL_1K = 0.3
TARGET_CROSS_RECALL_100K = 5.0
REFERENCE_1K = {"remember": 5.2, "session_recall": 6.4, "context": 14.3}

WORDS = (
    "dark light mode theme editor python rust meeting monday tuesday friday coffee tea flight "
    "berlin paris london tokyo hotel train invoice budget report deadline project alpha beta "
    "gamma release bug crash fix test deploy server database index query cache memory latency "
    "sister brother mother birthday gift cake recipe pasta pizza salad vegan allergy peanut "
    "doctor appointment dentist gym running swimming yoga marathon book novel author film "
    "music guitar piano concert ticket garden tomato rose dog cat vet walk weekend holiday "
    "beach mountain ski snow rain umbrella car bike bus commute office remote laptop phone "
    "password account email calendar reminder note idea plan goal habit sleep morning evening"
).split()
OPENERS = ("I prefer", "Remind me about", "We talked about", "Note that", "My", "Please remember the",
           "Yesterday I mentioned", "The plan for", "Don't forget", "I really like")


# ---------------------------------------------------------------------------- embedders

class TrivialEmbedder:
    """crc32(text) picks two rows of a fixed table of random unit vectors: no model cost."""

    def __init__(self, dim: int = 384, rows: int = 4096, seed: int = 7):
        t = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
        self.table = t / np.linalg.norm(t, axis=1, keepdims=True)
        self.rows = rows

    def __call__(self, texts):
        idx = np.fromiter((zlib.crc32(t.encode()) for t in texts), dtype=np.uint64, count=len(texts))
        return self.table[idx % self.rows] + self.table[(idx >> np.uint64(12)) % self.rows]


class ChunkEmbedder:
    """Serves vectors embedded ahead in one batch; falls back to the real embedder."""

    def __init__(self, base):
        self.base = base
        self.ready: dict[str, np.ndarray] = {}

    def prepare(self, texts):
        uniq = list(dict.fromkeys(texts))
        self.ready = dict(zip(uniq, np.asarray(self.base(uniq), dtype=np.float32)))

    def __call__(self, texts):
        try:
            return np.stack([self.ready[t] for t in texts])
        except KeyError:
            return self.base(texts)


def make_embedder(name: str):
    if name == "trivial":
        return TrivialEmbedder()
    if name == "hashing":
        from vxmem.models.embed import HashingEmbedder

        return HashingEmbedder()
    if name == "default":
        from vxmem.models.embed import get_embedder

        return get_embedder("bge-small")
    raise SystemExit(f"unknown embedder {name!r}; expected default, trivial or hashing")


# ---------------------------------------------------------------------------- workload

def sentence(rng: np.random.Generator) -> str:
    n = int(rng.integers(8, 20))
    words = rng.choice(len(WORDS), size=n)
    return f"{OPENERS[int(rng.integers(len(OPENERS)))]} " + " ".join(WORDS[w] for w in words) + "."


def query(rng: np.random.Generator) -> str:
    words = rng.choice(len(WORDS), size=int(rng.integers(3, 7)))
    return "what about " + " ".join(WORDS[w] for w in words) + "?"


def stats(samples_s: list[float]) -> tuple[float, float]:
    ms = np.asarray(samples_s) * 1e3
    return float(np.median(ms)), float(np.percentile(ms, 95))


def timed(fn, reps: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds (of this thread) of each call."""
    wall, cpu = [], []
    for i in range(reps):
        c = time.thread_time()
        t = time.perf_counter()
        fn(i)
        wall.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    return wall, cpu


def interleaved(fns: dict, reps: int) -> dict:
    """``timed`` for several calls at once, taking turns call by call, so a machine others
    share slows each of them alike and their ratios stay fair."""
    out = {name: ([], []) for name in fns}
    for i in range(reps):
        for name, fn in fns.items():
            c = time.thread_time()
            t = time.perf_counter()
            fn(i)
            out[name][0].append(time.perf_counter() - t)
            out[name][1].append(time.thread_time() - c)
    return out


def rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(size: int, embedder_name: str, reps: int, tmp: str, mode: str | None = None) -> dict:
    from vxmem import ConversationMemory, Vectrix

    path = os.path.join(tmp, f"bench_{embedder_name}_{size}.vxdb")
    rng = np.random.default_rng(size)
    base = make_embedder(embedder_name)
    out: dict = {"size": size, "embedder": embedder_name, "rows": [], "info": {}}
    info = out["info"]

    # ---- build: remember() in a loop, vectors embedded ahead per chunk
    chunk_emb = ChunkEmbedder(base)
    t_build = time.perf_counter()
    db = Vectrix(path, embedder=chunk_emb)
    step = SPAN / size
    n_done = 0
    for s in range(SESSIONS):  # 2 pinned facts per session, dated at the start
        for k in range(2):
            db.remember(f"Pinned for user {s}: {sentence(rng)}", session=f"user{s}", pinned=True,
                        timestamp=T0 + k, user=f"u{s}", metadata={"topic": TOPICS[k]})
            n_done += 1
    while n_done < size:
        m = min(CHUNK, size - n_done)
        texts = [sentence(rng) for _ in range(m)]
        chunk_emb.prepare(texts)
        kinds = rng.random(m)
        ids = []
        for j, text in enumerate(texts):
            i = n_done + j
            ts = T0 + i * step
            sess, scope = f"user{i % SESSIONS}", {"user": f"u{i % SESSIONS}", "metadata": {"topic": TOPICS[i % 5]}}
            if kinds[j] < 0.10:
                ids.append(db.remember(text, session=sess, kind="fact", timestamp=ts, **scope))
            else:
                ids.append(db.remember(text, session=sess, role=("user", "assistant")[i % 2], timestamp=ts,
                                       **scope))
        for j in range(0, m, 50):  # 2% get feedback a little later
            db.feedback(ids[j], ("useful", "dead_end")[(j // 50) % 2], timestamp=T0 + (n_done + j) * step + 3600)
        for j in range(25, m, 500):  # 0.2% are corrected (a superseding fact is stored)
            corr = "Correction: " + sentence(rng)
            chunk_emb.ready[corr] = base([corr])[0]
            db.feedback(ids[j], "corrected", correction=corr, timestamp=T0 + (n_done + j) * step + 7200)
        n_done += m
    n_total = db.count()
    db.close()
    info["build_s"] = time.perf_counter() - t_build
    info["docs"] = n_total
    del chunk_emb

    # ---- reopen with the real embedder
    t = time.perf_counter()
    db = Vectrix(path, embedder=base)
    info["open_s"] = time.perf_counter() - t
    info["rss_after_open_mb"] = rss_now_mb()
    now = T0 + SPAN + 3600.0

    def row(op: str, samples: tuple[list[float], list[float]], target: float | None = None,
            ref: float | None = None, per: int = 1) -> None:
        wall, cpu = samples
        p50, p95 = stats([s / per for s in wall])
        cpu50, _ = stats([s / per for s in cpu])
        out["rows"].append({"op": op, "p50": p50, "p95": p95, "cpu50": cpu50, "target": target, "ref": ref,
                            "n": len(wall)})

    trivial = embedder_name == "trivial"
    ref = (lambda k: REFERENCE_1K[k] if trivial and size == 1000 else None)

    # remember() one by one: new turns, round-robin over the sessions, after the build's last memory
    texts = [sentence(rng) for _ in range(reps)]
    clock = [now]

    def remember_one(i):
        clock[0] += 1.0
        db.remember(texts[i], session=f"user{i % SESSIONS}", timestamp=clock[0])

    row("remember(), one call per memory", timed(remember_one, reps), TARGET_REMEMBER if trivial else None,
        ref("remember"))

    # "batch": there is no batch remember API; add() of BATCH fact-shaped documents in one call
    n_batches = max(5, reps // BATCH)
    batches = [[sentence(rng) for _ in range(BATCH)] for _ in range(n_batches)]

    def add_batch(i):
        clock[0] += 1.0
        metas = [{"_vx_kind": "fact", "_vx_session": f"user{(i * BATCH + j) % SESSIONS}", "_vx_role": "user",
                  "_vx_ts": clock[0]} for j in range(BATCH)]
        db.add(batches[i], metadata=metas)

    row(f"add() of {BATCH} memory-shaped docs in 1 call, per doc (no batch remember API)",
        timed(add_batch, n_batches), per=BATCH)

    qs = [query(rng) for _ in range(reps)]
    now = clock[0] + 60.0
    session_samples = timed(lambda i: db.recall(qs[i], session=f"user{i % SESSIONS}", now=now, mode=mode), reps)
    row("recall(session=...), limit 10", session_samples, TARGET_SESSION_RECALL_1K if trivial else None,
        ref("session_recall"))
    reranking = db.memory.pipeline()["rerank"] is not None
    if reranking:
        row("recall(session=..., rerank=False), limit 10",
            timed(lambda i: db.recall(qs[i], session=f"user{i % SESSIONS}", now=now, rerank=False, mode=mode), reps))

    accessing = ConversationMemory(db, recency_from="accessed", rerank=db.memory.rerank)
    moments = T0 + SPAN * rng.uniform(0.25, 0.75, reps)  # a different moment each call: nothing cached by moment
    scoped = interleaved({
        "recall(session=...), now: the present": lambda i: db.recall(qs[i], session=f"user{i % SESSIONS}", now=now),
        "recall(session=..., now=mid-history): as-of checks run": lambda i: db.recall(
            qs[i], session=f"user{i % SESSIONS}", now=moments[i]),
        "recall(session=..., filter={'topic': ...}): 1 in 5 match": lambda i: db.recall(
            qs[i], session=f"user{i % SESSIONS}", now=now, filter={"topic": TOPICS[i % 5]}),
        "recall(session=..., user=...)": lambda i: db.recall(qs[i], session=f"user{i % SESSIONS}",
                                                             user=f"u{i % SESSIONS}", now=now),
        "recall(user=...): one user, every session": lambda i: db.recall(qs[i], user=f"u{i % SESSIONS}", now=now),
        "recall(session=..., recency_from='accessed'): reads the access log": lambda i: db.recall(
            qs[i], session=f"user{i % SESSIONS}", now=now, recency_from="accessed"),
        "recall(session=...) of a memory aging from access: reads and records": lambda i: accessing.recall(
            qs[i], session=f"user{i % SESSIONS}", now=now),
    }, reps)
    out["scopes"] = [{"op": op, "p50": stats(w)[0], "cpu50": stats(c)[0]} for op, (w, c) in scoped.items()]

    t = time.perf_counter()
    db.recall("first cross-session query", now=now, mode=mode)  # large collections: starts a background build
    if db.count() > db.exact_threshold:
        db.build_index()  # and waits for it, timed apart
    first_cross = time.perf_counter() - t
    info["index_built"] = db.engine.index.index is not None
    cross_samples = timed(lambda i: db.recall(qs[i], now=now, mode=mode), reps)
    info["first_cross_ms"] = first_cross * 1e3
    row("recall(session=None), limit 10" + (" [HNSW]" if db.engine.index.index is not None else " [exact]"),
        cross_samples, TARGET_CROSS_RECALL_100K if trivial else None)
    if reranking:
        row("recall(session=None, rerank=False), limit 10",
            timed(lambda i: db.recall(qs[i], now=now, rerank=False, mode=mode), reps))

    row("context(session=..., token_budget=1500)",
        timed(lambda i: db.context(qs[i], session=f"user{i % SESSIONS}", now=now, mode=mode), reps), None,
        ref("context"))

    if db.engine.index.index is not None:  # every later write also goes into the live index
        texts2 = [sentence(rng) for _ in range(reps)]

        def remember_live(i):
            clock[0] += 1.0
            db.remember(texts2[i], session=f"user{i % SESSIONS}", timestamp=clock[0])

        row("remember(), HNSW index live", timed(remember_live, reps), TARGET_REMEMBER if trivial else None)

    t = time.perf_counter()
    db.close()
    info["close_s"] = time.perf_counter() - t
    info["db_mb"] = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp)
                        if f.startswith(os.path.basename(path))) / 2**20
    info["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out



# ---------------------------------------------------------------------------- at scale

SCALE_QUERIES = 300


def _peers():
    """bench_peers' seeded embedder and sentences (same directory)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_peers", os.path.join(os.path.dirname(__file__),
                                                                               "bench_peers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def scale_data(n: int, reps: int, out: str) -> None:
    """Texts and their vectors (corpus, queries, writes), and the database of ``n`` memories
    over 50 sessions written with the code in this process's path; reused when present."""
    import random

    if os.path.exists(os.path.join(out, "done")):
        return
    os.makedirs(out, exist_ok=True)
    peers = _peers()
    rng = random.Random(14)
    texts = [peers.sentence(rng) for _ in range(n)]
    q_texts = [peers.sentence(random.Random(1414 + i)) for i in range(SCALE_QUERIES)]
    w_texts = [f"{peers.sentence(rng)} #{i}" for i in range(reps + 10)]
    emb = peers.Embedder("words")
    allt = texts + q_texts + w_texts
    vecs = np.concatenate([emb(allt[i:i + 5000]) for i in range(0, len(allt), 5000)])
    np.save(os.path.join(out, "vecs.npy"), vecs)
    with open(os.path.join(out, "texts.json"), "w") as f:
        json.dump({"corpus": texts, "queries": q_texts, "writes": w_texts}, f)
    from vxmem import Vectrix

    path = os.path.join(out, "base.vxdb")
    db = Vectrix(path, embedder=Lookup(allt, vecs), exact_threshold=10**9)
    for i, t in enumerate(texts):
        kind = "fact" if i % 10 == 0 else "turn"
        db.remember(t, session=f"s{i % SESSIONS}", kind=kind, timestamp=T0 + SPAN * i / n)
    db.close()
    for ext in (".usearch", ".usearch.json"):
        if os.path.exists(path + ext):
            os.remove(path + ext)
    open(os.path.join(out, "done"), "w").close()


def graph_dir(data: str) -> str:
    """Where the saved graph of this tree's HNSW settings lives in ``data``: one graph per
    settings (trees with the same settings load the same graph)."""
    from vxmem.store.vector.graph import settings_tag

    return os.path.join(data, "graph-" + hashlib.sha1(settings_tag().encode()).hexdigest()[:12])


def scale_index(data: str) -> None:
    """Build the database's HNSW index once per graph settings, in the foreground (every
    core), timed, and keep it in :func:`graph_dir`: every tree of these settings then loads
    the same graph."""
    from vxmem import Vectrix
    from vxmem.store.vector.graph import settings_tag

    keep = graph_dir(data)
    if os.path.exists(os.path.join(keep, "index.json")):
        return
    _, _, emb = scale_corpus(data)
    work = tempfile.mkdtemp(prefix="vxmem-scale-index-", dir=data)
    try:
        path = os.path.join(work, "base.vxdb")
        shutil.copy(os.path.join(data, "base.vxdb"), path)
        db = Vectrix(path, embedder=emb)
        t0, c0 = time.perf_counter(), time.process_time()
        db.build_index()
        built = {"build_s": time.perf_counter() - t0, "build_cpu_s": time.process_time() - c0,
                 "threads": os.cpu_count(), "load": os.getloadavg()[0], "settings": settings_tag()}
        db.close()
        os.makedirs(keep, exist_ok=True)
        for ext in (".usearch", ".usearch.json"):
            os.replace(path + ext, os.path.join(keep, "base.vxdb" + ext))
        with open(os.path.join(keep, "index.json"), "w") as f:
            json.dump(built, f)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Lookup:
    """The embedder handed to vxmem: a dict look-up of precomputed vectors."""

    def __init__(self, texts, vecs):
        self.rows = {t: i for i, t in enumerate(texts)}
        self.vecs = vecs

    def __call__(self, texts):
        return self.vecs[[self.rows[t] for t in texts]]


def scale_corpus(data: str) -> tuple[dict, np.ndarray, Lookup]:
    """The texts, their vectors and the embedder over them of a ``--scale`` directory."""
    with open(os.path.join(data, "texts.json")) as f:
        t = json.load(f)
    vecs = np.load(os.path.join(data, "vecs.npy"))
    return t, vecs, Lookup(t["corpus"] + t["queries"] + t["writes"], vecs)


def exact_top10(db, qv: np.ndarray) -> list[set]:
    """Per query vector, the ids whose exact cosine reaches the 10th best over every live row
    (ties at the 10th count as found)."""
    with db.engine.locked() as m:
        live = m.live_positions()
        sims = qv @ m.vectors(live).T
        ids = [m.ids[p] for p in live]
    thr = np.partition(sims, -10, axis=1)[:, -10] - 1e-5
    return [{ids[j] for j in np.flatnonzero(sims[i] >= thr[i])} for i in range(len(qv))]


def vxmem_from(tree: str) -> None:
    """Refuse to measure a vxmem imported from anywhere but ``tree``."""
    import vxmem

    if not os.path.abspath(vxmem.__file__).startswith(os.path.abspath(tree)):
        raise SystemExit(f"vxmem came from {vxmem.__file__}, not {tree}")


def _pcts(samples_s: list[float]) -> dict:
    ms = np.asarray(samples_s) * 1e3
    return {"p50": float(np.median(ms)), "p99": float(np.percentile(ms, 99)),
            "p999": float(np.percentile(ms, 99.9)), "max": float(ms.max()), "n": int(ms.size)}


def scale_first_open(data: str, path: str) -> dict:
    """Open the copy at ``path`` once, ask one recall in a session and close it, in a process
    of its own: a tree whose schema is newer upgrades the file here, and one that saves files
    at close saves them here, so the worker's open is an everyday one."""
    from vxmem import Vectrix

    t, _, emb = scale_corpus(data)
    t0 = time.perf_counter()
    db = Vectrix(path, embedder=emb)
    opened = time.perf_counter() - t0
    db.recall(t["queries"][0], session="s1", now=T0 + SPAN + 3600.0)
    t1 = time.perf_counter()
    db.close()
    return {"first_open_s": opened, "first_open_close_s": opened + time.perf_counter() - t1}


def scale_worker(data: str, reps: int) -> dict:
    """One code tree's figures on a fresh copy of the database in ``data`` (opened and closed
    once before, in another process: see :func:`scale_first_open`)."""
    from vxmem import Vectrix

    t, vecs, emb = scale_corpus(data)
    n = len(t["corpus"])
    qv = vecs[n: n + len(t["queries"])]
    work = tempfile.mkdtemp(prefix="vxmem-scale-")
    path = os.path.join(work, "db.vxdb")
    shutil.copy(os.path.join(data, "base.vxdb"), path)
    graph = graph_dir(data)
    for ext in (".usearch", ".usearch.json"):
        shutil.copy(os.path.join(graph, "base.vxdb" + ext), path + ext)
    with open(os.path.join(graph, "index.json")) as f:
        out: dict = json.load(f)  # the one build of this tree's graph settings
    first = subprocess.run([sys.executable, os.path.abspath(__file__), "--_scale_first_open",
                            json.dumps({"data": data, "path": path})], capture_output=True, text=True, check=True)
    out |= json.loads(first.stdout.strip().splitlines()[-1])
    now = T0 + SPAN + 3600.0
    try:
        # ---- open, first recalls, steady cross-session figures
        # CPU (of the process, every thread) beside wall time: on a machine others share the
        # wall clock also counts the waits for a core.
        t0, c0 = time.perf_counter(), time.process_time()
        db = Vectrix(path, embedder=emb)
        out["open_s"], out["open_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        out["rss_open_mb"] = rss_now_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        db.recall(t["queries"][1], session="s3", now=now)
        out["first_session_ms"] = (time.perf_counter() - t0) * 1e3
        out["first_session_cpu_ms"] = (time.process_time() - c0) * 1e3
        t0, c0 = time.perf_counter(), time.process_time()
        db.recall(t["queries"][2], now=now)
        out["first_cross_ms"] = (time.perf_counter() - t0) * 1e3
        out["first_cross_cpu_ms"] = (time.process_time() - c0) * 1e3
        db.build_index()  # a background load or build finished before the steady figures
        out["session_steady_ms"] = _pcts(timed(lambda i: db.recall(t["queries"][i], session=f"s{i % SESSIONS}",
                                                                   now=now), 200)[0])["p50"]
        good = exact_top10(db, qv)
        qs = t["queries"]
        got: list = [None] * len(qs)

        def search(i):
            got[i] = [r.id for r in db.search(qs[i], limit=10)]

        for i in range(20):
            search(i)
        wall, cpu = timed(search, len(qs))
        out["search"] = _pcts(wall) | {"recall10": float(np.mean([len(set(g) & good[i]) / 10
                                                                    for i, g in enumerate(got)]))}
        out["search_cpu"] = _pcts(cpu)
        wall, cpu = timed(lambda i: db.recall(qs[i], now=now), len(qs))
        out["recall"], out["recall_cpu"] = _pcts(wall), _pcts(cpu)
        index = db.engine.index.index
        es = index.expansion_search
        index.expansion_search = 128
        rowid_of = {}
        with db.engine.locked() as m:
            for p in m.live_positions().tolist():
                rowid_of[int(m.rowid[p])] = m.ids[p]
        ug: list = [None] * len(qs)

        def usearch_direct(i):
            ug[i] = index.search(qv[i], 10, threads=1).keys

        for i in range(20):
            usearch_direct(i)
        wall, cpu = timed(usearch_direct, len(qs))
        out["usearch_cpu"] = _pcts(cpu)
        out["usearch"] = _pcts(wall) | {"recall10": float(np.mean(
            [len({rowid_of.get(int(k)) for k in g} & good[i]) / 10 for i, g in enumerate(ug)]))}
        index.expansion_search = es  # and at this tree's own setting: what vxmem adds to the graph's search
        wall, cpu = timed(usearch_direct, len(qs))
        out["usearch_same_cpu"] = _pcts(cpu)
        out["usearch_same"] = _pcts(wall) | {"es": int(es), "recall10": float(np.mean(
            [len({rowid_of.get(int(k)) for k in g} & good[i]) / 10 for i, g in enumerate(ug)]))}

        # ---- remember() with the index live
        w = t["writes"]
        clock = [now]

        def remember(i):
            clock[0] += 1.0
            db.remember(w[i], session=f"s{i % SESSIONS}", timestamp=clock[0])

        wall, cpu = timed(remember, reps)
        out["remember_live"] = _pcts(wall)
        out["remember_live_cpu"] = _pcts(cpu)  # this thread's CPU: the call's own work, not waiting for a core
        t0, c0 = time.perf_counter(), time.process_time()
        db.close()
        out["close_s"], out["close_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0

        # ---- reuse: a write before the first cross-session query of a process. Not waited
        # for: a tree that rebuilds answers by an exact scan meanwhile, for minutes at 100k.
        db = Vectrix(path, embedder=emb)
        db.remember(w[reps], session="s1", timestamp=clock[0] + 1)
        t0 = time.perf_counter()
        db.recall(qs[3], now=now)
        out["reuse_first_cross_s"] = time.perf_counter() - t0
        out["reuse_index_ready"] = float(db.engine.index.index is not None)
        out["reuse_building"] = float(bool(getattr(db.engine.index, "building", False)))
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def run_scale(args) -> int:
    data = os.path.join(args.scale_dir, f"n{args.scale}")
    t0 = time.perf_counter()
    trees = [tuple(x.split("=", 1)) for x in args.trees.split(",")] if args.trees else [("this", ".")]
    trees = [(name, os.path.abspath(tree)) for name, tree in trees]
    env0 = dict(os.environ)
    print(f"[scale {args.scale}] data in {data} ...", file=sys.stderr, flush=True)
    env = env0 | {"PYTHONPATH": trees[0][1]}
    spec = json.dumps({"n": args.scale, "reps": args.scale_reps, "out": data})
    subprocess.run([sys.executable, os.path.abspath(__file__), "--_scale_data", spec], env=env, check=True)
    for _, tree in trees:  # one graph per settings: built by the first tree of those settings
        subprocess.run([sys.executable, os.path.abspath(__file__), "--_scale_index", json.dumps({"data": data})],
                       env=env0 | {"PYTHONPATH": tree}, check=True)
    print(f"[scale {args.scale}] data ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        for name, tree in trees:
            t1 = time.perf_counter()
            spec = json.dumps({"data": data, "reps": args.scale_reps})
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_scale_worker", spec],
                                  env=env0 | {"PYTHONPATH": tree}, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr)
                return proc.returncode
            results[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"[scale {args.scale}] round {r + 1} {name}: {time.perf_counter() - t1:.0f} s",
                  file=sys.stderr, flush=True)
    head = (f"vxmem at scale: {args.scale:,} memories, {SESSIONS} sessions, bench_peers' words embedder, "
            f"{SCALE_QUERIES} queries, {args.scale_reps} remember() calls, {args.rounds} round(s), "
            f"{os.cpu_count()} cpus, load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after\n"
            "trees: " + ", ".join(f"{name} = {tree}" for name, tree in trees))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"head": head, "results": results}, f, indent=1)
    print_scale(head, results)
    return 0


def print_scale(head_text: str, results: dict[str, list[dict]]) -> None:
    """The table of :func:`run_scale` (also from a saved ``--json`` file: ``--scale-report``)."""
    print(head_text)
    print()
    med: dict[str, dict] = {name: {} for name in results}

    def pick(res, *keys):
        vals = []
        for x in res:
            for k in keys:
                x = x.get(k) if isinstance(x, dict) else None
            if x is not None:
                vals.append(x)
        return float(np.median(vals)) if vals else None

    rows = [("index build, once per graph settings (foreground) s", ("build_s",)),
            ("  its CPU s (all threads)", ("build_cpu_s",)),
            ("first open of the copy s (a newer schema upgrades it)", ("first_open_s",)),
            ("  that open and its close s", ("first_open_close_s",)), ("open s", ("open_s",)),
            ("  open CPU s", ("open_cpu_s",)),
            ("RSS after open MB", ("rss_open_mb",)), ("first session recall after open ms", ("first_session_ms",)),
            ("  first session recall CPU ms", ("first_session_cpu_ms",)),
            ("steady session recall p50 ms", ("session_steady_ms",)),
            ("first cross-session recall after open ms", ("first_cross_ms",)),
            ("  first cross-session recall CPU ms", ("first_cross_cpu_ms",)),
            ("cross-session search(limit=10) p50 ms", ("search", "p50")),
            ("  search CPU p50 ms", ("search_cpu", "p50")),
            ("cross-session search p99 ms", ("search", "p99")),
            ("cross-session search recall@10", ("search", "recall10")),
            ("cross-session recall() p50 ms", ("recall", "p50")), ("  recall() CPU p50 ms", ("recall_cpu", "p50")),
            ("cross-session recall() p99 ms", ("recall", "p99")),
            ("usearch direct (same graph, es 128) p50 ms", ("usearch", "p50")),
            ("  usearch es 128 CPU p50 ms", ("usearch_cpu", "p50")),
            ("usearch direct recall@10", ("usearch", "recall10")),
            ("usearch direct at the tree's expansion_search p50 ms", ("usearch_same", "p50")),
            ("  usearch same es CPU p50 ms", ("usearch_same_cpu", "p50")),
            ("  its expansion_search", ("usearch_same", "es")),
            ("  its recall@10", ("usearch_same", "recall10")),
            ("remember() index live p50 ms", ("remember_live", "p50")),
            ("remember() index live p99 ms", ("remember_live", "p99")),
            ("remember() index live p99.9 ms", ("remember_live", "p999")),
            ("remember() index live max ms", ("remember_live", "max")),
            ("remember() index live, CPU of the call, p99.9 ms", ("remember_live_cpu", "p999")),
            ("remember() index live, CPU of the call, max ms", ("remember_live_cpu", "max")),
            ("close s", ("close_s",)), ("  close CPU s", ("close_cpu_s",)),
            ("write, then first cross-session query s", ("reuse_first_cross_s",)),
            ("  index ready after it (1 = reused)", ("reuse_index_ready",)),
            ("  a rebuild running after it (1 = yes)", ("reuse_building",)),
            ("peak RSS MB", ("peak_rss_mb",))]
    names = list(results)
    head = f"{'figure (median of rounds)':54}" + "".join(f"{n:>12}" for n in names)
    if len(names) == 2:
        head += f"{names[1] + '/' + names[0]:>14}"
    print(head)
    print("-" * len(head))
    for label, keys in rows:
        vals = [pick(results[n], *keys) for n in names]
        for n, v in zip(names, vals):
            med[n][label] = v
        line = f"{label:54}" + "".join(f"{fmt(v, 3 if v is not None and abs(v) < 10 else 1):>12}" for v in vals)
        if len(names) == 2 and vals[0] and vals[1] is not None:
            line += f"{vals[1] / vals[0]:>13.2f}x"
        print(line)
    print()
    for n in names:
        m = med[n]
        s50, u50 = m["cross-session search(limit=10) p50 ms"], m["usearch direct (same graph, es 128) p50 ms"]
        r50 = m["cross-session recall() p50 ms"]
        sc, rc = m["  search CPU p50 ms"], m["  recall() CPU p50 ms"]
        uc, usc = m["  usearch es 128 CPU p50 ms"], m["  usearch same es CPU p50 ms"]
        if sc and uc and rc:
            print(f"{n} (CPU): search / usearch direct = {sc / uc:.2f}x, recall() / usearch direct = "
                  f"{rc / uc:.2f}x, search / usearch at the same expansion_search = "
                  f"{sc / usc if usc else float('nan'):.2f}x")
        same = m["usearch direct at the tree's expansion_search p50 ms"]
        if s50 and same:
            print(f"{n}: search / usearch direct at the same expansion_search = {s50 / same:.2f}x")
        if s50 and u50:
            print(f"{n}: search / usearch direct = {s50 / u50:.2f}x, recall() / usearch direct = {r50 / u50:.2f}x "
                  f"(goal <= 1.5x); recall@10 {fmt(m['cross-session search recall@10'])} (goal >= 0.99); "
                  f"remember p99.9 {fmt(m['remember() index live p99.9 ms'])} ms (goal <= 5); "
                  f"open {fmt(m['open s'])} s (goal <= 0.5)")


# ---------------------------------------------------------------------------- report

def fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def print_tables(results: list[dict]) -> None:
    session_1k = {r["embedder"]: next((x["p50"] for x in r["rows"] if x["op"].startswith("recall(session=...")), None)
                  for r in results if r["size"] == 1000}
    head = (f"{'embedder':8} {'N':>7}  {'operation':74} {'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} "
            f"{'target':>12} {'p50/target':>10}  {'ref':>5}")
    print(head)
    print("-" * len(head))
    for r in results:
        for x in r["rows"]:
            target, tlabel = x["target"], ""
            if target is not None and x["op"].startswith("recall(session=...") and r["size"] != 1000:
                base = session_1k.get(r["embedder"])
                # within 2x of the 1k figure measured in this run (of the 0.3 ms target if 1k was not run)
                target = 2 * (base if base is not None else TARGET_SESSION_RECALL_1K)
                tlabel = "2x1k="
            if target is not None and x["op"].startswith("recall(session=None") and r["size"] != 100_000:
                tlabel = "(100k)"
            ratio = None if target is None else x["p50"] / target
            verdict = "" if ratio is None else ("  ok" if ratio <= 1 else "  MISS")
            tcell = "-" if target is None else f"{tlabel}{target:.3g}"
            print(f"{r['embedder']:8} {r['size']:>7}  {x['op']:74} {x['p50']:>8.3f} {x['p95']:>8.3f} "
                  f"{x['cpu50']:>8.3f} {tcell:>12} {fmt(ratio, 2):>10}  {fmt(x['ref'], 1):>5}{verdict}")
        print()
    print("ref: the reference implementation (1k memories, trivial embedder, database file).")
    print("cpu p50: median CPU time of the calling thread (wall-clock p50 minus waiting for a core, "
          "on a machine others share).")
    print("target/ratio: the targets apply to the trivial embedder (the memory layer alone); "
          "cross-session target is for 100k.")
    print()
    head = (f"{'embedder':8} {'N':>7}  {'scope (interleaved)':60} {'p50 ms':>8} {'cpu p50':>8} {'p50 ratio':>9} "
            f"{'cpu ratio':>9}")
    print(head)
    print("-" * len(head))
    for r in results:
        rows = r.get("scopes") or []
        for x in rows:
            print(f"{r['embedder']:8} {r['size']:>7}  {x['op']:60} {x['p50']:>8.3f} {x['cpu50']:>8.3f} "
                  f"{x['p50'] / rows[0]['p50']:>9.2f} {x['cpu50'] / rows[0]['cpu50']:>9.2f}")
        print()
    print("ratios: to the first row of the same size, measured call by call in turn in one loop.")
    print()
    head = (f"{'embedder':8} {'N':>7} {'docs':>7} {'build s':>8} {'build/mem ms':>12} {'reopen s':>8} "
            f"{'1st cross ms':>12} {'close s':>8} {'db MB':>7} {'RSS open MB':>11} {'peak RSS MB':>11}")
    print(head)
    print("-" * len(head))
    for r in results:
        i = r["info"]
        print(f"{r['embedder']:8} {r['size']:>7} {i['docs']:>7} {i['build_s']:>8.1f} "
              f"{i['build_s'] / i['docs'] * 1e3:>12.3f} {i['open_s']:>8.2f} {i['first_cross_ms']:>12.1f} "
              f"{i['close_s']:>8.2f} {i['db_mb']:>7.1f} {i['rss_after_open_mb']:>11.0f} {i['peak_rss_mb']:>11.0f}")
    print()
    print("build: remember() in a loop (+2% feedback, 0.2% corrections), texts embedded ahead in batches of "
          f"{CHUNK}; 1st cross: the first cross-session recall, which builds the HNSW index when one is used "
          "(kept out of the latency rows); close: saves the index if one was built; peak RSS: the child "
          "process running that row, build included.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated memory counts")
    ap.add_argument("--embedders", default="trivial,hashing", help="some of default,trivial,hashing")
    ap.add_argument("--mode", choices=("dense", "lexical", "hybrid"), default=None,
                    help="recall's mode (default: recall's own default, hybrid; the targets were set for dense)")
    ap.add_argument("--default-reps", type=int, default=100, help="repetitions per operation for 'default'")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (200 instead of 1000)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per timed operation")
    ap.add_argument("--json", help="also write the raw results to this file")
    ap.add_argument("--scale", type=int, help="the at-scale rows at this many memories (e.g. 100000)")
    ap.add_argument("--scale-dir", default=os.path.join(tempfile.gettempdir(), "vxmem-bench-scale"),
                    help="where the --scale database is written once and reused")
    ap.add_argument("--scale-reps", type=int, default=3000, help="remember() calls timed with the index live")
    ap.add_argument("--trees", help="name=path,... code trees measured side by side (default: this one)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds over the trees")
    ap.add_argument("--scale-report", help="print the --scale table again from its --json file")
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    ap.add_argument("--_scale_worker", help=argparse.SUPPRESS)
    ap.add_argument("--_scale_data", help=argparse.SUPPRESS)
    ap.add_argument("--_scale_index", help=argparse.SUPPRESS)
    ap.add_argument("--_scale_first_open", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._scale_data:
        scale_data(**json.loads(args._scale_data))
        return 0
    if args._scale_index:
        scale_index(**json.loads(args._scale_index))
        return 0
    if args._scale_first_open:
        print(json.dumps(scale_first_open(**json.loads(args._scale_first_open))), flush=True)
        os._exit(0)
    if args._scale_worker:
        print(json.dumps(scale_worker(**json.loads(args._scale_worker))), flush=True)
        os._exit(0)  # a tree that started a background rebuild is not waited for
    if args.scale_report:
        with open(args.scale_report) as f:
            saved = json.load(f)
        if "results" not in saved:  # written before the file kept its heading
            saved = {"head": f"vxmem at scale, from {args.scale_report}", "results": saved}
        print_scale(saved["head"], saved["results"])
        return 0
    if args.scale:
        return run_scale(args)
    if args._worker:
        spec = json.loads(args._worker)
        print(json.dumps(worker(**spec)))
        return 0

    sizes = [int(s) for s in args.sizes.split(",") if s]
    embedders = [e.strip() for e in args.embedders.split(",") if e.strip()]
    reps = args.reps or (200 if args.quick else 1000)
    tmp = tempfile.mkdtemp(prefix="vxmem-bench-")
    results = []
    load_before = os.getloadavg()[0]
    try:
        for emb in embedders:
            for size in sizes:
                t = time.perf_counter()
                print(f"[{emb} {size}] ...", file=sys.stderr, flush=True)
                n = min(reps, args.default_reps) if emb == "default" else reps
                spec = json.dumps({"size": size, "embedder_name": emb, "reps": n, "tmp": tmp, "mode": args.mode})
                proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", spec],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    sys.stderr.write(proc.stderr)
                    return proc.returncode
                results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                for f in os.listdir(tmp):
                    os.remove(os.path.join(tmp, f))
                print(f"[{emb} {size}] {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"vxmem memory benchmark: {SESSIONS} sessions, database file, {reps} repetitions per operation, "
          f"recall mode {args.mode or 'default (hybrid)'}, "
          f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} cpus, "
          f"load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after")
    print()
    print_tables(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
