"""MCP at ``/mcp`` of the REST app, the SDK loaded by the first request that reaches it.

Importing the MCP SDK and building its server takes about half of a ``vxmem serve`` start's CPU
(some 0.7 s), which a server that only ever answers REST would pay for nothing. The route is
there from the start, and the app's lifespan runs a task that waits for the first request to
``/mcp``; that task imports the SDK (in a worker thread, so REST requests are answered
meanwhile), builds :func:`vxmem.serve.mcp.http_endpoint` and runs its session manager until the
app shuts down. The session manager lives in that one task from its start to its end, as the
SDK requires of its task group; requests wait until it runs, then go to the SDK's own handler.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .service import MemoryService

log = logging.getLogger("vxmem.serve")


class LazyMcp:
    """The ASGI app at ``path``: MCP over streamable HTTP for ``svc`` as served on ``host``
    (see :func:`vxmem.serve.mcp.http_endpoint`), started by the first request to it. Run
    :meth:`lifespan` as the app's lifespan; without it, a request fails as the SDK's own
    handler does outside its session manager."""

    def __init__(self, svc: MemoryService, host: str, path: str = "/mcp") -> None:
        if importlib.util.find_spec("mcp") is None:  # refused at once, as an eager import would be
            raise ModuleNotFoundError("MCP over HTTP needs the 'server' extra (the mcp package): "
                                      "pip install 'vxmem[server]'", name="mcp")
        self.svc, self.host, self.path = svc, host, path
        self.route = Route(path, endpoint=self)
        self.handler: Any = None  # the SDK's ASGI handler, once its session manager runs
        self.failure: BaseException | None = None
        self.wanted: anyio.Event | None = None  # set by the first request (or the shutdown)
        self.ready: anyio.Event | None = None  # set once handler (or failure) is known

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        self.wanted, self.ready, stop = anyio.Event(), anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.serve_until, stop)
            try:
                yield
            finally:
                stop.set()
                self.wanted.set()

    async def serve_until(self, stop: anyio.Event) -> None:
        """Wait for the first request, then run the SDK's session manager until ``stop``."""
        assert self.wanted is not None and self.ready is not None
        await self.wanted.wait()
        if stop.is_set():
            return
        try:
            # The import in a thread: REST requests are served meanwhile. The build in the loop:
            # the SDK makes its locks there.
            mcp = await anyio.to_thread.run_sync(importlib.import_module, "vxmem.serve.mcp")
            endpoint = mcp.http_endpoint(self.svc, self.host, self.path)
        except Exception as exc:
            log.exception("vxmem serve: MCP at %s could not start", self.path)
            self.failure = exc
            self.ready.set()
            return
        async with endpoint.manager.run():
            self.handler = endpoint.route.app
            self.ready.set()
            await stop.wait()
        self.handler = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.handler is None:
            if self.wanted is None or self.ready is None:
                raise RuntimeError("MCP at /mcp needs the app's lifespan running (LazyMcp.lifespan)")
            self.wanted.set()
            await self.ready.wait()
            if self.failure is not None:
                raise RuntimeError("MCP over HTTP could not start") from self.failure
            if self.handler is None:  # the app shut down meanwhile
                raise RuntimeError("the server is shutting down")
        await self.handler(scope, receive, send)
