"""The whole collection's BM25 statistics, kept in PostgreSQL for the mirrors that hold a part of it.

A mirror of one user's rows (or of the rows nearest a query) must still score words as the file
store does, over every document: BM25's document count, average length and each term's
document frequency are the whole collection's. So every write keeps them in the database,
in its transaction: each document's FTS5 token count (``text_len``, plus its scope token in
``lex_len``), its creation time (``created``: a memory's time, -inf for a plain document)
and its distinct terms (``terms``, GIN-indexed); ``vx_terms`` counts each term's documents
and ``vx_meta`` the documents, their summed length and the latest creation time. A read as
of a past moment counts the documents created by then instead (a scan of the rows, paid only
by reads of the past). The tokens are FTS5's own (porter over unicode61), from a private
in-memory table, as the file store's are.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

import psycopg

from ...core.keys import NO_KIND
from ..lexical.fts import TOKENIZE
from ..mirror.columns import columns_of

Stats = tuple[int, float, dict[str, int]]  # documents, their summed length, each term's documents


class Tokenizer:
    """FTS5's tokens of texts, from a private in-memory table (one per process, behind a lock)."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.conn.execute(f"CREATE VIRTUAL TABLE vx_tok USING fts5(text, tokenize='{TOKENIZE}')")
        self.conn.execute("CREATE VIRTUAL TABLE vx_tok_i USING fts5vocab('vx_tok', 'instance')")
        self.lock = threading.Lock()

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's tokens, in order."""
        out: list[list[str]] = [[] for _ in texts]
        with self.lock:
            self.conn.executemany("INSERT INTO vx_tok (rowid, text) VALUES (?, ?)", enumerate(texts))
            try:
                for term, doc in self.conn.execute("SELECT term, doc FROM vx_tok_i ORDER BY doc, offset"):
                    out[doc].append(term)
            finally:
                self.conn.execute("DELETE FROM vx_tok")
        return out


TOKENIZER = Tokenizer()


def lexical_columns(text_len: int, meta: dict[str, Any]) -> tuple[int, float]:
    """A document's ``lex_len`` (its text's tokens and its scope token: FTS5's length) and
    ``created`` (the moment BM25 as of a past moment counts it from)."""
    code, ts, _, _, _, key = columns_of(meta)
    return text_len + (key is not None), (ts if code != NO_KIND else -math.inf)


def doc_columns(texts: Sequence[str], metas: Sequence[dict[str, Any]]) -> list[tuple[int, int, float, list[str]]]:
    """(text_len, lex_len, created, distinct terms) of each document."""
    out = []
    for toks, meta in zip(TOKENIZER.tokens(texts), metas):
        lex_len, created = lexical_columns(len(toks), meta)
        out.append((len(toks), lex_len, created, sorted(set(toks))))
    return out


def count_in(conn: psycopg.Connection, terms: list[str], docs: int, length: int, created: float) -> None:
    """Count ``docs`` documents (1; -1 counts one out; 0 changes a length) of ``length``
    tokens in all, holding ``terms``, into the statistics (inside the writer's transaction, in
    one statement: a round trip is most of what it costs)."""
    # max_created is a running maximum: a deletion leaves it (reads as of a moment then count, exactly).
    raise_max = docs >= 0 and math.isfinite(created)
    conn.execute(
        "WITH t AS (INSERT INTO vx_terms (term, df) SELECT unnest(%s::text[]), %s ON CONFLICT (term) "
        "DO UPDATE SET df = vx_terms.df + excluded.df) "
        "UPDATE vx_meta SET value = CASE key WHEN 'lex_docs' THEN (value::bigint + %s)::text "
        "WHEN 'lex_sum' THEN (value::bigint + %s)::text "
        "ELSE CASE WHEN %s AND value::float8 < %s THEN %s::text ELSE value END END "
        "WHERE key IN ('lex_docs', 'lex_sum', 'max_created')",
        (terms if docs else [], docs, docs, length, raise_max, created, created))


def stats(conn: psycopg.Connection, terms: Sequence[str], as_of: float | None) -> Stats:
    """The whole collection's BM25 statistics for ``terms``: as it is, or as of ``as_of``
    (the documents created by then) when a document was created after it."""
    meta: dict[str, str] = dict(conn.execute(
        "SELECT key, value FROM vx_meta WHERE key IN ('lex_docs', 'lex_sum', 'max_created')").fetchall())
    terms = sorted(set(terms))
    df: dict[str, int] = {}
    if as_of is None or as_of >= float(meta["max_created"]):
        if terms:
            df = dict(conn.execute("SELECT term, df FROM vx_terms WHERE term = ANY(%s)", (terms,)).fetchall())
        return int(meta["lex_docs"]), float(meta["lex_sum"]), {t: int(n) for t, n in df.items()}
    row = conn.execute("SELECT count(*), coalesce(sum(lex_len), 0) FROM vx_docs WHERE created <= %s",
                       (as_of,)).fetchone()
    assert row is not None
    if terms:
        df = dict(conn.execute("SELECT t, count(*) FROM vx_docs, unnest(terms) t WHERE terms && %s::text[] "
                               "AND created <= %s AND t = ANY(%s) GROUP BY t", (terms, as_of, terms)).fetchall())
    return int(row[0]), float(row[1]), {t: int(n) for t, n in df.items()}
