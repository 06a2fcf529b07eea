"""The collection's lexical search: BM25 in numpy over FTS5's postings first, FTS5 itself as fallback.

The FTS5 table ``vx_fts`` (see :mod:`vxmem.store.lexical.fts`) indexes each document's text plus
a scope token per session. The writer indexes new documents in batches
(:data:`~vxmem.store.sqlite.database.FTS_BATCH`), each batch in the transaction that brings the
unindexed ones to that many, and the rest when it closes or before FTS5 ranks a query
itself; vx_meta's ``fts_upto`` says which documents FTS5 holds, so a crash never leaves the
two apart (the next writable open indexes what a killed writer left).

:class:`LexicalSearch` scores with :class:`~vxmem.store.lexical.bm25.LexicalIndex` (FTS5's BM25,
computed in numpy over the postings held in memory) and leaves a query word that FTS5
splits into several tokens (a phrase) to FTS5, which it then asks with an over-fetch (a
read-only handle's FTS5 lacks the writer's last unindexed batch, under
:data:`~vxmem.store.sqlite.database.FTS_BATCH` documents).
"""

from __future__ import annotations

import functools
import math
import os
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from ..mirror.mirror import ANY_SESSION, Mirror, SessionArg
from ..sqlite.files import postings_path, spread_sample
from .bm25 import BM25AsOf, LexicalIndex
from .fts import BM25_SQL, fts_match, query_words

# What a lexical search returns: the best positions, their BM25, and a function giving
# the BM25 of any positions (0 where unknown; None when there is nothing to look up).
Scores = Callable[[np.ndarray], np.ndarray]
LexicalHits = tuple[np.ndarray, np.ndarray, Scores | None]
# BM25's statistics of a whole collection the mirror holds only a part of, for some terms, as
# of a moment (None: now): documents, their summed length, and each term's documents.
Corpus = Callable[[list[str], float | None], tuple[int, float, dict[str, int]]]


SAMPLE = 16  # documents a saved postings file must agree with FTS5 on (spread over it, and its newest)


def _sample(m: Mirror, upto: int) -> list[tuple[int, str]]:
    """(rowid, text) of up to :data:`SAMPLE` live documents of ``m`` with rowids up to ``upto``."""
    pos = np.flatnonzero(m.alive[: m.n] & (m.rowid[: m.n] <= upto))
    if pos.size == 0:
        return []
    return [(int(m.rowid[p]), m.texts[p]) for p in pos[spread_sample(pos.size, SAMPLE, 4)].tolist()]


class LexicalSearch:
    """The collection's lexical search over one connection: numpy BM25 first, FTS5 as fallback.

    Holds ``index``, the :class:`~vxmem.store.lexical.bm25.LexicalIndex` (None until the first
    search, or an open that took a saved file), and the document lengths of the current
    data version. ``version()`` names the data's version (it changes with
    every committed write), so lengths and document frequencies are counted once per
    version; ``path`` names the database in errors. ``indexed_upto`` (see
    :class:`LexicalIndex`) and ``index_pending()``, which makes FTS5 hold every document
    before it ranks a query itself (a writer's; None for a read-only handle), are the
    database's.
    """

    def __init__(self, conn: sqlite3.Connection, version: Callable[[], Any], path: str | None = None,
                 uid: str | None = None, indexed_upto: Callable[[], int | None] | None = None,
                 index_pending: Callable[[], None] | None = None, corpus: Corpus | None = None):
        self._conn = conn
        self._corpus = corpus
        self._version = version
        self._path = path
        self._uid = uid
        self._indexed_upto = indexed_upto
        self._index_pending = index_pending
        self.index: LexicalIndex | None = None
        self._lengths: tuple[Any, np.ndarray, float] | None = None  # (data version, lengths, their average)
        self._as_of: BM25AsOf | None = None  # the statistics as of a moment, for the same data version
        self._has_fts: bool | None = None

    def save(self, path: str, slack: int = 0) -> None:
        """Save the postings read so far beside the database (see :meth:`LexicalIndex.save`)."""
        if self.index is not None:
            self.index.save(postings_path(path), slack)

    def warm(self, m: Mirror) -> None:
        """Take the saved postings and count the document lengths now, when a saved file is
        there and good: an open pays for them (about 10 ms at 100k memories) instead of the
        first lexical search. Otherwise (no file, a file that fails its checks, a read that
        fails) nothing is read: the first search reads FTS5 as before."""
        if self.index is not None or self._path is None or not m.n or not os.path.exists(postings_path(self._path)):
            return
        try:
            if self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vx_fts'").fetchone():
                self._up_to_date(m, saved_only=True)
        except sqlite3.Error:
            return

    def _up_to_date(self, m: Mirror, saved_only: bool = False) -> tuple[LexicalIndex, Any, np.ndarray, float]:
        """The index with every document of ``m`` read, the data version, and that version's
        document lengths and their average (``saved_only``: see :meth:`LexicalIndex.sync`; the
        lengths are left uncounted when it read nothing)."""
        if self.index is None:
            self.index = LexicalIndex(self._conn, postings_path(self._path) if self._path else None, self._uid,
                                      self._indexed_upto)
        index = self.index
        # Rowids grow with position (rows are appended), so the last one is the largest.
        max_rowid = int(m.rowid[m.n - 1]) if m.n else 0
        key = (self._version(), id(m), m.n)
        if not index.sync(max_rowid, lambda upto: [(int(m.rowid[p]), m.texts[p]) for p in
                                                   np.flatnonzero(m.alive[: m.n] & (m.rowid[: m.n] > upto)).tolist()],
                          functools.partial(_sample, m), saved_only):
            return index, key, np.zeros(0), 0.0
        if self._lengths is None or self._lengths[0] != key:
            # Document lengths change only with writes: computed once per data version.
            self._lengths = (key, *index.doc_lengths(
                m.rowid[: m.n], m.live_positions(), (m.session[: m.n] >= 0).astype(np.float64), m.n_alive))
        return index, key, self._lengths[1], self._lengths[2]

    def _check_table(self) -> None:
        if self._has_fts is None:
            self._has_fts = bool(self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vx_fts'").fetchone())
        if not self._has_fts:
            raise ValueError(f"{self._path} predates the lexical index; open it once for writing to build it")

    def search(self, m: Mirror, query: str, positions: np.ndarray, k: int,
               session: SessionArg = ANY_SESSION, as_of: float | None = None) -> LexicalHits:
        """The ``k`` best BM25 matches among ``positions``, best first (exact), and a
        function giving the BM25 of any positions (0 where unknown).

        Normally FTS5's bm25 is computed in numpy over the FTS5 postings held in memory,
        with the filter applied exactly. When a query word is a phrase to FTS5, FTS5 ranks
        the matches itself (within ``session`` when the positions are one session's: the
        scope column makes that an index intersection), with an over-fetch that grows until
        ``k`` of them pass the rest of the filter or every match has been seen. (An SQL
        ``rowid IN`` restriction was 100x slower.)

        ``as_of`` scores as the collection stood at that moment: the numpy BM25 counts only
        the documents that existed then (no memory created later), so a recall as of a
        past moment scores as it did at that moment. FTS5's own ranking (the phrase case)
        always counts the whole collection.
        """
        expr = fts_match(query, session)
        if expr is None or positions.size == 0:
            return positions[:0], np.zeros(0), None
        self._check_table()
        allowed = np.zeros(m.n, dtype=bool)
        allowed[positions] = True
        fast = self.numpy_scores(m, query, allowed, k, as_of)
        if fast is not None:
            return fast
        if self._index_pending is not None:
            self._index_pending()  # FTS5 ranks what it holds: every document, then
        scope_n = m.n_alive if session is ANY_SESSION else max(m.session_positions(m.session_code(session)).size, 1)
        fetch = max(4 * k, int(math.ceil(k * scope_n / positions.size * 2)))
        while True:
            rows = self._conn.execute(
                f"SELECT rowid, {BM25_SQL} FROM vx_fts WHERE vx_fts MATCH ? ORDER BY rank LIMIT ?",
                (expr, fetch)).fetchall()
            pos = np.fromiter((m.pos_of_rowid.get(r, -1) for r, _ in rows), dtype=np.int64, count=len(rows))
            score = np.fromiter((s for _, s in rows), dtype=np.float64, count=len(rows))
            ok = pos >= 0
            ok[ok] = allowed[pos[ok]]
            if ok.sum() >= k or len(rows) < fetch:
                pos, score = pos[ok], score[ok]
                seen = dict(zip(pos.tolist(), score.tolist()))
                order = np.lexsort((pos, -score))[:k]
                return pos[order], score[order], lambda ps, seen=seen: np.array([seen.get(p, 0.0) for p in ps.tolist()])
            fetch *= 4

    def numpy_scores(self, m: Mirror, query: str, allowed: np.ndarray, k: int,
                     as_of: float | None = None) -> LexicalHits | None:
        """FTS5's BM25 over the in-memory postings: (positions, scores, the score of any
        allowed position), or None to let FTS5 rank (a query word FTS5 reads as a phrase,
        or a connection that cannot make TEMP tables). ``as_of``: statistics of the
        documents that existed at that moment."""
        try:
            index, key, doc_len, avgdl = self._up_to_date(m)
            n_rows, df_of = m.n_alive, None
            if self._corpus is not None:  # the mirror holds a part: the statistics are the whole collection's
                terms = index.phrases(query_words(query))
                if terms is None:
                    return None
                n_rows, total, dfs = self._corpus(terms, as_of)
                avgdl = total / max(n_rows, 1)
                df_of = lambda term, pos: dfs.get(term, 0)  # noqa: E731 - the shape search() takes
            elif as_of is not None and m.is_past(as_of):
                if self._as_of is None or self._as_of.key != key:
                    self._as_of = BM25AsOf(m, doc_len, key)
                past = self._as_of
                n_rows, avgdl = past.stats(as_of)
                df_of = functools.partial(past.df, as_of=as_of)
            res = index.search(query_words(query), m.rowid_pos, allowed, doc_len, avgdl, n_rows, k,
                               df_key=key, df_of=df_of)
        except sqlite3.Error:
            return None
        if res is None:
            return None
        return res[0], res[1], index.last_scores

