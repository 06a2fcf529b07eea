"""What an export reads of a PostgreSQL database: its documents, access log and counters, in one snapshot.

:class:`PgRows` is the :class:`~vxmem.store.portable.export.ExportRows` of a
:class:`~vxmem.store.postgres.database.PgDatabase`, so ``export()`` writes the same file from
either store, and a restore of it into either answers alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import psycopg


class Exported(Protocol):
    """What the export reads of its ``PgDatabase``."""

    @property
    def conn(self) -> psycopg.Connection: ...

    embedder: str | None
    dim: int | None
    token_counter: str | None

    def snapshot(self) -> AbstractContextManager[None]: ...


class PgRows:
    """A PostgreSQL database's rows for an export (see ``ExportRows``)."""

    def __init__(self, database: Exported):
        self.database = database
        self.conn = database.conn
        self.embedder, self.dim = database.embedder, database.dim

    def snapshot(self) -> AbstractContextManager[None]:
        return self.database.snapshot()

    def stored_counter(self) -> str | None:
        return self.database.token_counter

    def kind_counts(self) -> Iterable[tuple[Any, int]]:
        # json, not jsonb: it reads the stored text as it is (jsonb refuses some escapes JSON allows)
        return self.conn.execute("SELECT metadata::json ->> '_vx_kind', count(*) FROM vx_docs GROUP BY 1").fetchall()

    def counts(self) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM vx_counters), (SELECT count(*) FROM vx_access)").fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def rows_after(self, last: int, n: int) -> list[tuple[Any, ...]]:
        rows = self.conn.cursor(binary=True).execute(
            "SELECT rowid, id, text, metadata, vector, tokens FROM vx_docs WHERE rowid > %s ORDER BY rowid LIMIT %s",
            (last, n)).fetchall()
        return [(r, i, t, m, v.tobytes(), k) for r, i, t, m, v, k in rows]

    def accesses(self, first: int, last: int) -> Iterable[tuple[int, float]]:
        return self.conn.execute("SELECT doc, at FROM vx_access WHERE doc BETWEEN %s AND %s ORDER BY doc, at",
                                 (first, last)).fetchall()

    def counters(self) -> Iterable[tuple[str, int]]:
        return self.conn.execute("SELECT name, value FROM vx_counters ORDER BY name").fetchall()

    def api_keys(self) -> Iterable[Any]:
        """None: the servers' API keys live in a database file (``vx_keys``), not here yet."""
        return []
