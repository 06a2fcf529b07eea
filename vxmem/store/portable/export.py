"""A database as portable JSON Lines, with every memory's history: the format and its export.

The format (``vxmem-export``, version :data:`EXPORT_VERSION`, documented in docs/EXPORT.md)
is one header line, one line per document in the order it was stored, one line per turn
counter, one line per API key of the servers (its hash, never a usable key), and an end line
with the counts and a SHA-256 of every line before it, so a truncated or damaged file is
told from a whole one. A memory's history lives in its metadata (reserved ``_vx_*`` keys:
feedback events, supersession links, consolidation provenance, TTL, pinned), which is
exported as stored; its access log rides on its line.

The export streams: it reads the database in chunks of :data:`CHUNK` rows inside one read
transaction (one committed state, however long it takes) and writes beside the target,
renaming the file into place once its end line is written. Restoring is
:mod:`vxmem.store.portable.restore`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

import numpy as np

from ...core.checks import check_bool
from ...core.keys import (
    K_CONSOLIDATED_FROM,
    K_EXPIRES,
    K_FEEDBACK,
    K_FEEDBACK_FOLDED,
    K_KIND,
    K_SESSION,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    K_TS,
    K_USER,
    KINDS,
)
from ...core.progress import Progress, Reporter
from ...core.version import __version__
from ..postgres import is_postgres_url, open_postgres
from ..sqlite import keys
from ..sqlite.database import Database
from ..sqlite.files import replaced_when_whole, snapshot_read
from ..sqlite.jsonio import loads_all
from ..sqlite.keys import KeyRecord

try:  # a dependency; json writes the same values
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

EXPORT_FORMAT = "vxmem-export"
# 2: key lines (a reader of version 1 would call them malformed); 3: a session belongs to its user
# (a reader of version 2 would merge users' sessions of one name; restore moves them apart)
EXPORT_VERSION = 3
SHARED_SESSIONS_UPTO = 2  # the last export version whose sessions were shared by their users
VECTOR_ENCODING = "float32-le-base64"  # each vector's float32 values, little-endian, base64
CHUNK = 2_000  # rows read per query
LINE_TYPES = ("header", "memory", "counter", "key", "end")
# What a file's end line counts, in this order; a restore counts the same while it reads.
END_COUNTS = ("documents", "memories", *KINDS, "superseded", "supersession_links", "feedback_events",
              "consolidated_facts", "expiring", "accesses", "vectors", "counters", "keys")
NEWER_COUNTS = ("keys",)  # counts a file of an older version leaves out: none of them

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps_line(obj: Mapping[str, Any]) -> bytes:
    """One line of an export: compact JSON, UTF-8, with its newline."""
    if orjson is not None:
        try:
            return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
        except (TypeError, orjson.JSONEncodeError):  # an int beyond 64 bits: json writes it exactly
            pass
    return (_ENCODER.encode(obj) + "\n").encode("utf-8")


def encode_vector(blob: bytes) -> str:
    """A stored float32 vector (SQLite's blob) as the file carries it."""
    return base64.b64encode(blob).decode("ascii")


def decode_vector(text: str, dim: int) -> np.ndarray:
    """The ``dim`` float32 values :func:`encode_vector` wrote (``ValueError`` if they are not)."""
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) != 4 * dim:
        raise ValueError(f"its vector holds {len(raw) / 4:g} values, the header says {dim}")
    vec = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(vec).all() or not vec.any():
        raise ValueError("its vector is all zero or not finite")
    return vec


def new_counts() -> dict[str, int]:
    return dict.fromkeys(END_COUNTS, 0)


def tally(counts: dict[str, int], meta: Mapping[str, Any], accesses: int, vector: bool) -> None:
    """Count one document into ``counts``: its kind and the history its metadata carries."""
    counts["documents"] += 1
    kind = meta.get(K_KIND)
    if kind in KINDS:
        counts["memories"] += 1
        counts[kind] += 1
    counts["superseded"] += meta.get(K_SUPERSEDED_BY) is not None
    counts["supersession_links"] += len(meta.get(K_SUPERSEDES) or ())
    folded = meta.get(K_FEEDBACK_FOLDED)
    counts["feedback_events"] += len(meta.get(K_FEEDBACK) or ()) + (int(folded.get("events", 0)) if folded else 0)
    counts["consolidated_facts"] += K_CONSOLIDATED_FROM in meta
    counts["expiring"] += K_EXPIRES in meta
    counts["accesses"] += accesses
    counts["vectors"] += vector


def memory_line(id: str, text: str, meta: dict[str, Any], tokens: int | None, accessed: list[float],
                vector: str | None) -> dict[str, Any]:
    """One document's line. ``kind``, ``session``, ``user`` and ``ts`` repeat what its
    metadata holds, for a reader of the file (a restore checks they agree)."""
    line: dict[str, Any] = {"type": "memory", "id": id, "text": text, "kind": meta.get(K_KIND),
                            "session": meta.get(K_SESSION), "user": meta.get(K_USER), "ts": meta.get(K_TS),
                            "tokens": tokens, "metadata": meta}
    if accessed:
        line["accessed"] = accessed
    if vector is not None:
        line["vector"] = vector
    return line


@dataclass
class ExportReport:
    """What an export wrote: the file, its counts (those of its end line) and its size."""

    path: str
    vectors: bool
    counts: dict[str, int] = field(default_factory=new_counts)
    bytes: int = 0

    def summary(self) -> str:
        """One line for a person: what the file holds."""
        c = self.counts
        return (f"{c['documents']} documents ({c['memories']} memories: {c['turn']} turns, {c['fact']} facts, "
                f"{c['pinned']} pinned), {c['feedback_events']} feedback events, {c['supersession_links']} "
                f"supersession links, {c['consolidated_facts']} consolidated facts, {c['counters']} turn "
                f"counters, vectors {'included' if self.vectors else 'left out'}; {self.bytes:,} bytes")


class _Writer:
    """Lines into a file, hashed and counted as they go, for the end line."""

    def __init__(self, out: IO[bytes]):
        self.out, self.sha, self.lines, self.bytes = out, hashlib.sha256(), 0, 0

    def write(self, obj: Mapping[str, Any]) -> None:
        data = dumps_line(obj)
        self.sha.update(data)
        self.out.write(data)
        self.lines += 1
        self.bytes += len(data)

    def end(self, counts: dict[str, int]) -> None:
        data = dumps_line({"type": "end", "lines": self.lines, "counts": counts, "sha256": self.sha.hexdigest()})
        self.out.write(data)
        self.bytes += len(data)


class ExportRows(Protocol):
    """What an export reads of a database, all inside one ``snapshot()``: a file's
    (:class:`SqliteRows`) or a PostgreSQL database's."""

    embedder: str | None
    dim: int | None

    def snapshot(self) -> AbstractContextManager[None]:
        """One committed state for every read inside."""
        ...

    def stored_counter(self) -> str | None:
        """The token counter whose counts the rows hold (None: none)."""
        ...

    def kind_counts(self) -> Iterable[tuple[Any, int]]:
        """(the ``_vx_kind`` of the metadata, how many documents have it)."""
        ...

    def counts(self) -> tuple[int, int]:
        """How many counters, and how many recorded accesses."""
        ...

    def rows_after(self, last: int, n: int) -> list[tuple[Any, ...]]:
        """Up to ``n`` documents with rowids above ``last``, in rowid order: (rowid, id, text,
        metadata JSON, float32 vector bytes, stored token count)."""
        ...

    def accesses(self, first: int, last: int) -> Iterable[tuple[int, float]]:
        """(rowid, moment) of every recorded access of the rowids in [first, last], in order."""
        ...

    def counters(self) -> Iterable[tuple[str, int]]:
        """Every counter's (name, value), by name."""
        ...

    def api_keys(self) -> Iterable[KeyRecord]:
        """The servers' API keys, oldest first (a store without them: none)."""
        ...


class SqliteRows:
    """A database file's :class:`ExportRows`."""

    def __init__(self, database: Database):
        self.database = database
        self.conn = database.conn
        self.embedder, self.dim = database.embedder, database.dim
        self.access = "vx_access" in {r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}

    def snapshot(self) -> AbstractContextManager[None]:
        return snapshot_read(self.conn)

    def stored_counter(self) -> str | None:
        return self.database.token_counter if self.database.schema_version >= 5 else None

    def kind_counts(self) -> Iterable[tuple[Any, int]]:
        return self.conn.execute("SELECT json_extract(metadata, '$._vx_kind'), count(*) FROM vx_docs GROUP BY 1")

    def counts(self) -> tuple[int, int]:
        counters = self.conn.execute("SELECT count(*) FROM vx_counters").fetchone()[0]
        return counters, self.conn.execute("SELECT count(*) FROM vx_access").fetchone()[0] if self.access else 0

    def rows_after(self, last: int, n: int) -> list[tuple[Any, ...]]:
        tokens = "tokens" if self.database.schema_version >= 5 else "NULL"
        return self.conn.execute(f"SELECT rowid, id, text, metadata, vector, {tokens} FROM vx_docs WHERE rowid > ? "
                                 "ORDER BY rowid LIMIT ?", (last, n)).fetchall()

    def accesses(self, first: int, last: int) -> Iterable[tuple[int, float]]:
        if not self.access:
            return []
        return self.conn.execute("SELECT doc, at FROM vx_access WHERE doc BETWEEN ? AND ? ORDER BY doc, at",
                                 (first, last))

    def counters(self) -> Iterable[tuple[str, int]]:
        return self.conn.execute("SELECT name, value FROM vx_counters ORDER BY name")

    def api_keys(self) -> Iterable[KeyRecord]:
        return keys.listed(self.conn)


def header_line(database: ExportRows, vectors: bool) -> dict[str, Any]:
    """The header: the format, the embedder and dimension of the stored vectors, the token
    counter of the stored counts, and what the file holds (counted in SQL: one pass)."""
    counts = {"documents": 0, "memories": 0, **dict.fromkeys(KINDS, 0)}
    for kind, n in database.kind_counts():
        counts["documents"] += n
        if kind in KINDS:
            counts[kind] = n
            counts["memories"] += n
    counts["counters"], counts["accesses"] = database.counts()
    return {"type": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION, "written_by": f"vxmem {__version__}",
            "embedder": database.embedder, "dim": database.dim, "vectors": VECTOR_ENCODING if vectors else None,
            "token_counter": database.stored_counter(), "counts": counts}


def _rows(database: ExportRows) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], list[float]]]:
    """Every document in rowid order, :data:`CHUNK` at a time: its row (rowid, id, text,
    metadata, vector, tokens), its metadata read, its access times."""
    last = 0
    while True:
        rows = database.rows_after(last, CHUNK)
        if not rows:
            return
        times: dict[int, list[float]] = {}
        for doc, at in database.accesses(rows[0][0], rows[-1][0]):
            times.setdefault(doc, []).append(at)
        for row, meta in zip(rows, loads_all([r[3] for r in rows])):
            yield row, meta, times.get(row[0], [])
        last = rows[-1][0]


def _write_all(database: ExportRows, out: IO[bytes], vectors: bool, report: ExportReport, progress: Progress) -> None:
    writer = _Writer(out)
    header = header_line(database, vectors)
    writer.write(header)
    counts = report.counts
    bar = Reporter(progress, header["counts"]["documents"], "exporting", unit="doc")
    try:
        for (_, id, text, _, blob, tokens), meta, accessed in _rows(database):
            writer.write(memory_line(id, text, meta, tokens, accessed, encode_vector(blob) if vectors else None))
            tally(counts, meta, len(accessed), vectors)
            bar.update()
    finally:
        bar.close()
    for name, value in database.counters():
        writer.write({"type": "counter", "name": name, "value": value})
        counts["counters"] += 1
    for record in database.api_keys():
        writer.write(record.as_line())
        counts["keys"] += 1
    writer.end(counts)
    report.bytes = writer.bytes


def export_database(database: Database | ExportRows, path: str | os.PathLike[str], *, vectors: bool = False,
                    progress: Progress = None) -> ExportReport:
    """Write every document of ``database`` (with its history, and its vector if ``vectors``)
    to ``path`` in the export format, from one committed state; return what was written.

    The file is written beside ``path`` and renamed into place when whole, so a failed
    export leaves no file that looks like one. The caller holds the handle's lock.
    """
    check_bool(vectors, "vectors")
    target = os.fspath(path)
    tmp = target + ".tmp"
    report = ExportReport(path=target, vectors=vectors)
    rows = SqliteRows(database) if isinstance(database, Database) else database
    with replaced_when_whole(tmp, target), rows.snapshot(), open(tmp, "wb") as out:
        _write_all(rows, out, vectors, report, progress)
    return report


def export_file(db_path: str | os.PathLike[str], path: str | os.PathLike[str], *, vectors: bool = False,
                progress: Progress = None) -> ExportReport:
    """Export the database file at ``db_path`` to ``path`` without opening it as a collection:
    read-only, so a writer may keep it open meanwhile, and no embedder or mirror is needed.
    ``db_path`` may be a ``postgresql://`` URL: that database is read the same way."""
    if is_postgres_url(db_path):
        assert isinstance(db_path, str)
        pg = open_postgres(db_path, True)
        try:
            return export_database(pg.export_rows(), path, vectors=vectors, progress=progress)
        finally:
            pg.close()
    database = Database(os.fspath(db_path), True)
    try:
        return export_database(database, path, vectors=vectors, progress=progress)
    finally:
        database.close()
