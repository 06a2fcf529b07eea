"""Connections to PostgreSQL that read and write pgvector ``vector`` values as numpy arrays.

The vectors cross the wire in pgvector's binary form (a 2-byte dimension, 2 unused bytes,
big-endian float32s), so a stored float32 vector comes back bit for bit: the mirror and the
file store hold exactly the same numbers. A handle opened with ``pool_size`` takes its
connections from a pool this process shares among its handles (:class:`SharedPool`).
"""

from __future__ import annotations

import struct
import threading
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


def adapt_vectors(conn: psycopg.Connection, where: str) -> int:
    """Teach ``conn`` the ``vector`` type (the pgvector extension must exist by now)."""
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise InvalidDatabaseError(f"{where} has no pgvector extension (CREATE EXTENSION vector)")
    register_vectors(conn, info.oid)
    return int(info.oid)


def register_vectors(conn: psycopg.Connection, oid: int) -> None:
    """Teach ``conn`` the ``vector`` type whose oid is known (no round trip)."""
    conn.adapters.register_dumper(np.ndarray, type("PgVectorDumper", (VectorDumper,), {"oid": oid}))
    conn.adapters.register_loader(oid, VectorLoader)


class SharedPool:
    """The connections the handles of one process keep to one database, at most ``size``
    (a :class:`psycopg_pool.ConnectionPool`, made by the first handle, closed with the last).

    A handle takes a connection for its outermost ``locked()`` block and gives it back at
    its end (every read and write of a handle happens inside one), so many handles, one per
    tenant say, share a few connections, and a server's connections to the database stay
    ``size`` per process whatever the handles."""

    def __init__(self, url: str, size: int, durability: str):
        from psycopg_pool import ConnectionPool

        self.oid: int | None = None  # the vector type's, once a handle has seen the extension
        self.durability = durability
        self.users = 0
        self.pool = ConnectionPool(url, min_size=1, max_size=size, kwargs={"autocommit": True},
                                   configure=self._configure, open=False, name="vxmem")
        try:
            self.pool.open(wait=True, timeout=30)
        except Exception as exc:  # noqa: BLE001 - psycopg_pool's PoolTimeout hides the server's message
            self.pool.close()
            raise ConnectionError(f"cannot connect to {shown_url(url)}: {str(exc).strip()}") from None

    def _configure(self, conn: psycopg.Connection) -> None:
        if self.oid is not None:
            register_vectors(conn, self.oid)
        if self.durability == "full":  # whatever the server's default: each COMMIT waits for its WAL flush
            conn.execute("SET synchronous_commit = on")

    def take(self) -> psycopg.Connection:
        """A connection (waiting for one when all ``size`` are taken), the vector type taught."""
        conn = self.pool.getconn()
        if self.oid is not None and conn.adapters.get_loader(self.oid, Format.BINARY) is None:
            register_vectors(conn, self.oid)  # made before the extension existed
        return conn

    def give(self, conn: psycopg.Connection) -> None:
        """Give ``conn`` back (one the server ended is replaced by the pool)."""
        self.pool.putconn(conn)


_POOLS: dict[tuple[str, str], SharedPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(url: str, size: int, durability: str) -> SharedPool:
    """This process's pool for ``url`` (its first handle's ``size``), counted as used once more."""
    with _POOLS_LOCK:
        pool = _POOLS.get((url, durability))
        if pool is None or pool.pool.closed:
            pool = _POOLS[(url, durability)] = SharedPool(url, size, durability)
        pool.users += 1
        return pool


def leave_pool(pool: SharedPool, url: str) -> None:
    """One handle less on ``pool``: the last one closes it."""
    with _POOLS_LOCK:
        pool.users -= 1
        if pool.users <= 0:
            _POOLS.pop((url, pool.durability), None)
            pool.pool.close()
