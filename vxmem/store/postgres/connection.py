"""A connection to PostgreSQL that reads and writes pgvector ``vector`` values as numpy arrays.

The vectors cross the wire in pgvector's binary form (a 2-byte dimension, 2 unused bytes,
big-endian float32s), so a stored float32 vector comes back bit for bit: the mirror and the
file store hold exactly the same numbers.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from ...core.errors import InvalidDatabaseError
from . import shown_url


class VectorLoader(Loader):
    """A ``vector`` value, in binary, as a float32 numpy array."""

    format = Format.BINARY

    def load(self, data: Any) -> np.ndarray:
        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


class VectorDumper(Dumper):
    """A 1-d numpy array as a ``vector`` value, in binary (``oid`` set per connection)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        a = np.asarray(obj, dtype=">f4")
        return struct.pack(">HH", a.shape[0], 0) + a.tobytes()


def connect(url: str) -> psycopg.Connection:
    """An autocommit connection to ``url`` (transactions are begun explicitly); a server that
    cannot be reached is an :class:`OSError` naming the URL without its password."""
    try:
        return psycopg.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise ConnectionError(f"cannot connect to {shown_url(url)}: {str(exc).strip()}") from None


def adapt_vectors(conn: psycopg.Connection, where: str) -> None:
    """Teach ``conn`` the ``vector`` type (the pgvector extension must exist by now)."""
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise InvalidDatabaseError(f"{where} has no pgvector extension (CREATE EXTENSION vector)")
    conn.adapters.register_dumper(np.ndarray, type("PgVectorDumper", (VectorDumper,), {"oid": info.oid}))
    conn.adapters.register_loader(info.oid, VectorLoader)
