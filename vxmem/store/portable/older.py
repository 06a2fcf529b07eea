"""An export written before a session belonged to its user, as this vxmem restores it.

Up to export version 2 a session was one name across users, and the servers stored user
``U``'s session ``S`` as the session ``U/S``. Restored, each user's rows go to sessions of
their own, as a database file of that time is migrated on open
(:mod:`vxmem.store.sqlite.user_sessions`): ``U/S`` of user ``U`` becomes ``U``'s ``S``, and
each user's session gets a turn counter of its own, starting where the shared one stood.
"""

from __future__ import annotations

from collections import defaultdict

from ...core.keys import K_KIND, K_SESSION, K_USER
from ..mirror.columns import meta_session_key, session_key, session_per_user
from .reader import Item

SHARED_SESSIONS_UPTO = 2  # the last export version whose sessions were shared by their users


class UserSessions:
    """The moves of one restore: each memory line's (:meth:`item`), then each counter's (:meth:`counter`)."""

    def __init__(self) -> None:
        self.moved: dict[str, set[str]] = defaultdict(set)  # an old session key -> the users' sessions' keys

    def item(self, it: Item) -> Item:
        """``it`` with its session its user's own (the same item when it has no user)."""
        meta = it.meta
        if not isinstance(meta.get(K_USER), str) or (K_SESSION not in meta and K_KIND not in meta):
            return it
        new = session_per_user(meta) or meta
        self.moved[session_key(meta.get(K_SESSION))].add(meta_session_key(new))
        return it if new is meta else it._replace(meta=new)

    def counter(self, name: str, value: int) -> list[tuple[str, int]]:
        """The counter itself, and for a session's turn counter one for each user's session it numbered."""
        if not name.startswith("turn:"):
            return [(name, value)]
        return [(name, value)] + [("turn:" + key, value) for key in sorted(self.moved.get(name[5:], ()))]
