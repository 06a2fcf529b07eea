"""The servers' API keys in the database file: the ``vx_keys`` table and its SQL, nothing else.

A key is a random token shown once, when it is made; the table keeps its SHA-256 alone, so a
copy of the file gives no one a working key. Each key acts for one user, or for any user if
it is an admin key. A revoked key keeps its row (``revoked``: when), so that the file still
says that keys are in use. Kept apart from the rest of the schema so that another store can
carry the same few statements.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from dataclasses import dataclass

DDL = (
    "CREATE TABLE IF NOT EXISTS vx_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, user TEXT NOT NULL, "
    "admin INTEGER NOT NULL, created REAL NOT NULL, revoked REAL)",
)
TOKEN_PREFIX = "vxk_"  # tells a vxmem key from another secret in a config file or a log
ID_LENGTH = 12  # hex digits of a key's id: the start of its hash, safe to show and to log
_COLUMNS = "id, hash, user, admin, created, revoked"


@dataclass(frozen=True)
class KeyRecord:
    """One key as stored: its id (public), the hash of its token, whom it acts for, when it
    was made and, if it was, revoked (epoch seconds)."""

    id: str
    hash: str
    user: str
    admin: bool
    created: float
    revoked: float | None

    def as_line(self) -> dict[str, object]:
        """The record as an export line carries it."""
        return {"type": "key", "id": self.id, "hash": self.hash, "user": self.user, "admin": self.admin,
                "created": self.created, "revoked": self.revoked}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _record(row: tuple[object, ...]) -> KeyRecord:
    id, digest, user, admin, created, revoked = row
    return KeyRecord(str(id), str(digest), str(user), bool(admin), float(created),  # type: ignore[arg-type]
                     None if revoked is None else float(revoked))  # type: ignore[arg-type]


def has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vx_keys'").fetchone() is not None


def add(conn: sqlite3.Connection, user: str, admin: bool, now: float) -> tuple[KeyRecord, str]:
    """A new key for ``user`` (an admin key if ``admin``), committed: its record and its token,
    which is not stored and cannot be had again."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(token)
    record = KeyRecord(digest[:ID_LENGTH], digest, user, admin, now, None)
    with conn:
        conn.execute(f"INSERT INTO vx_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                     (record.id, digest, user, int(admin), now, None))
    return record, token


def put(conn: sqlite3.Connection, records: list[KeyRecord]) -> None:
    """Store ``records`` as they are (a restore), inside the caller's transaction."""
    for ddl in DDL:
        conn.execute(ddl)
    conn.executemany(f"INSERT INTO vx_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                     [(r.id, r.hash, r.user, int(r.admin), r.created, r.revoked) for r in records])


def listed(conn: sqlite3.Connection) -> list[KeyRecord]:
    """Every key, revoked ones too, oldest first."""
    if not has_table(conn):
        return []
    return [_record(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM vx_keys ORDER BY created, id")]


def revoke(conn: sqlite3.Connection, id: str, now: float) -> bool:
    """Revoke the key ``id``, committed; False if there is no such key or it was revoked already."""
    with conn:
        done = conn.execute("UPDATE vx_keys SET revoked = ? WHERE id = ? AND revoked IS NULL", (now, id))
    return done.rowcount > 0


def find(conn: sqlite3.Connection, token: str) -> KeyRecord | None:
    """The live (unrevoked) key whose token is ``token``, else None."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM vx_keys WHERE hash = ? AND revoked IS NULL",
                       (hash_token(token),)).fetchone()
    return None if row is None else _record(row)


def any_key(conn: sqlite3.Connection) -> bool:
    """Whether a key was ever made (a revoked one counts: revoking every key does not open the
    server to requests without one)."""
    return has_table(conn) and conn.execute("SELECT 1 FROM vx_keys LIMIT 1").fetchone() is not None
