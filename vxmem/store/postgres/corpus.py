"""The whole collection's BM25 statistics, kept in PostgreSQL for the mirrors that hold a part of it.

A mirror of one user's rows (or of the rows nearest a query) must still score words as the file
store does, over every document: BM25's document count, average length and each term's
document frequency are the whole collection's. So every write keeps them in the database,
in its transaction: each document's FTS5 token count (``text_len``, plus its scope token in
``lex_len``), its creation time (``created``: a memory's time, -inf for a plain document)
and its distinct terms (``terms``, GIN-indexed); ``vx_terms`` counts each term's documents
and ``vx_meta`` the documents, their summed length and the latest creation time. A read as
of a past moment takes away the documents created after it (the rows created since: few for
the recent past). The tokens are FTS5's own (porter over unicode61), from a private
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


# The two statements that count a document in (or out of) the statistics, as CTEs that a
# writer's statement carries (a round trip is most of what they cost); the parameters are
# count_params()'s.
COUNTED = (
    "t AS (INSERT INTO vx_terms (term, df) SELECT unnest(%s::text[]), %s ON CONFLICT (term) "
    "DO UPDATE SET df = vx_terms.df + excluded.df), "
    "m AS (UPDATE vx_meta SET value = CASE key WHEN 'lex_docs' THEN (value::bigint + %s)::text "
    "WHEN 'lex_sum' THEN (value::bigint + %s)::text "
    "ELSE CASE WHEN %s AND value::float8 < %s THEN %s::text ELSE value END END "
    "WHERE key IN ('lex_docs', 'lex_sum', 'max_created'))")


def count_params(terms: list[str], docs: int, length: int, created: float) -> tuple[Any, ...]:
    """The parameters of :data:`COUNTED` that count ``docs`` documents (1; -1 counts one out;
    0 changes a length) of ``length`` tokens in all, holding ``terms``."""
    # max_created is a running maximum: a deletion leaves it (reads as of a moment then count, exactly).
    raise_max = docs >= 0 and math.isfinite(created)
    return terms if docs else [], docs, docs, length, raise_max, created, created


def count_in(conn: psycopg.Connection, terms: list[str], docs: int, length: int, created: float) -> None:
    """Count documents into the statistics (see :func:`count_params`), inside the writer's
    transaction, in one statement."""
    conn.execute(f"WITH {COUNTED} SELECT 1", count_params(terms, docs, length, created))


def stats(conn: psycopg.Connection, terms: Sequence[str], as_of: float | None) -> Stats:
    """The whole collection's BM25 statistics for ``terms``: as it is, or as of ``as_of`` (the
    documents created by then), in one statement (one snapshot). The past is the present less
    the documents created after it, so a read of the recent past (or of now, with a memory
    stamped in the future) reads those few rows, not every row created before it."""
    # Not prepared: a generic plan of "created > $1" scans every row; the value's plan reads the index.
    # max_created (never below the newest document's time): nothing created after, no row read.
    after = "false" if as_of is None else \
        "created > %s AND %s < (SELECT value::float8 FROM vx_meta WHERE key = 'max_created')"
    rows = conn.execute(
        f"WITH after AS MATERIALIZED (SELECT lex_len, terms FROM vx_docs WHERE {after}) "
        "SELECT '', (SELECT value::bigint FROM vx_meta WHERE key = 'lex_docs') - (SELECT count(*) FROM after), "
        "(SELECT value::bigint FROM vx_meta WHERE key = 'lex_sum') - (SELECT coalesce(sum(lex_len), 0) FROM after) "
        "UNION ALL SELECT v.term, v.df - (SELECT count(*) FROM after a WHERE v.term = ANY(a.terms)), 0 "
        "FROM vx_terms v WHERE v.term = ANY(%s)",
        ([] if as_of is None else [float(as_of)] * 2) + [sorted(set(terms))], prepare=False).fetchall()
    (docs, total), = [(int(n), int(t)) for term, n, t in rows if term == ""]
    return docs, float(total), {term: int(n) for term, n, _ in rows if term != ""}
