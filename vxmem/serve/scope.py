"""Whose memories a server request reaches: the user's name, checked, the defaults, and where
a user's sessions and chosen ids are stored.

Kept free of the server libraries, so that the ``vxmem`` command can name its server flags
without loading them, and Python code can read a served memory with the same names.
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_USER = "default"
DEFAULT_SESSION = "default"  # where a write that names no session goes, when the server has no --session
USER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}$"
SEPARATOR = "/"  # between a user's name (which never holds one) and their session or chosen id


def check_user_name(user: Any) -> str:
    """A user's name as the servers take it (:data:`USER_PATTERN`: no ``/``, which separates
    a user from their session in the stored session name)."""
    if not isinstance(user, str) or not re.fullmatch(USER_PATTERN, user):
        raise ValueError(f"user must be 1 to 128 letters, digits or ._@+- (starting with a letter or digit), "
                         f"got {user!r}")
    return user


def served_session(user: str, session: str) -> str:
    """The stored name of ``user``'s session ``session`` in a served memory (``user/session``).

    In the library a session is one conversation: one transcript, one turn counter, the facts a
    contradiction may replace, the turns a consolidation reads. Two users who name a session
    alike must not share any of them, so the servers keep each user's sessions apart in the
    file; Python reads them as ``db.recall(q, user=u, session=served_session(u, s))``.
    """
    return f"{check_user_name(user)}{SEPARATOR}{session}"


def served_id(user: str, id: str) -> str:
    """The stored id of the id ``id`` that ``user`` chose in a served memory (``user/id``), so that
    two users may choose one id and neither learns that the other did."""
    return f"{check_user_name(user)}{SEPARATOR}{id}"
