"""A persistent cache of embeddings and reranker scores, so a text is embedded once.

A database already keeps its documents' vectors (and records which embedder made them);
this cache is for the work that happens again: a second replay of the same conversation,
a dashboard reload, a benchmark rerun. It is one SQLite file, by default
``$VXMEM_CACHE_DIR/embeddings.sqlite`` (``~/.cache/vxmem/`` when the variable is unset),
holding vectors per (embedder name, text) and reranker scores per (reranker name, query,
text). Only embedders that declare a ``name`` are cached (the name is the key); an embedder
may opt out with ``cacheable = False`` (the hashing one does: it computes a vector about as
fast as the cache would read it).

:class:`CachedEmbedder` and :class:`CachedReranker` wrap an embedder or a reranker with it
and look like what they wrap (``name``, ``dim``, ``low_relevance``, ``rerank_by_default``
pass through, so a database opened through the wrapper records the same embedder name).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .embed import Embedder, embedder_name
from .rerank import Reranker, reranker_name

__all__ = ["EmbeddingCache", "CachedEmbedder", "CachedReranker", "default_cache_path", "open_cache"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vx_cache_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text TEXT NOT NULL, vec BLOB NOT NULL, "
    "PRIMARY KEY (model, text))",
    "CREATE TABLE IF NOT EXISTS scores (model TEXT NOT NULL, query TEXT NOT NULL, text TEXT NOT NULL, "
    "score REAL NOT NULL, PRIMARY KEY (model, query, text))",
)
_FORMAT = "vxmem-embedding-cache/1"
_CHUNK = 500  # texts per SELECT ... IN (...)


def default_cache_path() -> Path:
    """``$VXMEM_CACHE_DIR/embeddings.sqlite``, or ``~/.cache/vxmem/embeddings.sqlite``."""
    base = os.environ.get("VXMEM_CACHE_DIR", "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "vxmem"
    return root / "embeddings.sqlite"


class EmbeddingCache:
    """The cache file: vectors per (model, text), scores per (model, query, text).

    Safe to share between threads; several processes may use one file (SQLite WAL, and a
    row is only ever inserted, never changed).
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(os.fspath(path)).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self.conn = sqlite3.connect(os.fspath(self.path), check_same_thread=False, isolation_level=None,
                                        timeout=30)
            self.conn.execute("PRAGMA journal_mode = WAL")
            for ddl in _SCHEMA:
                self.conn.execute(ddl)
            self.conn.execute("INSERT OR IGNORE INTO vx_cache_meta (key, value) VALUES ('format', ?)", (_FORMAT,))
            fmt = self.conn.execute("SELECT value FROM vx_cache_meta WHERE key = 'format'").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"cache={os.fspath(self.path)!r} is not a vxmem embedding cache ({exc})") from None
        if fmt != _FORMAT:
            self.conn.close()
            raise ValueError(f"cache={os.fspath(self.path)!r} is not a vxmem embedding cache (format {fmt!r})")

    def vectors(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``texts`` under ``model`` (missing texts are left out)."""
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(texts))
        with self._lock:
            for i in range(0, len(uniq), _CHUNK):
                part = uniq[i: i + _CHUNK]
                rows = self.conn.execute(
                    f"SELECT text, vec FROM vectors WHERE model = ? AND text IN ({','.join('?' * len(part))})",
                    (model, *part)).fetchall()
                out.update((t, np.frombuffer(v, dtype=np.float32)) for t, v in rows)
        return out

    def put_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store vectors under ``model`` (a text already cached keeps its vector)."""
        rows = [(model, t, np.asarray(v, dtype=np.float32).tobytes()) for t, v in items]
        self._write("INSERT OR IGNORE INTO vectors (model, text, vec) VALUES (?, ?, ?)", rows)

    def scores(self, model: str, query: str, texts: Sequence[str]) -> dict[str, float]:
        """The cached scores of (``query``, text) pairs under ``model``."""
        out: dict[str, float] = {}
        uniq = list(dict.fromkeys(texts))
        with self._lock:
            for i in range(0, len(uniq), _CHUNK):
                part = uniq[i: i + _CHUNK]
                rows = self.conn.execute(
                    f"SELECT text, score FROM scores WHERE model = ? AND query = ? AND text IN "
                    f"({','.join('?' * len(part))})", (model, query, *part)).fetchall()
                out.update((t, float(s)) for t, s in rows)
        return out

    def put_scores(self, model: str, query: str, items: Iterable[tuple[str, float]]) -> None:
        """Store (``query``, text) scores under ``model``."""
        rows = [(model, query, t, float(s)) for t, s in items]
        self._write("INSERT OR IGNORE INTO scores (model, query, text, score) VALUES (?, ?, ?, ?)", rows)

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.executemany(sql, rows)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __repr__(self) -> str:
        return f"EmbeddingCache({os.fspath(self.path)})"


def open_cache(cache: Any) -> EmbeddingCache | None:
    """What a ``cache=`` argument means: None or True the default file, False no cache, a
    path that file, or an :class:`EmbeddingCache` as is."""
    if cache is False:
        return None
    if cache is None or cache is True:
        return EmbeddingCache(default_cache_path())
    if isinstance(cache, EmbeddingCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return EmbeddingCache(cache)
    raise TypeError(f"cache must be a path, True, False, None or an EmbeddingCache, not {type(cache).__name__}")


def cacheable(embedder: Any) -> bool:
    """Whether vectors of ``embedder`` may be cached: it declares a name and does not opt out."""
    return embedder_name(embedder) is not None and getattr(embedder, "cacheable", True) is not False


class CachedEmbedder:
    """``embedder`` with a memo in memory and in an :class:`EmbeddingCache` file.

    ``calls`` counts the calls that reached the wrapped embedder, ``embedded`` the texts it
    embedded. :meth:`warm` embeds what the cache lacks in batches, with a progress bar.
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache):
        name = embedder_name(embedder)
        if name is None:
            raise ValueError("only an embedder with a name can be cached (the name is the cache key)")
        self.inner, self.cache, self.name = embedder, cache, name
        self.calls = 0
        self.embedded = 0
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __getattr__(self, attr: str) -> Any:  # dim, low_relevance, rerank_by_default, ...
        if attr.startswith("_") or attr in ("inner", "cache", "name"):
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def warm(self, texts: Iterable[str], batch_size: int = 64, progress: bool | None = None) -> int:
        """Make sure every text is cached; returns how many had to be embedded."""
        from tqdm.auto import tqdm

        with self._lock:
            todo = self._fetch(list(dict.fromkeys(texts)))
            if not todo:
                return 0
            disable = (not progress) if progress is not None else None
            with tqdm(total=len(todo), desc=f"embedding ({self.name})", unit="text", disable=disable,
                      leave=False) as bar:
                for i in range(0, len(todo), batch_size):
                    self._embed(todo[i: i + batch_size])
                    bar.update(min(batch_size, len(todo) - i))
            return len(todo)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        with self._lock:
            missing = self._fetch(texts)
            if missing:
                self._embed(missing)
            if not texts:
                return np.asarray(self.inner([]), dtype=np.float32)
            return np.stack([self._memo[t] for t in texts])

    def _fetch(self, texts: list[str]) -> list[str]:
        """Bring cached vectors of ``texts`` into the memo; return the texts still missing."""
        need = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if need:
            self._memo.update(self.cache.vectors(self.name, need))
        return [t for t in need if t not in self._memo]

    def _embed(self, texts: list[str]) -> None:
        vecs = np.asarray(self.inner(texts), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"embedder returned shape {vecs.shape} for {len(texts)} texts; expected (n, d)")
        self.calls += 1
        self.embedded += len(texts)
        fresh = dict(zip(texts, vecs))
        self._memo.update(fresh)
        self.cache.put_vectors(self.name, fresh.items())

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {self.cache!r})"


class CachedReranker:
    """``reranker`` with its scores kept in an :class:`EmbeddingCache` file, per (query, text).

    ``calls`` counts the calls that reached the wrapped reranker.
    """

    def __init__(self, reranker: Reranker, cache: EmbeddingCache):
        self.inner, self.cache, self.name = reranker, cache, reranker_name(reranker)
        self.calls = 0

    def __getattr__(self, attr: str) -> Any:  # low_relevance, ...
        if attr.startswith("_") or attr in ("inner", "cache", "name"):
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        known = self.cache.scores(self.name, query, texts)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            scores = np.asarray(self.inner(query, missing), dtype=np.float64).reshape(-1)
            if scores.shape != (len(missing),):
                raise ValueError(f"reranker returned {scores.size} scores for {len(missing)} texts")
            self.calls += 1
            fresh = dict(zip(missing, scores.tolist()))
            self.cache.put_scores(self.name, query, fresh.items())
            known.update(fresh)
        return np.array([known[t] for t in texts], dtype=np.float64)

    def __repr__(self) -> str:
        return f"CachedReranker({self.inner!r}, {self.cache!r})"
