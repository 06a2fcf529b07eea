"""vxmem against its peers: write, recall, memory and disk, measured side by side in one run.

    make bench-peers                                            # makes .venv-peers, then runs this at 1k/10k/100k
    .venv-peers/bin/python benchmarks/bench_peers.py --sizes 1000,10000
    .venv-peers/bin/python benchmarks/bench_peers.py --sizes 100000 --systems vxmem,usearch,chroma --queries 300

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
that embedding is not what is measured: each word of a 160-word vocabulary has a fixed random 384-d vector
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
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from datetime import UTC

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DIM = 384
SESSIONS = 50
DAY = 86400.0
T0 = 1_700_000_000.0
SPAN = 90 * DAY
T_END = T0 + SPAN + DAY
WARMUP = 10
POOL = 40  # candidates a recall looks at: vxmem's pool (max(4 x limit, 40)), vectrixdb's 4 x limit
LC_FETCH_K = POOL * SESSIONS * 2  # what FAISS must fetch to still hold ~POOL of one session after filtering
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
# vxmem's graph (vxmem.store.vector.graph.HNSW_SETTINGS; written out: this child never imports vxmem)
VXMEM_HNSW = {"dtype": "i8", "connectivity": 16, "expansion_add": 48, "expansion_search": 384}

WORDS = (
    "dark light mode theme editor python rust meeting monday tuesday friday coffee tea flight "
    "berlin paris london tokyo hotel train invoice budget report deadline project alpha beta "
    "gamma release bug crash fix test deploy server database index query cache memory latency "
    "sister brother mother birthday gift cake recipe pasta pizza salad vegan allergy peanut "
    "doctor appointment dentist gym running swimming yoga marathon book novel author film "
    "music guitar piano concert ticket garden tomato rose dog cat vet walk weekend holiday "
    "beach mountain ski snow rain umbrella car bike bus commute office remote laptop phone "
    "password account email calendar reminder note idea plan goal habit sleep morning evening "
    "river lake island bridge museum gallery painting camera photo album wedding party dinner "
    "lunch breakfast bread cheese wine beer juice water tax bank loan salary rent lease"
).split()
OPENERS = ("I prefer", "Remind me about", "We talked about", "Note that", "My", "Please remember the",
           "Yesterday I mentioned", "The plan for", "Don't forget", "I really like")


# ---------------------------------------------------------------------------- data

class Embedder:
    """Sum of fixed per-word random vectors plus a per-text random part, L2-normalised (see the docstring)."""

    def __init__(self, kind: str = "words", noise: float = 0.35):
        self.kind = kind
        self.noise = noise
        self.vocab = {w: i for i, w in enumerate(dict.fromkeys(w.lower() for w in WORDS))}
        self.table = np.stack([np.random.default_rng(zlib.crc32(w.encode())).standard_normal(DIM)
                               for w in self.vocab]).astype(np.float32)

    def __call__(self, texts) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(zlib.crc32(t.encode())).standard_normal(DIM).astype(np.float32)
            if self.kind == "words":
                rows = [self.vocab[w] for w in t.lower().replace("'", " ").split() if w in self.vocab]
                v = self.table[rows].sum(axis=0) / math.sqrt(max(len(rows), 1)) + self.noise * v
            out[i] = v
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(OPENERS)} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))


def make_data(n: int, queries: int, extra: int, kind: str, out: str) -> None:
    """Write the corpus, the queries, the remember() texts and the exact answers to ``out``."""
    rng = random.Random(14)
    texts = [sentence(rng) for _ in range(n)]
    qrng = random.Random(1414)
    q_texts = [sentence(qrng) for _ in range(WARMUP + queries)]
    q_sessions = [f"s{qrng.randrange(SESSIONS)}" for _ in q_texts]
    wrng = random.Random(141414)
    w_texts = [sentence(wrng) for _ in range(extra)]
    emb = Embedder(kind)
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


def session_of(i: int) -> str:
    return f"s{i % SESSIONS}"


def ts_of(i: int, n: int) -> float:
    return T0 + SPAN * i / max(n, 1)


class Lookup:
    """The embedder every system is handed: a dict look-up of the precomputed vectors.

    A text not among them (vxmem embeds one stored text at an open, to check that the
    embedder is the one that wrote the vectors) is embedded by ``fallback``, the embedder
    that made them, so a phase's child needs only its own texts' vectors in memory."""

    def __init__(self, texts, vecs, fallback: Embedder | None = None):
        self.rows = {t: i for i, t in reversed(list(enumerate(texts)))}
        self.vecs = vecs
        self.fallback = fallback

    def __call__(self, texts) -> np.ndarray:
        if self.fallback is not None and any(t not in self.rows for t in texts):
            return np.stack([self.vecs[self.rows[t]] if t in self.rows else self.fallback([t])[0] for t in texts])
        return self.vecs[[self.rows[t] for t in texts]]


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# ---------------------------------------------------------------------------- the systems
#
# Each adapter: build(n, texts, vecs) loads the corpus and closes; open() reopens; index() builds the ANN index
# where there is one to build; session_recall / cross_recall / session_search / cross_search return ids;
# remember(i, text) stores one memory durably; close(). Imports happen inside, so a child loads one system.

class VxmemSystem:
    imports = ("vxmem", "usearch.index")  # imported before any timer starts

    def __init__(self, path: str, embed):
        self.path, self.embed, self.db = os.path.join(path, "mem.vxdb"), embed, None

    def _open(self):
        from vxmem import Vectrix

        return Vectrix(self.path, embedder=self.embed, recency_weight=0.0, feedback_weight=0.0, **self.options)

    options: dict = {}  # more Vectrix() arguments

    def build(self, n, texts, vecs):
        db = self._open()
        for i, t in enumerate(texts):
            db.remember(t, session=session_of(i), timestamp=ts_of(i, n), id=str(i))
        db.close()

    def build_index(self):
        # Reopened and built here, so the serve child loads the saved index (its steady state) and the
        # build's transient memory stays out of its peak RSS.
        db = self._open()
        db.build_index()
        db.close()  # saves the index beside the database

    def open(self):
        self.db = self._open()

    def index(self):
        self.db.build_index()  # loads the saved index (builds it if it is missing or stale)

    mode: str | None = "dense"  # ranked by cosine, as every peer ranks

    def session_recall(self, q, s):
        return self.db.recall(q, session=s, limit=10, now=T_END, mode=self.mode).ids

    def cross_recall(self, q, s):
        return self.db.recall(q, limit=10, now=T_END, mode=self.mode).ids

    def session_search(self, q, s):
        return self.db.search(q, limit=10, filter={"_vx_session": s}).ids

    def cross_search(self, q, s):
        return self.db.search(q, limit=10).ids

    def remember(self, i, text, n):
        self.db.remember(text, session=session_of(i), timestamp=ts_of(i, n), id=str(i))

    def close(self):
        self.db.close()


class VxmemHybridSystem(VxmemSystem):
    mode = None  # the library's default


class VxmemF16System(VxmemSystem):
    options = {"vector_dtype": "float16"}


class FloorSystem:
    """numpy matrix + SQLite WAL, one INSERT + COMMIT per row: the least any durable store must do."""
    imports = ("sqlite3",)  # imported before any timer starts


    def __init__(self, path: str, embed):
        self.path, self.embed = os.path.join(path, "floor.db"), embed
        # One BLAS thread: OpenBLAS's idle workers take ~7 ms to wake here, so a threaded matrix-vector
        # product between other work is 10-20x slower than a single-threaded one (vxmem uses np.vecdot).
        try:
            from threadpoolctl import threadpool_limits

            self._blas = threadpool_limits(1, user_api="blas")
        except ImportError:
            pass

    def _connect(self):
        import sqlite3

        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE IF NOT EXISTS docs (rowid INTEGER PRIMARY KEY, id TEXT, text TEXT, "
                     "session TEXT, ts REAL, vector BLOB)")
        return conn

    def build(self, n, texts, vecs):
        self.conn = self._connect()
        self._empty(n)
        for i, t in enumerate(texts):
            self._insert(str(i), t, session_of(i), ts_of(i, n), vecs[i])
        self.conn.close()

    def _empty(self, cap):
        self.X = np.zeros((max(cap, 16), DIM), dtype=np.float32)
        self.n = 0
        self.ids: list[str] = []
        self.by_session: dict[str, list[int]] = {}

    def _insert(self, id, text, session, ts, vec):
        self.conn.execute("BEGIN")
        self.conn.execute("INSERT INTO docs (id, text, session, ts, vector) VALUES (?, ?, ?, ?, ?)",
                          (id, text, session, ts, np.asarray(vec, dtype=np.float32).tobytes()))
        self.conn.execute("COMMIT")
        if self.n == self.X.shape[0]:
            self.X = np.concatenate([self.X, np.zeros_like(self.X)])
        self.X[self.n] = vec
        self.ids.append(id)
        self.by_session.setdefault(session, []).append(self.n)
        self.n += 1

    def open(self):
        self.conn = self._connect()
        rows = self.conn.execute("SELECT id, session, vector FROM docs ORDER BY rowid").fetchall()
        self._empty(len(rows))
        for id, session, blob in rows:
            self.X[self.n] = np.frombuffer(blob, dtype=np.float32)
            self.ids.append(id)
            self.by_session.setdefault(session, []).append(self.n)
            self.n += 1
        self.sess = {s: np.array(v) for s, v in self.by_session.items()}

    def index(self):
        pass

    def _top(self, sims, rows=None):
        k = min(10, sims.size)
        part = np.argpartition(-sims, k - 1)[:k]
        part = part[np.argsort(-sims[part])]
        if rows is not None:
            part = rows[part]
        return [self.ids[p] for p in part]

    def session_recall(self, q, s):
        rows = self.sess[s]
        return self._top(self.X[rows] @ self.embed([q])[0], rows)

    def cross_recall(self, q, s):
        return self._top(self.X[: self.n] @ self.embed([q])[0])

    session_search, cross_search = session_recall, cross_recall

    def remember(self, i, text, n):
        self._insert(str(i), text, session_of(i), ts_of(i, n), self.embed([text])[0])

    def close(self):
        self.conn.close()


class UsearchSystem:
    """vxmem's HNSW settings, searched directly: what vxmem's cross-session search could cost at best."""
    imports = ("usearch.index",)  # imported before any timer starts


    def __init__(self, path: str, embed):
        self.path, self.embed = os.path.join(path, "floor.usearch"), embed

    def _new(self):
        from usearch.index import Index

        return Index(ndim=DIM, metric="ip", **VXMEM_HNSW)

    def build(self, n, texts, vecs):
        pass  # nothing but the graph, built (and timed) as the index

    def build_index(self):
        vecs = self.embed.vecs
        ix = self._new()
        ix.add(np.arange(vecs.shape[0], dtype=np.uint64), vecs, threads=os.cpu_count() or 1)
        ix.save(self.path)

    def open(self):
        self.ix = self._new()
        self.ix.load(self.path)

    def index(self):
        pass

    def cross_search(self, q, s):
        return [str(k) for k in self.ix.search(self.embed([q])[0], 10).keys]

    cross_recall = cross_search
    session_recall = session_search = remember = None

    def close(self):
        pass


class VectrixdbSystem:
    imports = ("vectrixdb", "vectrixdb.easy", "vectrixdb.memory")  # imported before any timer starts

    def __init__(self, path: str, embed):
        self.path, self.embed, self.db = path, embed, None

    def _open(self):
        from vectrixdb import Vectrix

        db = Vectrix("mem", path=os.path.join(self.path, "vdb"), embed_fn=self.embed, dimension=DIM)
        db.memory.recency_weight = 0.0  # rank by cosine alone, as vxmem's run does
        db.memory.feedback_weight = 0.0
        return db

    @staticmethod
    def _meta(i, n):
        from datetime import datetime

        return {"_vx_kind": "turn", "_vx_session": session_of(i), "_vx_role": "user", "_vx_turn": i // SESSIONS,
                "_vx_ts": datetime.fromtimestamp(ts_of(i, n), tz=UTC).isoformat()}

    def build(self, n, texts, vecs):
        # What remember() stores, written in batches of 1,000 (vectrixdb saves its index on every add()).
        db = self._open()
        for a in range(0, n, 1000):
            b = min(n, a + 1000)
            db.add(texts[a:b], metadata=[self._meta(i, n) for i in range(a, b)], ids=[str(i) for i in range(a, b)],
                   vectors=vecs[a:b], progress=False)
        db.close()

    def open(self):
        self.db = self._open()

    def index(self):
        pass

    def _now(self):
        from datetime import datetime

        return datetime.fromtimestamp(T_END, tz=UTC)

    def session_recall(self, q, s):
        return [r.id for r in self.db.recall(q, session=s, limit=10, now=self._now())]

    def cross_recall(self, q, s):
        return [r.id for r in self.db.recall(q, limit=10, now=self._now())]

    def session_search(self, q, s):
        return [r.id for r in self.db.search(q, limit=10, mode="dense", filter={"_vx_session": s})]

    def cross_search(self, q, s):
        return [r.id for r in self.db.search(q, limit=10, mode="dense")]

    def remember(self, i, text, n):
        from datetime import datetime

        self.db.remember(text, session=session_of(i), timestamp=datetime.fromtimestamp(ts_of(i, n), tz=UTC),
                         id=str(i))

    def close(self):
        self.db.close()


class ChromaSystem:
    imports = ("chromadb",)  # imported before any timer starts

    def __init__(self, path: str, embed):
        self.path, self.embed = os.path.join(path, "chroma"), embed

    def _open(self):
        import chromadb

        self.client = chromadb.PersistentClient(path=self.path)
        return self.client.get_or_create_collection("memories", embedding_function=None,
                                                    configuration={"hnsw": {"space": "cosine"}})

    def build(self, n, texts, vecs):
        col = self._open()
        step = min(5000, self.client.get_max_batch_size())
        for a in range(0, n, step):
            b = min(n, a + step)
            col.add(ids=[str(i) for i in range(a, b)], embeddings=vecs[a:b], documents=texts[a:b],
                    metadatas=[{"session": session_of(i), "ts": ts_of(i, n)} for i in range(a, b)])

    def open(self):
        self.col = self._open()

    def index(self):
        pass

    def _query(self, q, where):
        return self.col.query(query_embeddings=self.embed([q]), n_results=10, where=where,
                              include=["documents", "metadatas", "distances"])["ids"][0]

    def session_recall(self, q, s):
        return self._query(q, {"session": s})

    def cross_recall(self, q, s):
        return self._query(q, None)

    session_search, cross_search = session_recall, cross_recall

    def remember(self, i, text, n):
        self.col.add(ids=[str(i)], embeddings=self.embed([text]), documents=[text],
                     metadatas=[{"session": session_of(i), "ts": ts_of(i, n)}])

    def close(self):
        pass  # chromadb has no close(); it persists on every add


class LancedbSystem:
    imports = ("lancedb", "pyarrow")  # imported before any timer starts

    def __init__(self, path: str, embed):
        self.path, self.embed = os.path.join(path, "lance"), embed

    def _table(self, ids, texts, sessions, ts, vecs):
        import pyarrow as pa

        schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("session", pa.string()),
                            ("ts", pa.float64()), ("vector", pa.list_(pa.float32(), DIM))])
        flat = pa.array(np.ascontiguousarray(vecs, dtype=np.float32).ravel())
        return pa.table({"id": ids, "text": texts, "session": sessions, "ts": ts,
                         "vector": pa.FixedSizeListArray.from_arrays(flat, DIM)}, schema=schema)

    def build(self, n, texts, vecs):
        import lancedb

        db = lancedb.connect(self.path)
        db.create_table("memories", self._table([str(i) for i in range(n)], texts, [session_of(i) for i in range(n)],
                                                [ts_of(i, n) for i in range(n)], vecs))

    def open(self):
        import lancedb

        self.tbl = lancedb.connect(self.path).open_table("memories")

    def index(self):
        pass

    def _query(self, q, s):
        search = self.tbl.search(self.embed([q])[0], vector_column_name="vector").distance_type("cosine")
        if s is not None:
            search = search.where(f"session = '{s}'", prefilter=True)
        return search.select(["id", "text", "session", "ts", "_distance"]).limit(10).to_arrow()["id"].to_pylist()

    def session_recall(self, q, s):
        return self._query(q, s)

    def cross_recall(self, q, s):
        return self._query(q, None)

    session_search, cross_search = session_recall, cross_recall

    def remember(self, i, text, n):
        self.tbl.add(self._table([str(i)], [text], [session_of(i)], [ts_of(i, n)], self.embed([text])))

    def close(self):
        pass


class LangchainSystem:
    imports = ("langchain_classic.retrievers", "langchain_community.vectorstores", "langchain_core.documents")

    def __init__(self, path: str, embed):
        self.path, self.embed = os.path.join(path, "faiss"), embed

    def _embeddings(self):
        from langchain_core.embeddings import Embeddings

        lookup = self.embed

        class Precomputed(Embeddings):
            def embed_documents(self, texts):
                return lookup(list(texts)).tolist()

            def embed_query(self, text):
                return lookup([text])[0].tolist()

        return Precomputed()

    def _retriever(self, vs, stream):
        from langchain_classic.retrievers import TimeWeightedVectorStoreRetriever

        r = TimeWeightedVectorStoreRetriever(vectorstore=vs, decay_rate=0.0, k=10, search_kwargs={"k": POOL})
        r.memory_stream = stream  # assigned after construction: pydantic would copy and validate every document
        return r

    def build(self, n, texts, vecs):
        from datetime import datetime

        from langchain_community.vectorstores import FAISS
        from langchain_core.documents import Document

        emb = self._embeddings()
        vs = None
        for a in range(0, n, 5000):
            b = min(n, a + 5000)
            when = [datetime.fromtimestamp(ts_of(i, n)) for i in range(a, b)]
            docs = [Document(page_content=texts[i], id=str(i),
                             metadata={"session": session_of(i), "last_accessed_at": when[i - a],
                                       "created_at": when[i - a], "buffer_idx": i})
                    for i in range(a, b)]
            if vs is None:
                vs = FAISS.from_documents(docs, emb, ids=[d.id for d in docs])
            else:
                vs.add_documents(docs, ids=[d.id for d in docs])
        vs.save_local(self.path)

    def open(self):
        from langchain_community.vectorstores import FAISS

        self.vs = FAISS.load_local(self.path, self._embeddings(), allow_dangerous_deserialization=True)
        docs = [self.vs.docstore.search(i) for i in self.vs.index_to_docstore_id.values()]  # every stored one
        stream = sorted(docs, key=lambda d: d.metadata["buffer_idx"])
        self.retriever = self._retriever(self.vs, stream)

    def index(self):
        pass

    def session_recall(self, q, s):
        self.retriever.search_kwargs = {"k": POOL, "fetch_k": LC_FETCH_K, "filter": {"session": s}}
        return [d.id for d in self.retriever.invoke(q)]

    def cross_recall(self, q, s):
        self.retriever.search_kwargs = {"k": POOL}
        return [d.id for d in self.retriever.invoke(q)]

    def session_search(self, q, s):
        return [d.id for d in self.vs.similarity_search(q, k=10, fetch_k=LC_FETCH_K, filter={"session": s})]

    def cross_search(self, q, s):
        return [d.id for d in self.vs.similarity_search(q, k=10)]

    def remember(self, i, text, n):
        from datetime import datetime

        from langchain_core.documents import Document

        t = datetime.fromtimestamp(ts_of(i, n))
        self.retriever.add_documents([Document(page_content=text, id=str(i), metadata={"session": session_of(i)})],
                                     current_time=t, ids=[str(i)])
        self.vs.save_local(self.path)  # the only way FAISS's store reaches the disk

    def close(self):
        pass


ADAPTERS = {"vxmem": VxmemSystem, "vxmem-hybrid": VxmemHybridSystem, "vxmem-f16": VxmemF16System,
            "floor": FloorSystem, "usearch": UsearchSystem, "vectrixdb": VectrixdbSystem,
            "chroma": ChromaSystem, "lancedb": LancedbSystem, "langchain": LangchainSystem}
OPS = ("session_recall", "cross_recall", "session_search", "cross_search")


# ---------------------------------------------------------------------------- child phases

def _load(work: str, name: str) -> dict:
    with open(os.path.join(work, f"{name}.json")) as f:
        return json.load(f)


def child(spec: dict) -> dict:
    work, system, phase = spec["work"], spec["system"], spec["phase"]
    sysdir = os.path.join(work, system)
    os.makedirs(sysdir, exist_ok=True)

    def imports() -> None:  # after the harness's data is loaded: import time is not open or build time
        out["harness_rss_mb"] = rss_mb()
        for mod in ADAPTERS[system].imports:
            importlib.import_module(mod)
        out["imported_rss_mb"] = rss_mb()
    out: dict = {"system": system, "phase": phase}
    if phase == "build":
        corpus = _load(work, "corpus")
        n, texts = corpus["n"], corpus["texts"]
        vecs = np.load(os.path.join(work, "vecs.npy"))
        imports()
        adapter = ADAPTERS[system](sysdir, Lookup(texts, vecs))
        t = time.perf_counter()
        adapter.build(n, texts, vecs)
        out["build_s"] = time.perf_counter() - t
        if hasattr(adapter, "build_index"):
            t = time.perf_counter()
            adapter.build_index()
            out["index_s"] = time.perf_counter() - t
        out["build_peak_rss_mb"] = peak_rss_mb()
        return out

    if phase == "serve":
        qs = _load(work, "queries")
        q_texts, q_sessions = qs["texts"], qs["sessions"]
        truth = {"session": qs["truth_session"], "cross": qs["truth_cross"]}
        q_vecs = np.load(os.path.join(work, "q_vecs.npy"))
        imports()
        adapter = ADAPTERS[system](sysdir, Lookup(q_texts, q_vecs, Embedder(spec["embedder"])))
        t = time.perf_counter()
        adapter.open()
        out["open_s"] = time.perf_counter() - t
        t = time.perf_counter()
        adapter.index()
        if hasattr(adapter, "build_index"):
            out["index_load_s"] = time.perf_counter() - t
        ops = [op for op in OPS if getattr(adapter, op) is not None]
        lat: dict[str, list[float]] = {op: [] for op in ops}
        hits: dict[str, list[float]] = {op: [] for op in ops}
        for j, (q, s) in enumerate(zip(q_texts, q_sessions)):
            for op in ops:  # interleaved query by query
                fn = getattr(adapter, op)
                t = time.perf_counter()
                ids = fn(q, s)
                dt = time.perf_counter() - t
                if j == 0:
                    out[f"first_{op}_ms"] = dt * 1000
                if j < WARMUP:
                    continue
                lat[op].append(dt)
                good = set(truth["session" if op.startswith("session") else "cross"][j])
                hits[op].append(sum(int(i) in good for i in ids[:10]) / 10)
        for op in ops:
            a = np.array(lat[op]) * 1000
            out[op] = {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
                       "recall10": float(np.mean(hits[op])), "n": int(a.size)}
        out["peak_rss_mb"] = peak_rss_mb()
        out["rss_after_mb"] = rss_mb()
        t = time.perf_counter()
        adapter.close()
        out["close_s"] = time.perf_counter() - t
        return out

    if phase == "write":
        if getattr(ADAPTERS[system], "remember", None) is None:
            return out
        writes = _load(work, "writes")
        n, w_texts = writes["n"], writes["texts"][: spec["remember_calls"]]
        w_vecs = np.load(os.path.join(work, "w_vecs.npy"))
        imports()
        adapter = ADAPTERS[system](sysdir, Lookup(w_texts, w_vecs, Embedder(spec["embedder"])))
        adapter.open()
        adapter.index()  # vxmem: the saved HNSW index is loaded, so new memories go through its pending buffer
        base = n + spec["round"] * len(w_texts)
        lat_w: list[float] = []
        stop = time.perf_counter() + spec["remember_seconds"]
        for k, text in enumerate(w_texts):
            t = time.perf_counter()
            adapter.remember(base + k, text, n)
            lat_w.append(time.perf_counter() - t)
            if time.perf_counter() > stop and k >= 20:
                break
        a = np.array(lat_w) * 1000
        out["remember"] = {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
                           "mean_ms": float(a.mean()), "n": int(a.size)}
        adapter.close()
        return out
    raise ValueError(f"unknown phase {phase!r}")


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
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    env = dict(os.environ, RUST_LOG="error", LANCE_LOG="error", ANONYMIZED_TELEMETRY="False",
               TOKENIZERS_PARALLELISM="false")
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


def median_of(rounds: list[dict], path: tuple) -> float | None:
    vals = []
    for r in rounds:
        v = r
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            vals.append(float(v))
    return statistics.median(vals) if vals else None


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


def fmt(v: float | None, unit: str = "", digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if abs(v) >= 100 and digits:
        digits = 0
    elif abs(v) >= 10 and digits > 1:
        digits = 1
    return f"{v:,.{digits}f}{unit}"


def ratio(peer: float | None, vx: float | None) -> str:
    if peer is None or vx is None or vx <= 0:
        return ""
    r = peer / vx
    return f" ({r:,.0f}x)" if r >= 100 else f" ({r:.1f}x)" if r >= 10 else f" ({r:.2f}x)"


def metrics_of(r: dict) -> dict:
    """One row per figure, each the median over the rounds."""
    serve, write = r["serve"], r["write"]
    m: dict = {}
    m["remember p50 ms"] = median_of(write, ("remember", "p50_ms"))
    m["remember p99 ms"] = median_of(write, ("remember", "p99_ms"))
    for op, label in (("session_recall", "session recall"), ("cross_recall", "cross-session recall"),
                      ("session_search", "session search"), ("cross_search", "cross-session search")):
        m[f"{label} p50 ms"] = median_of(serve, (op, "p50_ms"))
        m[f"{label} p99 ms"] = median_of(serve, (op, "p99_ms"))
        m[f"{label} recall@10"] = median_of(serve, (op, "recall10"))
    m["first cross-session recall ms"] = median_of(serve, ("first_cross_recall_ms",))
    m["build s"] = median_of([r["build"]] if r["build"] else [], ("build_s",))
    m["index build s"] = median_of([r["build"]] if r["build"] else [], ("index_s",))
    m["open s"] = median_of(serve, ("open_s",))
    m["index load s"] = median_of(serve, ("index_load_s",))
    m["peak RSS MB (serve)"] = median_of(serve, ("peak_rss_mb",))
    m["harness RSS MB"] = median_of(serve, ("harness_rss_mb",))
    m["RSS after imports MB"] = median_of(serve, ("imported_rss_mb",))
    m["peak RSS MB (build)"] = median_of([r["build"]] if r["build"] else [], ("build_peak_rss_mb",))
    m["disk MB"] = r["disk"] / 2**20 if r.get("disk") is not None else None
    return m


def report(n: int, res: dict, systems: list[str], args) -> str:
    lines = [f"\n### {n:,} memories, {SESSIONS} sessions, {args.queries} queries of each kind "
             f"({args.embedder} embedder, {os.cpu_count()} cores, {args.rounds} round(s), "
             f"{res['_elapsed_s'] / 60:.1f} min)\n"]
    mets = {s: metrics_of(res[s]) for s in systems}
    vx = mets.get("vxmem")
    lines.append("| figure | " + " | ".join(systems) + " |")
    lines.append("|---|" + "---:|" * len(systems))
    for key in mets[systems[0]]:
        cells = []
        for s in systems:
            v = mets[s][key]
            unit_digits = 2
            if "recall@10" in key:
                cells.append(fmt(v, "", 2))
                continue
            cell = fmt(v, "", unit_digits)
            if vx is not None and s != "vxmem" and v is not None and "harness" not in key and "imports" not in key:
                cell += ratio(v, vx[key])
            cells.append(cell)
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    notes = [f"{s}: {res[s]['failed']}" for s in systems if res[s].get("failed")]
    if notes:
        lines.append("\nnot measured (errors): " + "; ".join(notes))
    return "\n".join(lines)


def goals(n: int, res: dict, systems: list[str]) -> str:
    if "vxmem" not in systems or res["vxmem"].get("failed"):
        return ""
    mets = {s: metrics_of(res[s]) for s in systems}
    vx = mets["vxmem"]
    peers = [s for s in systems if s not in ("vxmem", "vxmem-hybrid", "vxmem-f16", "floor", "usearch")
             and not res[s].get("failed")]
    at_goal = n >= 100_000  # the goal is set at 100k; smaller sizes print the ratios only

    def verdict(ok: bool) -> str:
        return ("met" if ok else "NOT met") if at_goal else "(goal set at 100k)"

    out = [f"\ngoals at {n:,} (ratios peer / vxmem; the usearch one is vxmem / usearch):"]
    c = vx["cross-session recall p50 ms"]
    worst = min(((mets[s]["cross-session recall p50 ms"] or math.inf) / c, s) for s in peers) if peers else None
    if worst:
        out.append(f"- cross-session recall: vxmem {fmt(c, ' ms')}, "
                   f"recall@10 {fmt(vx['cross-session recall recall@10'])}; "
                   f"slowest-to-beat peer {worst[1]} at {worst[0]:.2f}x (goal >= 5x, recall@10 >= 0.99): "
                   + verdict(worst[0] >= 5 and (vx["cross-session recall recall@10"] or 0) >= 0.99))
    if "usearch" in mets and mets["usearch"]["cross-session search p50 ms"]:
        u = mets["usearch"]["cross-session search p50 ms"]
        out.append(f"- usearch floor {fmt(u, ' ms')} "
                   f"(recall@10 {fmt(mets['usearch']['cross-session search recall@10'])}): "
                   f"vxmem recall {c / u:.2f}x, vxmem search {vx['cross-session search p50 ms'] / u:.2f}x of it "
                   "(goal <= 1.5x): " + verdict(c / u <= 1.5))
    for key in ("session recall p50 ms", "remember p50 ms"):
        rs = [(mets[s][key] / vx[key], s) for s in peers if mets[s][key] and vx[key]]
        if rs:
            out.append(f"- {key.replace(' p50 ms', '')}: vxmem {fmt(vx[key], ' ms')}; peers "
                       + ", ".join(f"{s} {r:.1f}x" for r, s in sorted(rs)))
    if "floor" in mets and not res["floor"].get("failed"):
        f = mets["floor"]
        for key in ("peak RSS MB (serve)", "disk MB"):
            if f[key] and vx[key]:
                out.append(f"- {key}: vxmem {fmt(vx[key])} vs floor {fmt(f[key])} = {vx[key] / f[key]:.2f}x the floor")
        half = mets.get("vxmem-f16")
        if half and not res["vxmem-f16"].get("failed") and half["peak RSS MB (serve)"] and f["peak RSS MB (serve)"]:
            out.append(f"- peak RSS MB (serve) with vector_dtype='float16': {fmt(half['peak RSS MB (serve)'])} = "
                       f"{half['peak RSS MB (serve)'] / f['peak RSS MB (serve)']:.2f}x the floor")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from {','.join(SYSTEMS)}")
    ap.add_argument("--queries", type=int, default=200, help="timed queries of each kind (after 10 warm-up ones)")
    ap.add_argument("--remember-calls", type=int, default=2000, help="remember() calls timed at most")
    ap.add_argument("--remember-seconds", type=float, default=20.0, help="time budget of the remember() sample")
    ap.add_argument("--rounds", type=int, default=1, help="serve and write phases repeated, system order rotated")
    ap.add_argument("--embedder", choices=("words", "random"), default="words")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds a child may take")
    ap.add_argument("--tmp", default=None, help="where the databases go (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the databases")
    ap.add_argument("--json", help="also write every figure to this file")
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child)
        return

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
    results = {}
    for n in sizes:
        res = run_size(n, runnable, args, args.tmp)
        results[n] = res
        print(report(n, res, runnable, args))
        print(goals(n, res, runnable), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(n): r for n, r in results.items()}, f, indent=1, default=str)


if __name__ == "__main__":
    if ROOT not in sys.path and "--child" not in sys.argv:
        sys.path.insert(0, ROOT)
    main()
