"""The verbs both servers serve, each within one user's scope, over an :class:`~vxmem.aio.AsyncVectrix`.

A request acts for exactly one user: the one it names, else the server's (``--user``). Every
verb passes that user to the library, which then reads, grades and deletes that user's
memories alone; a verb on a memory by id (``feedback``, ``history``) first checks that the
memory is the user's, and answers "no memory with id ..." when it is not, as when there is
none. Sessions are the user's own too, as in the library (a session belongs to its user), so
two users' sessions of one name never share turns, turn numbers, pinned facts or
contradictions, and Python reads user ``U``'s session ``S`` as ``session="S", user="U"``. So are the ids
a user chooses: id ``X`` of user ``U`` is stored as ``U/X`` (:func:`~vxmem.serve.scope.served_id`),
so that two users may choose one id, and neither learns that the other did; responses show
``X``. An id a request names is ``U/X`` when the user has a memory of that id, else ``X``
itself (the ids vxmem makes, and those written by ``Vectrix`` directly).

:func:`error_of` turns what a verb raised into (status, kind, one-line message): the REST
API answers with it and the MCP tools report it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ..aio import AsyncVectrix
from ..core.clock import to_epoch
from ..core.errors import ConflictError, DiskFullError, ReadOnlyError, one_line
from ..core.keys import (
    K_KIND,
    K_ROLE,
    K_SCORING,
    K_SESSION,
    K_SUPERSEDED_BY,
    K_TS,
    K_TURN,
    K_USER,
    KINDS,
    RESERVED_PREFIX,
)
from ..core.options import docs_of
from ..core.sentinels import MEMORY_SETTING
from ..memory.consolidation import Summarizer
from ..memory.request import RecallOptions, RecallRequest
from ..memory.supersession import HistoryEntry
from ..ranking.blend import Blend
from ..store.results import Result
from . import records as r
from . import schemas as m
from .keyring import Principal
from .scope import DEFAULT_SESSION, DEFAULT_USER, check_user_name, served_id

# The options a request passes on by name; its size (limit, token_budget) and the blend's
# hybrid_weight are read apart.
RECALL_OPTIONS = [name for name in docs_of(RecallOptions) if name not in ("limit", "token_budget", "hybrid_weight")]


class NotConfigured(Exception):
    """A verb the server was not set up for (consolidate without a summarizer)."""


@dataclass(frozen=True)
class ListQuery:
    """What a listing asks for: whose memories, of which session and kind, how many, after where."""

    user: str | None = None
    session: str | None = None
    kind: str | None = None
    limit: int = r.DEFAULT_PAGE
    cursor: str | None = None


@dataclass(frozen=True)
class Failure:
    """What a refused request answers: an HTTP status, a kind and one line."""

    status: int
    kind: str
    message: str


def errors_line(errors: Sequence[Mapping[str, Any]]) -> str:
    """Validation errors (pydantic's) as one line, ``field: what was wrong`` for each; never
    the input itself, which may be large or secret."""
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg", "invalid")))
    return one_line("; ".join(parts) or "invalid request")


def validation_message(exc: ValidationError) -> str:
    return errors_line(exc.errors(include_url=False, include_input=False))


def _as_user_named(exc: ConflictError, user: str) -> ConflictError:
    """``exc`` with the sessions and ids it names as ``user`` named them, not as they are stored."""
    return ConflictError(re.sub(r"(['\"])" + re.escape(f"{user}/"), r"\1", str(exc)))


def error_of(exc: BaseException) -> Failure:
    """The answer to a verb that raised ``exc``; anything unexpected is a bare 500."""
    if isinstance(exc, ValidationError):
        return Failure(422, "invalid", validation_message(exc))
    if isinstance(exc, NotConfigured):
        return Failure(409, "not_configured", one_line(str(exc)))
    if isinstance(exc, PermissionError):
        return Failure(403, "forbidden", one_line(str(exc)))
    if isinstance(exc, KeyError):
        return Failure(404, "not_found", one_line(exc.args[0] if exc.args else "not found"))
    if isinstance(exc, (ConflictError, ReadOnlyError)):
        return Failure(409, "conflict", one_line(str(exc)))
    if isinstance(exc, DiskFullError):
        return Failure(507, "disk_full", "the database's disk is full; nothing was written")
    if isinstance(exc, (ValueError, TypeError)):
        return Failure(422, "invalid", one_line(str(exc)))
    return Failure(500, "internal", "internal error")


def iso(ts: Any) -> str | None:
    return None if ts is None else datetime.fromtimestamp(float(ts), UTC).isoformat()


class MemoryService:
    """The verbs of the servers, scoped by user (see the module's docstring).

    :param db: the memory, awaitable.
    :param user: the user of requests that name none.
    :param session: the session of requests that name none (None: writes go to ``"default"``,
        reads span the user's sessions).
    :param summarizer: what ``consolidate`` summarises turns with (None: it is refused).
    """

    def __init__(self, db: AsyncVectrix, user: str | None = None, session: str | None = None,
                 summarizer: Summarizer | None = None):
        self.db = db
        self.summarizer = summarizer
        self.user = check_user_name(user or DEFAULT_USER)
        self.session = session
        self.only: str | None = None  # the one user a request may reach (a user's key), None: any

    # ------------------------------------------------------------------ scope

    def acting_for(self, who: Principal | None) -> MemoryService:
        """This service as ``who`` may use it: a user's key reaches that user alone, an admin
        key any user (its own by default), the server's token (or no key) any user."""
        if who is None or who.user is None:
            return self
        view = copy.copy(self)
        view.user = who.user
        view.only = None if who.admin else who.user
        return view

    def user_of(self, user: str | None) -> str:
        """The user a request acts for; one its key may not reach is refused (403)."""
        if self.only is not None and user is not None and user != self.only:
            raise PermissionError(f"this key acts for user {self.only!r} alone")
        return user or self.user

    def write_session(self, session: str | None) -> str:
        """The session a write goes to: the one it names, else the server's, else the default."""
        return session or self.session or DEFAULT_SESSION

    def inner_id(self, user: str, id: str) -> str:
        """The stored id of the id ``user`` chose."""
        return served_id(user, id)

    def outer_id(self, user: Any, id: str) -> str:
        """A stored id as its user sees it."""
        prefix = f"{user}/"
        return id[len(prefix):] if isinstance(user, str) and id.startswith(prefix) else id

    def outer_id_or_none(self, user: Any, id: Any) -> str | None:
        """:meth:`outer_id` of an id that may be None."""
        return self.outer_id(user, id) if isinstance(id, str) else None

    def named_ids(self, user: str, ids: Sequence[str]) -> list[str]:
        """Every stored id the ids a request names may be (the library keeps to the user's)."""
        return [i for id in ids for i in (self.inner_id(user, id), id)]

    async def stored(self, id: str, user: str) -> Result | None:
        """The memory stored as ``id`` if it is ``user``'s, else None."""
        try:
            found = await self.db.get(id)
        except KeyError:
            return None
        if found is None or K_KIND not in found.metadata or found.metadata.get(K_USER) != user:
            return None
        return found

    async def refuse_taken(self, user: str, ids: Sequence[str]) -> None:
        """Refuse ids that ``user`` has a memory of under the id itself (one ``Vectrix`` wrote for them):
        the new memory would answer to the same id."""
        for id in ids:
            if await self.stored(id, user) is not None:
                raise ConflictError(f"id already exists: {id!r}")

    async def owned(self, id: str, user: str) -> Result:
        """The memory ``user`` calls ``id`` (stored as ``U/id``, else as ``id``); ``KeyError`` as for
        no memory when the user has none of that id."""
        found = await self.stored(self.inner_id(user, id), user) or await self.stored(id, user)
        if found is None:
            raise KeyError(f"no memory with id {id!r}")
        return found

    # ------------------------------------------------------------------ shapes

    def memory_fields(self, r: Result) -> dict[str, Any]:
        meta = r.metadata
        user = meta.get(K_USER)
        return {"id": self.outer_id(user, r.id), "text": r.text, "kind": meta.get(K_KIND),
                "session": meta.get(K_SESSION),
                "role": meta.get(K_ROLE), "turn": meta.get(K_TURN), "created": meta.get(K_TS),
                "created_at": iso(meta.get(K_TS)),
                "superseded_by": self.outer_id_or_none(user, meta.get(K_SUPERSEDED_BY)),
                "metadata": {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)}}

    def memory_out(self, r: Result) -> m.MemoryOut:
        return m.MemoryOut(**self.memory_fields(r))

    def scored_out(self, r: Result) -> m.ScoredOut:
        return m.ScoredOut(**self.memory_fields(r), score=float(r.score or 0.0),
                           breakdown=dict(r.metadata.get(K_SCORING) or {}))

    def blend_of(self, body: m.RecallOptions) -> Blend | None:
        """The request's own blend (the server's, with what the request sets), or None."""
        given = body.blend_given()
        return Blend.of(given, base=self.db.sync.memory.blend) if given else None

    # ------------------------------------------------------------------ the verbs

    async def remember(self, body: m.RememberBody) -> m.RememberOut:
        user = self.user_of(body.user)
        args = body.model_dump(exclude={"user", "session"})
        if body.id is not None:
            await self.refuse_taken(user, [body.id])
            args["id"] = self.inner_id(user, body.id)
        try:
            id = await self.db.remember(**args, session=self.write_session(body.session), user=user)
        except ConflictError as exc:
            raise _as_user_named(exc, user) from None
        return m.RememberOut(id=self.outer_id(user, id))

    async def remember_many(self, body: m.RememberManyBody) -> m.RememberManyOut:
        user = self.user_of(body.user)
        items = []
        for item in body.memories:
            args: dict[str, Any] = {"text": item} if isinstance(item, str) else item.model_dump(exclude_unset=True)
            args["session"] = self.write_session(args.get("session") or body.session)
            if args.get("id") is not None:
                args["id"] = self.inner_id(user, args["id"])
            items.append({**args, "user": user})
        await self.refuse_taken(user, [i.id for i in body.memories if not isinstance(i, str) and i.id is not None])
        try:
            ids = await self.db.remember_many(items, role=body.role, timestamp=body.timestamp, user=user)
        except ConflictError as exc:
            raise _as_user_named(exc, user) from None
        return m.RememberManyOut(ids=[self.outer_id(user, i) for i in ids])

    def options_of(self, body: m.RecallOptions) -> dict[str, Any]:
        """recall()'s options as ``body`` sets them (every option of the declaration it has, but
        its size, which each verb reads itself): the session and ids made the user's, null
        ``min_relevance`` the server's floor, and the body's own blend."""
        user = self.user_of(body.user)
        given = {name: getattr(body, name) for name in RECALL_OPTIONS if name in type(body).model_fields}
        given.update(session=body.session or self.session, user=user, kinds=tuple(body.kinds),
                     exclude_ids=tuple(self.named_ids(user, body.exclude_ids)), blend=self.blend_of(body))
        if given["min_relevance"] is None:
            given["min_relevance"] = MEMORY_SETTING
        return given

    def request_of(self, body: m.RecallBody) -> RecallRequest:
        return RecallRequest(query=body.query, limit=body.limit, token_budget=body.token_budget,
                             **self.options_of(body))

    async def recall(self, body: m.RecallBody) -> m.RecallOut:
        request = self.request_of(body)
        found = await self.db.recall_request(request)
        return m.RecallOut(results=[self.scored_out(r) for r in found], truncated=found.truncated,
                           cut_count=found.cut_count, token_estimate=found.token_estimate,
                           token_budget=found.token_budget,
                           blend=(request.blend or self.db.sync.memory.blend).as_dict())

    async def context(self, body: m.ContextBody) -> m.ContextOut:
        block = await self.db.context(body.query, token_budget=body.token_budget, recent_turns=body.recent_turns,
                                      limit=body.limit, **self.options_of(body))
        return m.ContextOut(text=block.text, pinned=[self.memory_out(r) for r in block.pinned],
                            recent=[self.memory_out(r) for r in block.recent],
                            recalled=[self.scored_out(r) for r in block.recalled], token_budget=block.token_budget,
                            tokens_used=block.tokens_used, tokens_by_section=block.tokens_by_section,
                            over_budget=block.over_budget, cut_recent=block.cut_recent,
                            cut_recalled=block.cut_recalled, note=block.note)

    async def feedback(self, body: m.FeedbackBody) -> m.FeedbackOut:
        user = self.user_of(body.user)
        found = await self.owned(body.id, user)
        new = await self.db.feedback(found.id, body.outcome, correction=body.correction, timestamp=body.timestamp)
        return m.FeedbackOut(id=self.outer_id_or_none(user, new))

    async def forget(self, body: m.ForgetBody) -> m.CountOut:
        """Delete what the request selects; one that selects nothing narrower than every session
        (the server having no ``--session``) is refused unless it says ``all``."""
        if not (body.scoped() or self.session is not None or body.all):
            raise ValueError("forget names no scope: give session, ids, older_than, superseded or filter, or "
                             "all: true to delete the memories of the kinds (default: turns) of every session")
        user = self.user_of(body.user)
        ids = None if body.ids is None else self.named_ids(user, body.ids)
        args: dict[str, Any] = {"session": body.session or self.session, "ids": ids,
                                "superseded": body.superseded, "now": body.now, "filter": body.filter,
                                "user": user}
        if body.kinds is not None:
            args["kinds"] = tuple(body.kinds)
        args["older_than"] = self.age_of(body.older_than)
        return m.CountOut(deleted=await self.db.forget(**args))

    def age_of(self, older_than: float | str | None) -> float | datetime | None:
        """``older_than`` as the library takes it: days, or a time (given as ISO-8601)."""
        if isinstance(older_than, str):
            return datetime.fromtimestamp(to_epoch(older_than, "older_than"), UTC)
        return older_than

    async def history(self, body: m.HistoryBody) -> m.HistoryOut:
        user = self.user_of(body.user)
        found = await self.owned(body.id, user)
        entries = await self.db.history(found.id, now=body.now)
        mine = [e for e in entries if await self.stored(e.id, user) is not None]
        return m.HistoryOut(entries=[self.history_item(e, user) for e in mine])

    def history_item(self, e: HistoryEntry, user: str) -> m.HistoryItem:
        return m.HistoryItem(id=self.outer_id(user, e.id), text=e.text, kind=e.kind, created=e.ts.timestamp(),
                             created_at=e.ts.isoformat(), live=e.live,
                             superseded_by=self.outer_id_or_none(user, e.superseded_by),
                             superseded_at=None if e.superseded_at is None else e.superseded_at.isoformat(),
                             supersedes=[self.outer_id(user, i) for i in e.supersedes])

    async def turns(self, body: m.TurnsBody) -> m.TurnsOut:
        user = self.user_of(body.user)
        found = await self.db.turns(self.write_session(body.session), limit=body.limit, now=body.now, user=user)
        return m.TurnsOut(turns=[self.memory_out(r) for r in found])

    async def expire(self, body: m.ExpireBody) -> m.CountOut:
        return m.CountOut(deleted=await self.db.expire(now=body.now, user=self.user_of(body.user)))


    # ------------------------------------------------------------------ the memory served whole

    async def get_memory(self, id: str, user: str | None = None) -> m.MemoryOut:
        return self.memory_out(await self.owned(id, self.user_of(user)))

    async def list_memories(self, query: ListQuery) -> r.PageOut:
        """A page of the user's memories, oldest first (by creation time, then stored id), after
        ``query.cursor``: a cursor stays right whatever is written or deleted meanwhile."""
        user = self.user_of(query.user)
        flt: dict[str, Any] = {K_USER: user}
        if query.session is not None:
            flt[K_SESSION] = query.session
        if query.kind is not None:
            flt[K_KIND] = query.kind
        found = await self.db.call("scan", flt)
        ordered = sorted(((float(x.metadata.get(K_TS) or 0.0), x.id), x) for x in found)
        after = None if query.cursor is None else r.read_cursor(query.cursor)
        page = [(key, x) for key, x in ordered if after is None or key > after][: query.limit + 1]
        more = len(page) > query.limit
        page = page[: query.limit]
        return r.PageOut(memories=[self.memory_out(x) for _, x in page],
                         next_cursor=r.cursor_of(*page[-1][0]) if more else None)

    async def patch_memory(self, id: str, body: r.PatchBody) -> m.MemoryOut:
        user = self.user_of(body.user)
        reserved = sorted(k for k in body.metadata if k.startswith(RESERVED_PREFIX))
        if reserved:  # the memory's bookkeeping (kind, user, session, supersession) is the library's to set
            raise ValueError(f"metadata: {reserved[0]!r} is reserved (keys starting with {RESERVED_PREFIX!r})")
        found = await self.owned(id, user)
        await self.db.call("update_metadata", found.id, body.metadata)
        return self.memory_out(await self.db.get(found.id))

    async def delete_memory(self, id: str, user: str | None = None) -> m.CountOut:
        """Delete one memory of any kind, as ``forget(ids=...)`` does (a correction deleted
        gives the memory it replaced back its place)."""
        user = self.user_of(user)
        found = await self.owned(id, user)
        return m.CountOut(deleted=await self.db.forget(ids=[found.id], kinds=KINDS, user=user))

    async def consolidate(self, body: r.ConsolidateBody) -> r.ConsolidateOut:
        if self.summarizer is None:
            raise NotConfigured("this server has no summarizer: start it with --summarizer-model and --llm-url")
        user = self.user_of(body.user)
        older = self.age_of(body.older_than)
        report = await self.db.consolidate(self.write_session(body.session), self.summarizer,
                                           keep_recent=body.keep_recent, older_than=older,
                                           batch_turns=body.batch_turns, delete=body.delete, pinned=body.pinned,
                                           now=body.now, user=user)
        ids = [self.outer_id(user, i) for i in report.facts]
        return r.ConsolidateOut(session=report.session, batches=report.batches,
                                turns_consolidated=[self.outer_id(user, i) for i in report.turns_consolidated],
                                turns_deleted=report.turns_deleted, facts=ids,
                                turns_kept=[self.outer_id(user, i) for i in report.turns_kept],
                                batches_skipped=report.batches_skipped, tokens_before=report.tokens_before,
                                tokens_after=report.tokens_after, completed=report.completed)

    async def stats(self, user: str | None = None) -> r.StatsOut:
        """How many memories the user has, of each kind, in how many sessions, from when to when."""
        user = self.user_of(user)
        found = await self.db.call("scan", {K_USER: user})
        kinds = dict.fromkeys(KINDS, 0)
        sessions, times, superseded = set(), [], 0
        for x in found:
            meta = x.metadata
            kinds[meta.get(K_KIND)] = kinds.get(meta.get(K_KIND), 0) + 1
            sessions.add(meta.get(K_SESSION))
            times.append(float(meta.get(K_TS) or 0.0))
            superseded += meta.get(K_SUPERSEDED_BY) is not None
        return r.StatsOut(user=user, memories=len(times), kinds=kinds, sessions=len(sessions - {None}),
                          superseded=superseded, oldest=iso(min(times)) if times else None,
                          newest=iso(max(times)) if times else None)
