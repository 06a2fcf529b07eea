"""A memory about to be stored, checked: what ``remember()`` makes of its arguments first.

Every argument is checked before anything is embedded or written, so bad input changes
nothing; the :class:`Draft` then carries the canonical values to the write.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple

import numpy as np

from ..core.checks import check_bool, check_choice, check_int, check_positive, check_session, check_text
from ..core.clock import TimeLike, to_epoch
from ..core.keys import K_SUPERSEDES, K_TURN, K_USER, KIND_PINNED, KIND_TURN, KINDS, TURN_LIMIT
from ..store.seam import MemoryStore, MemoryView, MemoryWrites, check_id, in_session, session_key
from .arguments import check_caller_metadata, check_user
from .bookkeeping import claim_turn, new_memory_id, refuse_taken, stamp
from .supersession import mark_superseded

# remember()'s arguments and their defaults, for remember_many()'s items.
REMEMBER_DEFAULTS: dict[str, Any] = {"session": None, "role": "user", "turn": None, "timestamp": None,
                                     "pinned": False, "kind": None, "metadata": None, "id": None, "ttl_days": None,
                                     "check": None, "user": None}
REMEMBER_ARGS = ("text", *REMEMBER_DEFAULTS)
# Texts per embedder call in remember_many(): an embedder's working memory (and the engine's
# float64 checks of what it returns) grows with one call's texts, about 12 KB a text, so a
# call of 200k memories embedded at once peaked at 2.6 GB (benchmarks/bench_remember_many.py).
EMBED_BATCH = 2048


class LateBits(NamedTuple):
    """A write's late-interaction token vectors, one per memory in order: the model's
    ``name``, each memory's ``own``, and ``read``, those of it read in ``context`` (the text
    of the turn :func:`~vxmem.memory.late_stage.write_contexts` says it follows; None where
    it follows none)."""

    name: str
    own: list[bytes]
    read: list[bytes | None]
    context: list[str | None]


class LateJob(NamedTuple):
    """A write's late-interaction encoding under way: ``job`` the worker's, ``contexts`` as
    :class:`LateBits` has them, and ``here`` the memories' own texts the writer encodes itself
    (none: the worker encodes them too, before the texts read in context)."""

    job: Future[list[bytes]]
    contexts: list[str | None]
    here: list[str]


class Draft(NamedTuple):
    """One memory's checked arguments: ``ttl`` in days (None: forever), ``ts`` in epoch
    seconds, ``metadata`` the caller's own keys, ``run_judge`` whether the contradiction
    judge sees it."""

    text: str
    session: str | None
    role: str
    kind: str
    turn: int | None
    ts: float
    metadata: dict[str, Any]
    user: str | None
    id: str | None
    ttl: float | None
    run_judge: bool

    @property
    def at(self) -> Any:
        """The session as the store names it: the user's own, when the memory has a user."""
        return in_session(self.session, self.user)


def ttl_for(kind: str, ttl_days: Any, ttl_map: dict[str, float | None]) -> float | None:
    """A memory's time to live in days: ``ttl_days`` (checked) if given, else its kind's;
    None (or infinity) means forever."""
    ttl = check_positive(ttl_days, "ttl_days", allow_inf=True) if ttl_days is not None else ttl_map.get(kind)
    return None if ttl is None or math.isinf(ttl) else ttl


def _kind_of(pinned: Any, kind: Any, turn: Any) -> tuple[str, int | None]:
    """The memory's kind and its checked turn number."""
    check_bool(pinned, "pinned")
    if kind is not None:
        check_choice(kind, "kind", KINDS)
    if pinned and kind not in (None, KIND_PINNED):
        raise ValueError(f"pinned=True stores a pinned fact; it cannot also be kind={kind!r}")
    kind = KIND_PINNED if pinned else (kind or KIND_TURN)
    if turn is not None:
        turn = check_int(turn, "turn", minimum=0, below=TURN_LIMIT)
        if kind != KIND_TURN:
            raise ValueError(f"turn numbers belong to turns, not to a {kind}")
    return kind, turn


def make_draft(text: Any, *, session: Any, role: Any, turn: Any, timestamp: TimeLike, pinned: Any, kind: Any,
               metadata: Any, id: Any, ttl_days: Any, check: Any, user: Any,
               ttl_map: dict[str, float | None], has_judge: bool) -> Draft:
    """``remember()``'s arguments, checked, as a :class:`Draft` (``ttl_map``: the memory's
    TTL per kind; ``has_judge``: whether it has a contradiction judge)."""
    check_text(text, "text")
    if not text.strip():
        raise ValueError("text must not be empty or only whitespace")
    session = check_session(session)
    check_text(role, "role")
    if not role:
        raise ValueError("role must be a non-empty str")
    kind, turn = _kind_of(pinned, kind, turn)
    ts = to_epoch(timestamp, "timestamp")
    meta = check_caller_metadata(metadata)
    user = check_user(user)
    if id is not None:
        check_id(id)
    ttl = ttl_for(kind, ttl_days, ttl_map)
    if check is not None:
        check_bool(check, "check")
    run_judge = check if check is not None else (has_judge and kind != KIND_TURN)
    if run_judge and not has_judge:
        raise ValueError("check=True needs a judge; pass judge= to ConversationMemory")
    return Draft(text=text, session=session, role=role, kind=kind, turn=turn, ts=ts, metadata=meta, user=user,
                 id=id, ttl=ttl, run_judge=bool(run_judge))


def embed_in_batches(store: MemoryStore, texts: list[str], batch: int = EMBED_BATCH) -> np.ndarray:
    """The texts' vectors, embedded ``batch`` at a time (outside the lock) into one array,
    so the peak memory of embedding is a batch's; an error in any batch raises before
    anything is written."""
    if len(texts) <= batch:
        return store.embed(texts)
    out: np.ndarray | None = None
    for start in range(0, len(texts), batch):
        vecs = store.embed(texts[start:start + batch])
        if out is None:
            out = np.empty((len(texts), vecs.shape[1]), dtype=vecs.dtype)
        elif vecs.shape[1] != out.shape[1]:
            raise ValueError(f"the embedder returned {out.shape[1]}-d vectors for texts 0 to {batch - 1} and "
                             f"{vecs.shape[1]}-d vectors for texts from {start}; expected one dimension")
        out[start:start + len(vecs)] = vecs
    assert out is not None
    return out


def _prepared(m: MemoryView, d: Draft, named: list[str]) -> tuple[str, dict[str, Any], list[str]]:
    """A draft's id, its metadata as stored, and the memories it supersedes: those the judge
    ``named`` that are still live (one a write meanwhile superseded or deleted is left as it is)."""
    live = [x for x in named if (p := m.memory_position(x)) is not None and not m.superseded[p]] if named else []
    meta = dict(d.metadata)
    meta.update(stamp(d.kind, d.session, d.role, d.ts, d.ttl))
    if d.user is not None:
        meta[K_USER] = d.user
    if live:
        meta[K_SUPERSEDES] = live
    return d.id or new_memory_id(), meta, live


def _insert(m: MemoryView, tx: MemoryWrites, d: Draft, new_id: str, meta: dict[str, Any], vec: np.ndarray, tokens: int,
            live: list[str], late: LateBits | None, i: int, written: dict[tuple[str, int], tuple[int, str]]) -> None:
    """Write draft ``i`` of a write, prepared, in ``tx``: its turn number, the document, its
    late-interaction token vectors (``late``), its supersession links. ``written`` maps the
    (session, number) of each turn this transaction wrote before it to (rowid, text)."""
    turn = None
    if d.kind == KIND_TURN:
        turn = meta[K_TURN] = claim_turn(m, tx, d.at, d.turn)
    tx.insert(new_id, d.text, meta, vec, tokens)
    key = session_key(d.at)
    if turn is not None:
        written[(key, turn)] = (tx.last_rowid, d.text)
    if late is not None:
        tx.put_late(late.name, late.own[i])
        before, read = _written_before(m, written, key, d.at, turn), late.read[i]
        if read is not None and before is not None and before[1] == late.context[i]:
            tx.put_late_context(late.name, before[0], read)  # read after the turn it does follow
    for old in live:
        mark_superseded(m, tx, old, new_id, d.ts)


def _written_before(m: MemoryView, written: dict[tuple[str, int], tuple[int, str]], key: str, session: Any,
                    turn: int | None) -> tuple[int, str] | None:
    """(rowid, text) of the live turn numbered ``turn - 1`` in the session (None: none)."""
    if turn is None:
        return None
    if (key, turn - 1) in written:
        return written[(key, turn - 1)]
    p = m.turn_at(m.session_code(session), float(turn - 1))
    return None if p < 0 else (int(m.rowid[p]), m.texts[p])


def drafts_user(drafts: Sequence[Draft]) -> str | tuple[str, ...] | None:
    """The one user every draft belongs to, or the users (a tuple) when each belongs to one
    (None: some belong to no one): the memories their writing reads are those users'."""
    users = {d.user for d in drafts}
    if None in users:
        return None
    return users.pop() if len(users) == 1 else tuple(sorted(u for u in users if u is not None))


def drafts_session(drafts: Sequence[Draft]) -> Any:
    """The one session every draft belongs to, as the store names it (None: several, or none named)."""
    sessions = {d.at for d in drafts}
    return sessions.pop() if len(sessions) == 1 else None


def write_draft(store: MemoryStore, d: Draft, vec: np.ndarray, tokens: int, named: list[str],
                late: LateBits | None = None) -> str:
    """Store one drafted memory (``remember()``'s write, with its late-interaction token
    vectors when ``late`` has them) and supersede what the judge ``named``, in one
    transaction; returns its id."""
    with store.locked(user=d.user, session=d.session if d.user is None else None) as m:
        if d.id is not None:
            refuse_taken(m, d.id)
        new_id, meta, live = _prepared(m, d, named)
        with store.transaction() as tx:
            _insert(m, tx, d, new_id, meta, vec, tokens, live, late, 0, {})
        return new_id


def write_drafts(store: MemoryStore, drafts: Sequence[Draft], vecs: np.ndarray, tokens: Sequence[int],
                 contradicted: Sequence[list[str]], late: LateBits | None = None) -> list[str]:
    """Store the drafted memories (with their vectors and token counts) and supersede what the
    judge said each contradicts, all in one transaction; returns their ids in order."""
    with store.locked(user=drafts_user(drafts)) as m:
        for d in drafts:
            if d.id is not None:
                refuse_taken(m, d.id)
        ready = [_prepared(m, d, named) for d, named in zip(drafts, contradicted)]
        written: dict[tuple[str, int], tuple[int, str]] = {}
        with store.transaction() as tx:
            for i, (d, (new_id, meta, live), vec, n) in enumerate(zip(drafts, ready, vecs, tokens)):
                _insert(m, tx, d, new_id, meta, vec, n, live, late, i, written)
        return [new_id for new_id, _, _ in ready]
