"""The PostgreSQL side of the store: a database many processes share, as the source of truth.

:class:`~vxmem.store.postgres.database.PgDatabase` does for a PostgreSQL database (with the
pgvector extension) what :class:`~vxmem.store.sqlite.database.Database` does for a file: the
schema made and versioned on open, transactions, counters, token vectors, the access log,
and the rows the engine's mirror loads and then follows through the change log, whichever
process wrote them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from .database import PgDatabase

URL_SCHEMES = ("postgresql://", "postgres://")
# The rows a mirror holds: ALL (the whole collection), one user's (a str), one session's
# (("session", its key), a user's session's key holding the user), or several users'
# (("users", each user), read for one block and not followed).
Scope = str | tuple[str, ...] | None
ALL: Scope = None
# The URL's parameters that are vxmem's, not libpq's (taken out before connecting):
# scope=user keeps one mirror per user a read names (see docs/POSTGRES.md), pool_size bounds
# the connections this process opens to the database, nearest is how many rows the
# approximate cross-user read takes from the HNSW index.
OPTIONS: dict[str, Any] = {"scope": ("all", "user"), "pool_size": int, "nearest": int}


def scope_parts(scope: Scope) -> tuple[str | None, str | None]:
    """The user and the session key whose rows a scope (not :data:`ALL`) holds (None: no such part)."""
    if isinstance(scope, str):
        return scope, None
    assert scope is not None
    return None, scope[1]


def split_options(url: str) -> tuple[str, dict[str, str | int]]:
    """``url`` without vxmem's own parameters, and those parameters, checked."""
    parts = urlsplit(url)
    ours: dict[str, str | int] = {}
    rest = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        kind = OPTIONS.get(key)
        if kind is None:
            rest.append((key, value))
        elif kind is int:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"the URL's {key} must be a positive whole number, not {value!r}")
            ours[key] = int(value)
        elif isinstance(kind, tuple) and value in kind:
            ours[key] = value
        else:
            raise ValueError(f"the URL's {key} must be one of {', '.join(map(str, kind))}, not {value!r}")
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def is_postgres_url(path: object) -> bool:
    """Whether ``path`` names a PostgreSQL database (``postgresql://...``) rather than a file."""
    return isinstance(path, str) and path.startswith(URL_SCHEMES)


def shown_url(url: str) -> str:
    """``url`` as errors and ``repr`` show it: without its password."""
    scheme, _, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    if not at or ":" not in auth:
        return url
    return f"{scheme}://{auth.split(':', 1)[0]}:***@{host}"


def open_postgres(url: str, read_only: bool, durability: str = "normal") -> PgDatabase:
    """Open the database at ``url`` (psycopg is imported here, so the file store never needs it)."""
    try:
        from .database import PgDatabase
    except ImportError as exc:
        raise ImportError(f"a PostgreSQL database needs psycopg ({exc}): pip install 'vxmem[postgres]'") from None
    return PgDatabase(url, read_only, durability)
