"""Whose memories a server request reaches: the user's name, checked, the defaults, and where
the ids a user chooses are stored (a user's sessions are theirs in the library itself).

Kept free of the server libraries, so that the ``vxmem`` command can name its server flags
without loading them, and Python code can read a served memory with the same names.
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_USER = "default"
DEFAULT_SESSION = "default"  # where a write that names no session goes, when the server has no --session
USER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}$"
SEPARATOR = "/"  # between a user's name (which never holds one) and an id they chose


def check_user_name(user: Any) -> str:
    """A user's name as the servers take it (:data:`USER_PATTERN`: no ``/``, which separates
    a user from an id they chose in the stored id)."""
    if not isinstance(user, str) or not re.fullmatch(USER_PATTERN, user):
        raise ValueError(f"user must be 1 to 128 letters, digits or ._@+- (starting with a letter or digit), "
                         f"got {user!r}")
    return user


def served_id(user: str, id: str) -> str:
    """The stored id of the id ``id`` that ``user`` chose in a served memory (``user/id``), so that
    two users may choose one id and neither learns that the other did."""
    return f"{check_user_name(user)}{SEPARATOR}{id}"
