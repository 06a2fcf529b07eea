"""Whose memories a server request reaches: the user's name, checked, and the defaults.

Kept free of the server libraries, so that the ``vxmem`` command can name its server flags
without loading them.
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_USER = "default"
DEFAULT_SESSION = "default"  # where a write that names no session goes, when the server has no --session
USER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}$"


def check_user_name(user: Any) -> str:
    """A user's name as the servers take it (:data:`USER_PATTERN`: no ``/``, which separates
    a user from their session in the stored session name)."""
    if not isinstance(user, str) or not re.fullmatch(USER_PATTERN, user):
        raise ValueError(f"user must be 1 to 128 letters, digits or ._@+- (starting with a letter or digit), "
                         f"got {user!r}")
    return user
