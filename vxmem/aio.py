"""AsyncVectrix: the spec's verbs, awaitable, for asyncio code and the servers.

    from vxmem import AsyncVectrix
    async with AsyncVectrix("chat.vxdb") as db:
        await db.remember("I prefer dark mode", session="alice")
        hits = await db.recall("which theme?", session="alice")

Each verb runs :class:`~vxmem.vectrix.Vectrix`'s on a worker thread, never on the event loop:
model inference and SQLite work would otherwise stall every other task. The calls keep the
order they were made in, as if awaited one after another: a write starts once every call made
before it has finished, and a read once every write made before it has (reads made between
two writes run side by side, on up to ``readers`` threads). Writes run on one dedicated
thread, so the handle's single writer stays single. ``asyncio.gather`` of many calls
therefore returns what the same calls made in order would have.

Two exceptions keep reads from waiting on a caller's model: a remember that runs the
contradiction judge (a callable, perhaps a network model with its timeout and retries), and a
consolidate (which runs the summarizer, as long), are still writes to every later write, but
reads made after them do not wait for them: they run at once and see what is stored by then
(a consolidation's batches land one transaction each).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from .core.checks import check_limit
from .core.clock import TimeLike
from .core.errors import VectrixError
from .core.keys import FORGET_KINDS, KIND_TURN
from .core.options import as_kwargs, takes
from .core.sentinels import AnySession
from .memory.consolidation import ConsolidationReport, Summarizer
from .memory.context import ContextBlock
from .memory.recall import MemoryResults
from .memory.request import RecallOptions, RecallRequest
from .memory.supersession import HistoryEntry
from .models.embed import EmbedderArg
from .store.results import Result
from .vectrix import Vectrix

T = TypeVar("T")

# The verbs that write, and so wait for every call before them; every other verb reads.
WRITES = frozenset({"remember", "remember_many", "feedback", "forget", "consolidate", "expire", "add", "delete",
                    "update_metadata"})


def check_readers(readers: Any) -> int:
    """How many reads may run at once: ``readers``, or the cores (at most 4) when None."""
    return min(4, os.cpu_count() or 1) if readers is None else check_limit(readers, "readers")


class CallOrder:
    """Runs calls on worker threads in the order they were made: a write waits for every
    earlier call, a read for every earlier write. Used from one event loop."""

    def __init__(self, readers: int):
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vxmem-writer")
        self.readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="vxmem-reader")
        self.last_write: asyncio.Future[None] | None = None
        self.read_after: asyncio.Future[None] | None = None  # the last write a read waits for
        self.reads: list[asyncio.Future[None]] = []
        self.pending: set[asyncio.Future[None]] = set()  # every call admitted and not yet done
        self.closed = False

    def admit(self, write: bool, judged: bool = False) -> tuple[list[asyncio.Future[None]], asyncio.Future[None]]:
        """What this call waits for, and the future that says it is done. Runs without an
        await, so calls are admitted exactly in the order they were made; none once closing.
        A ``judged`` write (one that calls the judge) is waited for by later writes only:
        the reads made after it keep the reads made before it company."""
        if self.closed:
            raise VectrixError("this AsyncVectrix is closed")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.add(done)
        done.add_done_callback(self.pending.discard)
        last = self.last_write if write else self.read_after
        waits = [] if last is None or last.done() else [last]
        if write:
            waits += [f for f in self.reads if not f.done()]
            self.last_write = done
            if not judged:  # a later read waits for this write; a later write still waits for every read
                self.read_after, self.reads = done, []
        else:
            if len(self.reads) >= 64:  # drop the finished ones now and then
                self.reads = [f for f in self.reads if not f.done()]
            self.reads.append(done)
        return waits, done

    async def run(self, write: bool, fn: Callable[[], T], judged: bool = False) -> T:
        """``fn()`` on a worker thread, once the calls it must follow are done."""
        waits, done = self.admit(write, judged)
        loop = asyncio.get_running_loop()

        def release() -> None:
            if not done.done():
                done.set_result(None)

        def finish(_: Any) -> None:  # on the worker thread, or at once if cancelled before it started
            try:
                loop.call_soon_threadsafe(release)
            except RuntimeError:  # the loop is closed: no one is left to wait
                pass

        try:
            if waits:
                await asyncio.wait(waits)  # never cancels what it waits for
            work = (self.writer if write else self.readers).submit(fn)
        except BaseException as exc:  # cancelled while waiting: done once what it waited for is, keeping the order
            if waits:
                asyncio.ensure_future(asyncio.wait(waits)).add_done_callback(finish)
            else:
                release()
            if isinstance(exc, RuntimeError) and self.closed:  # close() shut the workers while it waited
                raise VectrixError("this AsyncVectrix was closed before the call ran") from None
            raise
        # Done when the thread is, even if the caller stops waiting: the next write must not overlap it.
        work.add_done_callback(finish)
        return await asyncio.wrap_future(work)

    async def drain(self) -> None:
        """Refuse new calls, then wait until every call admitted before is done."""
        self.closed = True
        while self.pending:
            await asyncio.wait(list(self.pending))

    def shutdown(self) -> None:
        self.closed = True
        self.writer.shutdown(wait=True)
        self.readers.shutdown(wait=True)


class AsyncVectrix:
    """A :class:`~vxmem.vectrix.Vectrix` whose verbs are awaitable.

    The arguments are :class:`~vxmem.vectrix.Vectrix`'s (the database is opened here, on the
    calling thread, once); ``readers`` is how many reads may run at once (default: the cores,
    at most 4). :meth:`of` wraps a handle already open. The handle itself is ``.sync``; each
    verb has its signature and docstring.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, embedder: EmbedderArg = None,
                 token_counter: Callable[[str], int] | None = None, *, readers: int | None = None,
                 **options: Any):
        order = CallOrder(check_readers(readers))
        self.sync: Vectrix = Vectrix(path, embedder, token_counter, **options)
        self.order = order
        self.owns = True

    @classmethod
    def of(cls, db: Vectrix, readers: int | None = None) -> AsyncVectrix:
        """Wrap an open :class:`~vxmem.vectrix.Vectrix`; it stays the caller's to close."""
        if not isinstance(db, Vectrix):
            raise TypeError(f"db must be a Vectrix, not {type(db).__name__}")
        self = cls.__new__(cls)
        self.order = CallOrder(check_readers(readers))
        self.sync, self.owns = db, False
        return self

    async def call(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        """``db.<verb>(*args, **kwargs)`` on a worker thread, in call order."""
        write = verb in WRITES or (verb in ("recall", "context", "recall_request")
                                   and self.sync.memory.recency_from == "accessed")  # they record accesses
        return await self.order.run(write, partial(getattr(self.sync, verb), *args, **kwargs))

    # ------------------------------------------------------------------ the spec's verbs

    async def remember(self, text: str, session: str | None = None, role: str = "user", turn: int | None = None,
                       timestamp: TimeLike = None, pinned: bool = False, kind: str | None = None,
                       metadata: dict[str, Any] | None = None, id: str | None = None, ttl_days: float | None = None,
                       check: bool | None = None, user: str | None = None) -> str:
        # A judged remember does not hold up the reads made after it (see the module docstring).
        return await self.order.run(True, partial(
            self.sync.remember, text, session=session, role=role, turn=turn, timestamp=timestamp, pinned=pinned,
            kind=kind, metadata=metadata, id=id, ttl_days=ttl_days, check=check, user=user),
            judged=self._judges(check, kind, pinned))

    async def remember_many(self, memories: Iterable[str | Mapping[str, Any]], *, session: str | None = None,
                            role: str = "user", timestamp: TimeLike = None, user: str | None = None,
                            check: bool | None = None) -> list[str]:
        items = list(memories)  # an iterator is read here, not on another thread
        judged = any(self._judges(check, None, False) if not isinstance(m, Mapping) else
                     self._judges(m.get("check", check), m.get("kind"), bool(m.get("pinned"))) for m in items)
        return await self.order.run(True, partial(self.sync.remember_many, items, session=session, role=role,
                                                  timestamp=timestamp, user=user, check=check), judged=judged)

    def _judges(self, check: bool | None, kind: str | None, pinned: bool) -> bool:
        """Whether a remember of these arguments calls the contradiction judge: when the memory
        has one, for a fact or a pinned memory unless ``check=False``, for a turn if ``check=True``."""
        if self.sync.memory.judge is None or check is False:
            return False
        return check is True or pinned is True or kind not in (None, KIND_TURN)

    async def warm(self) -> None:
        return await self.call("warm")

    @takes(RecallOptions)
    async def recall(self, query: str, options: RecallOptions) -> MemoryResults:
        return await self.call("recall", query, **as_kwargs(options))

    async def recall_request(self, request: RecallRequest) -> MemoryResults:
        """Run one checked :class:`~vxmem.memory.request.RecallRequest` (its own blend, if it
        has one): what ``recall()`` does with its arguments."""
        if not isinstance(request, RecallRequest):
            raise TypeError(f"request must be a RecallRequest, not {type(request).__name__}")
        return await self.order.run(self.sync.memory.recency_from == "accessed",
                                    partial(self.sync.memory.recall_request, request))

    async def feedback(self, id: str, outcome: str, correction: str | None = None,
                       timestamp: TimeLike = None) -> str | None:
        return await self.call("feedback", id, outcome, correction=correction, timestamp=timestamp)

    async def context(self, query: str, session: str | AnySession | None = None, token_budget: int = 1500,
                      recent_turns: int = 6, limit: int = 10, now: TimeLike = None, user: str | None = None,
                      filter: dict[str, Any] | None = None, **recall_kwargs: Any) -> ContextBlock:
        return await self.call("context", query, session=session, token_budget=token_budget,
                               recent_turns=recent_turns, limit=limit, now=now, user=user, filter=filter,
                               **recall_kwargs)

    async def forget(self, session: str | AnySession | None = None, kinds: Sequence[str] = FORGET_KINDS,
                     older_than: float | datetime | None = None, ids: Sequence[str] | None = None,
                     superseded: bool = False, now: TimeLike = None, filter: dict[str, Any] | None = None,
                     user: str | None = None) -> int:
        return await self.call("forget", session=session, kinds=kinds, older_than=older_than, ids=ids,
                               superseded=superseded, now=now, filter=filter, user=user)

    async def consolidate(self, session: str | None, summarize: Summarizer, keep_recent: int = 6,
                          older_than: float | datetime | None = None, batch_turns: int = 40, delete: bool = True,
                          pinned: bool = False, now: TimeLike = None, user: str | None = None) -> ConsolidationReport:
        # The summarizer may take minutes: the reads made after it do not wait (see the module docstring).
        return await self.order.run(True, partial(self.sync.consolidate, session, summarize, keep_recent=keep_recent,
                                                  older_than=older_than, batch_turns=batch_turns, delete=delete,
                                                  pinned=pinned, now=now, user=user), judged=True)

    async def expire(self, now: TimeLike = None, user: str | None = None) -> int:
        return await self.call("expire", now=now, user=user)

    async def turns(self, session: str | None, limit: int | None = None, now: TimeLike = None,
                    filter: dict[str, Any] | None = None, user: str | None = None) -> list[Result]:
        return await self.call("turns", session, limit=limit, now=now, filter=filter, user=user)

    async def history(self, id: str, now: TimeLike = None) -> list[HistoryEntry]:
        return await self.call("history", id, now=now)

    # ------------------------------------------------------------------ the collection's

    async def get(self, id: str) -> Result:
        """The document with this id (``KeyError`` if there is none)."""
        return await self.call("get", id)

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match ``filter`` (all of them when it is None)."""
        return await self.call("count", filter)

    async def aclose(self) -> None:
        """Wait for every call made before it (those still waiting their turn too), then
        close the handle (when this object opened it); a call made after it raises
        :class:`~vxmem.core.errors.VectrixError`."""
        await self.order.drain()
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def close(self) -> None:
        """Finish the calls in flight and close the handle when this object opened it
        (blocking; :meth:`aclose` awaits it)."""
        self.order.shutdown()
        if self.owns:
            self.sync.close()

    async def __aenter__(self) -> AsyncVectrix:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"


# Each verb shows Vectrix's docstring (one text, three places): help(AsyncVectrix.recall) documents recall.
for _verb in ("remember", "remember_many", "warm", "recall", "feedback", "context", "forget", "consolidate",
              "expire", "turns", "history"):
    getattr(AsyncVectrix, _verb).__doc__ = getattr(Vectrix, _verb).__doc__
