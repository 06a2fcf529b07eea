"""The lexical search of a PostgreSQL store: FTS5's tokens and BM25 over a private in-memory table.

Recall must score words exactly as the file store does, and the file store's BM25 is
SQLite FTS5's (porter stemming over unicode61). So a process on PostgreSQL keeps its own
in-memory SQLite FTS5 table as a cache of the mirror's texts, as it keeps the vectors: the
numpy postings (:class:`~vxmem.store.lexical.bm25.LexicalIndex`) are read from it at the first
search, as the file store's are read from its FTS5 table, and the phrase fallback, where FTS5
ranks a query itself, finds the table brought up to the mirror's live documents first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from ..lexical.fts import TOKENIZE, scope_token
from ..lexical.search import Corpus, LexicalSearch
from ..mirror.mirror import Mirror


class LocalFts:
    """An in-memory FTS5 table ``vx_fts`` (text, scope) of the mirror's live documents.

    ``mirror()`` gives the current mirror and ``version()`` the database's generation; the
    table is brought up to them only when FTS5 must rank a query itself. ``corpus``: the
    mirror holds a part of the collection, whose BM25 statistics this gives."""

    def __init__(self, mirror: Callable[[], Mirror], version: Callable[[], Any], corpus: Corpus | None = None):
        self.conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.conn.execute(f"CREATE VIRTUAL TABLE vx_fts USING fts5(text, scope, tokenize='{TOKENIZE}')")
        self.conn.execute("INSERT INTO vx_fts (vx_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')")
        self._mirror = mirror
        self._version = version
        self._scopes: dict[int, str] = {}  # rowid -> the scope token the table holds it with
        self._key: Any = None
        self._corpus = corpus

    def indexed_upto(self) -> int:
        """The rowid the table holds every live document up to (none above), once brought up
        to the mirror: the numpy postings read the table up to there and tokenise the rest.
        (Tokenising every text through FTS5's scratch table instead leaves that table slow
        for the few texts each later write adds.)"""
        self.index_pending()
        return max(self._scopes, default=0)

    def index_pending(self) -> None:
        """Bring the table to the mirror's live documents: the deleted ones out, the new ones
        in, the ones whose session moved in again with their new scope."""
        m = self._mirror()
        key = (self._version(), id(m), m.n)
        if key == self._key:
            return
        live = np.flatnonzero(m.alive[: m.n]).tolist()
        now = {int(m.rowid[p]): (p, scope_token(m.metas[p])) for p in live}
        gone = [r for r, s in self._scopes.items() if r not in now or now[r][1] != s]
        c = self.conn
        own = not c.in_transaction  # the postings read calls this inside a read transaction of their own
        if own:
            c.execute("BEGIN")
        c.executemany("DELETE FROM vx_fts WHERE rowid = ?", [(r,) for r in gone])
        for r in gone:
            del self._scopes[r]
        new = [(r, m.texts[p], s) for r, (p, s) in now.items() if r not in self._scopes]
        c.executemany("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)", new)
        if own:
            c.execute("COMMIT")
        self._scopes.update((r, s) for r, _, s in new)
        self._key = key

    def search(self) -> LexicalSearch:
        """The lexical search over this table."""
        return LexicalSearch(self.conn, self._version, None, None, self.indexed_upto, self.index_pending,
                             self._corpus)
