"""``Client`` and ``AsyncClient``: the memory verbs of a ``vxmem serve`` over HTTP, with the
library's own results, so the same code runs in process or against a server.

    from vxmem.client import Client
    with Client("http://127.0.0.1:8765", key="vxk_...") as db:
        db.remember("I prefer dark mode", session="chat")
        db.recall("which theme?", session="chat")[0].text

Each verb sends one request (``httpx``: the ``server`` extra) and answers as ``Vectrix``'s
does: ids, :class:`~vxmem.store.results.Result` (its metadata with the reserved keys the
response names: kind, session, role, turn, time, supersession, the score's parts), ranked
:class:`~vxmem.memory.recall.MemoryResults`, a :class:`~vxmem.memory.context.ContextBlock`
(whose ``text`` is the server's), :class:`~vxmem.memory.supersession.HistoryEntry`. Sessions
and ids are as the key's user named them. A refusal raises what the library raises for it:
``KeyError`` (404), :class:`~vxmem.core.errors.ConflictError` (409), ``ValueError`` (422 and
other refusals), ``PermissionError`` (401, 403), :class:`ClientError` for the rest. Options a
verb passes on (``recall``'s, ``context``'s) are the endpoint's fields, checked by the server.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .core.errors import ConflictError, DiskFullError, VectrixError
from .core.keys import K_KIND, K_ROLE, K_SCORING, K_SESSION, K_SUPERSEDED_BY, K_TS, K_TURN
from .memory.context import ContextBlock
from .memory.recall import MemoryResults
from .memory.supersession import HistoryEntry
from .store.results import Result

__all__ = ["AsyncClient", "Client", "ClientError"]
INSTALL_HINT = "vxmem.Client needs httpx: pip install 'vxmem[server]'"


class ClientError(VectrixError):
    """The server answered with an error the library has no error of its own for (a 500, a 413,
    an unexpected status); ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Call:
    """One request: method, path, JSON body or query, and what makes the answer the library's."""

    method: str
    path: str
    body: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    parse: Any = None


def raise_for(status: int, payload: Any) -> None:
    """Raise what the library raises for a refusal the server answered with ``status``."""
    message = payload.get("message", "") if isinstance(payload, dict) else str(payload)
    if status == 404:
        raise KeyError(message)
    if status == 409:
        raise ConflictError(message)
    if status in (401, 403):
        raise PermissionError(message)
    if status == 507:
        raise DiskFullError(message)
    if status in (400, 415, 422):
        raise ValueError(message)
    raise ClientError(f"{status}: {message or 'the server failed'}", status)


def result_of(item: Mapping[str, Any]) -> Result:
    """A memory of a response as the library's :class:`Result`."""
    meta = dict(item.get("metadata") or {})
    for key, field in ((K_KIND, "kind"), (K_SESSION, "session"), (K_ROLE, "role"), (K_TURN, "turn"),
                       (K_TS, "created"), (K_SUPERSEDED_BY, "superseded_by")):
        if item.get(field) is not None:
            meta[key] = item[field]
    if "breakdown" in item:
        meta[K_SCORING] = dict(item["breakdown"])
    return Result(item["id"], item["text"], item.get("score"), meta)


def results_of(out: Mapping[str, Any], query: str) -> MemoryResults:
    return MemoryResults([result_of(x) for x in out["results"]], query=query, truncated=out["truncated"],
                         cut_count=out["cut_count"], token_estimate=out["token_estimate"],
                         token_budget=out["token_budget"])


class ServedBlock(ContextBlock):
    """A :class:`ContextBlock` whose text is the one the server assembled."""

    served_text: str = ""

    @property
    def text(self) -> str:
        return self.served_text


def block_of(out: Mapping[str, Any]) -> ContextBlock:
    block = ServedBlock(pinned=[result_of(x) for x in out["pinned"]], recent=[result_of(x) for x in out["recent"]],
                        recalled=[result_of(x) for x in out["recalled"]], token_budget=out["token_budget"],
                        tokens_used=out["tokens_used"], tokens_by_section=dict(out["tokens_by_section"]),
                        over_budget=out["over_budget"], cut_recent=out["cut_recent"],
                        cut_recalled=out["cut_recalled"], note=out["note"])
    block.served_text = out["text"]
    return block


def history_of(out: Mapping[str, Any]) -> list[HistoryEntry]:
    def when(text: str | None) -> datetime | None:
        return None if text is None else datetime.fromisoformat(text)

    return [HistoryEntry(id=e["id"], text=e["text"], kind=e["kind"], ts=datetime.fromisoformat(e["created_at"]),
                         live=e["live"], superseded_by=e["superseded_by"], superseded_at=when(e["superseded_at"]),
                         supersedes=list(e["supersedes"])) for e in out["entries"]]


def given(**fields: Any) -> dict[str, Any]:
    """The fields that were given (a None is the server's default)."""
    return {k: v for k, v in fields.items() if v is not None}


def time_of(value: Any) -> Any:
    """A time as the server takes it: epoch seconds, or ISO-8601 for a datetime."""
    return value.isoformat() if isinstance(value, datetime) else value


class Verbs:
    """The requests of the memory verbs, each a :class:`Call` for a client to send."""

    @staticmethod
    def remember(text: str, session: str | None = None, role: str = "user", turn: int | None = None,
                 timestamp: Any = None, pinned: bool = False, kind: str | None = None,
                 metadata: Mapping[str, Any] | None = None, id: str | None = None,
                 ttl_days: float | None = None) -> Call:
        body = given(text=text, session=session, role=role, turn=turn, timestamp=time_of(timestamp), kind=kind,
                     metadata=None if metadata is None else dict(metadata), id=id, ttl_days=ttl_days)
        return Call("POST", "/v1/remember", {**body, "pinned": pinned}, parse=lambda out: out["id"])

    @staticmethod
    def remember_many(memories: Iterable[str | Mapping[str, Any]], *, session: str | None = None,
                      role: str = "user", timestamp: Any = None) -> Call:
        items = [m if isinstance(m, str) else {k: time_of(v) for k, v in m.items()} for m in memories]
        return Call("POST", "/v1/remember_many", given(memories=items, session=session, role=role,
                                                       timestamp=time_of(timestamp)), parse=lambda out: out["ids"])

    @staticmethod
    def recall(query: str, session: str | None = None, limit: int = 10, **options: Any) -> Call:
        body = given(query=query, session=session, limit=limit, **{k: time_of(v) for k, v in options.items()})
        return Call("POST", "/v1/recall", body, parse=lambda out: results_of(out, query))

    @staticmethod
    def context(query: str, session: str | None = None, **options: Any) -> Call:
        body = given(query=query, session=session, **{k: time_of(v) for k, v in options.items()})
        return Call("POST", "/v1/context", body, parse=block_of)

    @staticmethod
    def feedback(id: str, outcome: str, correction: str | None = None, timestamp: Any = None) -> Call:
        return Call("POST", "/v1/feedback", given(id=id, outcome=outcome, correction=correction,
                                                  timestamp=time_of(timestamp)), parse=lambda out: out["id"])

    @staticmethod
    def forget(**scope: Any) -> Call:
        body = given(**{k: time_of(v) for k, v in scope.items()})
        if "kinds" in body:
            body["kinds"] = list(body["kinds"])
        return Call("POST", "/v1/forget", body, parse=lambda out: out["deleted"])

    @staticmethod
    def history(id: str, now: Any = None) -> Call:
        return Call("POST", "/v1/history", given(id=id, now=time_of(now)), parse=history_of)

    @staticmethod
    def turns(session: str | None = None, limit: int | None = None, now: Any = None) -> Call:
        return Call("POST", "/v1/turns", given(session=session, limit=limit, now=time_of(now)),
                    parse=lambda out: [result_of(x) for x in out["turns"]])

    @staticmethod
    def expire(now: Any = None) -> Call:
        return Call("POST", "/v1/expire", given(now=time_of(now)), parse=lambda out: out["deleted"])

    @staticmethod
    def get(id: str) -> Call:
        return Call("GET", f"/v1/memories/{id}", parse=result_of)

    @staticmethod
    def page(session: str | None, kind: str | None, limit: int, cursor: str | None) -> Call:
        return Call("GET", "/v1/memories", params=given(session=session, kind=kind, limit=limit, cursor=cursor),
                    parse=lambda out: out)

    @staticmethod
    def update_metadata(id: str, patch: Mapping[str, Any]) -> Call:
        return Call("PATCH", f"/v1/memories/{id}", {"metadata": dict(patch)},
                    parse=lambda out: dict(result_of(out).metadata))

    @staticmethod
    def delete(id: str) -> Call:
        return Call("DELETE", f"/v1/memories/{id}", parse=lambda out: out["deleted"])

    @staticmethod
    def consolidate(session: str | None = None, **options: Any) -> Call:
        body = given(session=session, **{k: time_of(v) for k, v in options.items()})
        return Call("POST", "/v1/consolidate", body, parse=lambda out: out)

    @staticmethod
    def stats() -> Call:
        return Call("GET", "/v1/stats", parse=lambda out: out)


def _headers(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return httpx


def answer_of(call: Call, response: Any) -> Any:
    """What the library returns for ``call``, from the server's ``response``."""
    try:
        payload = response.json()
    except ValueError:
        payload = response.text
    if response.status_code >= 400:
        raise_for(response.status_code, payload)
    return call.parse(payload)


def _sync(name: str) -> Any:
    """The blocking verb ``name`` of :class:`Client` (the signature of ``Verbs.<name>``)."""
    make = getattr(Verbs, name)

    @functools.wraps(make)
    def verb(self: Client, *args: Any, **kwargs: Any) -> Any:
        return self.send(make(*args, **kwargs))

    return verb


def _async(name: str) -> Any:
    """The awaitable verb ``name`` of :class:`AsyncClient`."""
    make = getattr(Verbs, name)

    @functools.wraps(make)
    async def verb(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
        return await self.send(make(*args, **kwargs))

    return verb


class Client:
    """The memory verbs of the server at ``url``, blocking; ``key``: a key from ``vxmem keys
    add`` (or the server's token). ``transport``: an ``httpx`` transport, for tests."""

    def __init__(self, url: str, key: str | None = None, *, timeout: float = 30.0, transport: Any = None):
        self.url = url.rstrip("/")
        self.http = _httpx().Client(base_url=self.url, headers=_headers(key), timeout=timeout, transport=transport)

    remember = _sync("remember")
    remember_many = _sync("remember_many")
    recall = _sync("recall")
    context = _sync("context")
    feedback = _sync("feedback")
    forget = _sync("forget")
    history = _sync("history")
    turns = _sync("turns")
    expire = _sync("expire")
    get = _sync("get")
    update_metadata = _sync("update_metadata")
    delete = _sync("delete")
    consolidate = _sync("consolidate")
    stats = _sync("stats")

    def send(self, call: Call) -> Any:
        return answer_of(call, self.http.request(call.method, call.path, json=call.body, params=call.params))

    def memories(self, session: str | None = None, kind: str | None = None, page: int = 100) -> Iterator[Result]:
        """Every memory of the user (of ``session``, of ``kind``), oldest first, ``page`` a request."""
        cursor = None
        while True:
            out = self.send(Verbs.page(session, kind, page, cursor))
            yield from (result_of(x) for x in out["memories"])
            cursor = out["next_cursor"]
            if cursor is None:
                return

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """:class:`Client`'s verbs as coroutines (``await db.recall(...)``)."""

    def __init__(self, url: str, key: str | None = None, *, timeout: float = 30.0, transport: Any = None):
        self.url = url.rstrip("/")
        self.http = _httpx().AsyncClient(base_url=self.url, headers=_headers(key), timeout=timeout,
                                         transport=transport)

    remember = _async("remember")
    remember_many = _async("remember_many")
    recall = _async("recall")
    context = _async("context")
    feedback = _async("feedback")
    forget = _async("forget")
    history = _async("history")
    turns = _async("turns")
    expire = _async("expire")
    get = _async("get")
    update_metadata = _async("update_metadata")
    delete = _async("delete")
    consolidate = _async("consolidate")
    stats = _async("stats")

    async def send(self, call: Call) -> Any:
        return answer_of(call, await self.http.request(call.method, call.path, json=call.body, params=call.params))

    async def memories(self, session: str | None = None, kind: str | None = None,
                       page: int = 100) -> AsyncIterator[Result]:
        """Every memory of the user (of ``session``, of ``kind``), oldest first, ``page`` a request."""
        cursor = None
        while True:
            out = await self.send(Verbs.page(session, kind, page, cursor))
            for x in out["memories"]:
                yield result_of(x)
            cursor = out["next_cursor"]
            if cursor is None:
                return

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
