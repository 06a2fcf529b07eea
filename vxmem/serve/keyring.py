"""The API keys of a database file, as ``vxmem keys`` manages them and a server checks them.

:class:`KeyRing` holds a connection of its own to the file, apart from the memory's, so that
``vxmem keys add`` and ``revoke`` work while a server has the file open, and the server sees
them at its next request: it looks each request's key up in the file. The table is the
store's (:mod:`vxmem.store.sqlite.keys`); a file of an older schema is brought up to date
first, by a writer's open. :class:`Principal` is whom a request acts for.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass

from ..core.errors import DatabaseLockedError, VectrixError
from ..store.sqlite import keys as sql
from ..store.sqlite.database import SCHEMA_VERSION, Database
from ..store.sqlite.files import read_only_uri
from ..store.sqlite.keys import KeyRecord
from .scope import check_user_name

PRINCIPAL = "vxmem.principal"  # the ASGI scope's key for whom an HTTP request acts (a Principal, or None)
BUSY_MS = 5_000  # how long a key's write waits for the memory's own writes to commit


@dataclass(frozen=True)
class Principal:
    """Whom a request acts for: ``user`` alone (a user's key), or any user if ``admin`` (an
    admin key, whose ``user`` is the one of requests that name none, or the server's token,
    with no user: the server's ``--user``)."""

    user: str | None
    admin: bool = False


TOKEN_HOLDER = Principal(None, admin=True)


def _schema_version(conn: sqlite3.Connection, path: str) -> int:
    try:
        meta = dict(conn.execute("SELECT key, value FROM vx_meta WHERE key IN ('format', 'schema_version')"))
    except sqlite3.DatabaseError:
        meta = {}
    if meta.get("format") != "vxmem":
        raise ValueError(f"{path} is not a vxmem database")
    return int(meta.get("schema_version", 0))


def has_keys(path: str | os.PathLike[str]) -> bool:
    """Whether the database file at ``path`` has keys (False for no file, or not a database)."""
    if not os.path.isfile(path):
        return False
    try:
        conn = sqlite3.connect(read_only_uri(os.fspath(path)), uri=True)
        try:
            return sql.any_key(conn)
        finally:
            conn.close()
    except sqlite3.Error:
        return False


class KeyRing:
    """The keys of the database file at ``path`` (created, with the memory's schema, if missing)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            Database(self.path).close()
        self.conn = self._connect()
        if _schema_version(self.conn, self.path) < SCHEMA_VERSION:
            self.conn.close()
            self._upgrade()
            self.conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # the memory's writer checkpoints the file
        conn.isolation_level = "DEFERRED"  # `with conn:` commits a write
        return conn

    def _upgrade(self) -> None:
        """A writer's open of the file, which brings its schema up to date."""
        try:
            Database(self.path).close()
        except DatabaseLockedError:
            raise ValueError(f"{self.path} is open in an older vxmem, which has no keys: stop it, or upgrade "
                             "it") from None
        except VectrixError as exc:
            raise ValueError(f"cannot open {self.path}: {' '.join(str(exc).split())}") from None

    def close(self) -> None:
        self.conn.close()

    def touch(self) -> None:
        """Read the file (its generation): an ``sqlite3.Error`` if it cannot be read."""
        self.conn.execute("SELECT value FROM vx_meta WHERE key = 'generation'").fetchone()

    def add(self, user: str, admin: bool = False) -> tuple[KeyRecord, str]:
        """A new key acting for ``user`` (for any user if ``admin``): its record and its token."""
        return sql.add(self.conn, check_user_name(user), admin, time.time())

    def revoke(self, id: str) -> bool:
        return sql.revoke(self.conn, id, time.time())

    def listed(self) -> list[KeyRecord]:
        return sql.listed(self.conn)

    def required(self) -> bool:
        """Whether a request must carry a key (one was ever made)."""
        return sql.any_key(self.conn)

    def principal(self, token: str) -> Principal | None:
        """Whom the key ``token`` acts for; None if it is no live key."""
        found = sql.find(self.conn, token)
        if found is None:
            return None
        return Principal(found.user, found.admin)
