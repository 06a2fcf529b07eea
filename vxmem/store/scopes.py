"""The mirrors one handle keeps: the whole collection's, or (PostgreSQL, scope=user) one per user.

A handle on a file, or on PostgreSQL by default, keeps one :class:`ScopeState`: the mirror of
every document, its HNSW cache and its lexical search. A PostgreSQL handle opened with
``scope=user`` keeps one per user a read names, read from that user's rows alone (an index
scan) when first named and then followed through the change log, the least recently used
dropped past :data:`MAX_SCOPES`; the whole collection's is read only once a read names no
user. A recall across users reads a transient state of the rows nearest its query, which
nothing follows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..core.keys import K_SESSION, K_USER
from .lexical.search import LexicalSearch
from .mirror.columns import UserSession, codes_named, session_key
from .mirror.mirror import ANY_SESSION, Mirror
from .vector.hnsw import HnswCache

MAX_SCOPES = 1024  # users' mirrors a scoped handle keeps at most (the least recently read go first)


def scope_of(user: str | tuple[str, ...] | None, session: str | None, nearest: str | None) -> Any:
    """The scope a block reads: a user's (a str); a session's (("session", its key): with a user,
    that user's session, since a session belongs to its user); several users' (("users", each
    user), read for the one block); every row (None); or, ``nearest`` naming neither, the rows
    nearest a query (False)."""
    if isinstance(user, tuple):
        return ("users", *user)
    if session is not None:
        return ("session", session_key(session, user))
    return user if user is not None else False if nearest else None


def filter_scope(flt: dict[str, list[Any]] | None) -> dict[str, str]:
    """The ``locked()`` arguments of a checked filter that keeps one user's documents (a scoped
    handle then reads those rows alone; the filter still chooses among them). A filter on a
    session's name alone narrows nothing: it matches that name in every user's sessions."""
    values = (flt or {}).get(K_USER, ())
    if len(values) == 1 and isinstance(values[0], str):
        return {"user": values[0]}
    return {}


def filter_session(flt: dict[str, list[Any]] | None, keys: list[str]) -> Any:
    """The one session a checked filter keeps, as a search's session argument (``keys``: the
    mirror's session keys, by code): a user's session when it names one user and one session's
    name; the session of no user when it names a session's name no user has; else ANY_SESSION."""
    sessions, users = (flt or {}).get(K_SESSION, ()), (flt or {}).get(K_USER, ())
    if len(sessions) != 1 or not (sessions[0] is None or isinstance(sessions[0], str)):
        return ANY_SESSION
    if len(users) == 1 and isinstance(users[0], str):
        return UserSession(users[0], sessions[0])
    named = codes_named(keys, sessions[0])
    return sessions[0] if all(keys[c] == session_key(sessions[0]) for c in named) else ANY_SESSION


class ScopeState:
    """One mirror with its HNSW cache and lexical search (each bound to this state's mirror,
    so that a background build never reads another scope's)."""

    __slots__ = ("index", "lexical", "mirror")

    def __init__(self, mirror: Mirror, database: Any, lock: threading.RLock):
        self.mirror = mirror
        self.index = HnswCache(database, lambda: self.mirror, lock)
        self.lexical: LexicalSearch = database.new_lexical(lambda: self.mirror)

    def replace(self, mirror: Mirror, database: Any) -> None:
        """Hold ``mirror`` instead, read afresh: the index forgotten, the lexical search new."""
        self.index.reset()
        self.mirror = mirror
        self.lexical = database.new_lexical(lambda: self.mirror)


def follow_state(state: ScopeState, ops: list[Any]) -> None:
    """Apply a committed transaction's ops to a state's mirror and HNSW cache."""
    m = state.mirror
    added, removed = m.apply(ops)
    state.index.follow(added, removed)
    if m.needs_compaction():
        state.mirror = m.compacted()


class StateParts:
    """The parts of the state being read (the only one, but for a scoped PostgreSQL handle),
    as the engine's ``mirror``, ``index`` and ``lexical``."""

    _state: ScopeState

    @property
    def mirror(self) -> Mirror:
        return self._state.mirror

    @mirror.setter
    def mirror(self, m: Mirror) -> None:
        self._state.mirror = m

    @property
    def index(self) -> HnswCache:
        return self._state.index

    @property
    def lexical(self) -> LexicalSearch:
        return self._state.lexical

    @lexical.setter
    def lexical(self, search: LexicalSearch) -> None:
        self._state.lexical = search


class Scopes:
    """The states a scoped handle keeps, by scope (``None``: every user's), least recently read first."""

    def __init__(self, new_state: Callable[[Mirror], ScopeState], limit: int = MAX_SCOPES):
        self.states: OrderedDict[Any, ScopeState] = OrderedDict()
        self.new_state = new_state
        self.limit = limit

    def mirrors(self) -> dict[Any, Mirror]:
        """Each kept scope's mirror."""
        return {scope: state.mirror for scope, state in self.states.items()}

    def refresh(self, database: Any, token_counter: Callable[[str], int], scope: Any = False) -> Any:
        """Bring every kept scope up to what writers committed (one change-log read for them
        all), reading ``scope`` afresh in the same snapshot when it is not kept (False: none);
        the scope to read."""
        self._refresh(database, token_counter, scope)
        return scope

    def _refresh(self, database: Any, token_counter: Callable[[str], int], scope: Any) -> None:
        want = () if scope is False or scope in self.states else (scope,)
        got = database.refresh_scopes(self.mirrors(), want, token_counter)
        for scope, new in (got or {}).items():
            state = self.states.get(scope)
            if isinstance(new, Mirror):
                if state is None:
                    self.states[scope] = self.new_state(new)
                else:  # the same object: the engine may be reading it
                    state.replace(new, database)
            elif state is not None:
                follow_state(state, new)

    def use(self, scope: Any) -> ScopeState:
        """The state of ``scope`` (kept), now the most recently read; the least recently read
        past the limit are dropped. Several users' state is not kept: it is read for one block."""
        if isinstance(scope, tuple) and scope[0] == "users":
            return self.states.pop(scope)
        self.states.move_to_end(scope)
        while len(self.states) > self.limit:
            _, old = self.states.popitem(last=False)
            old.index.close()
        return self.states[scope]

    def close(self) -> None:
        """Close every kept state's HNSW cache."""
        for state in self.states.values():
            state.index.close()
