"""The PostgreSQL side of the store: a database many processes share, as the source of truth.

:class:`~vxmem.store.postgres.database.PgDatabase` does for a PostgreSQL database (with the
pgvector extension) what :class:`~vxmem.store.sqlite.database.Database` does for a file: the
schema made and versioned on open, transactions, counters, token vectors, the access log,
and the rows the engine's mirror loads and then follows through the change log, whichever
process wrote them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .database import PgDatabase

URL_SCHEMES = ("postgresql://", "postgres://")


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
