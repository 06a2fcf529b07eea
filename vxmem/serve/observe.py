"""What ``vxmem serve`` tells its operator: one access-log line per request, and ``/metrics``
in the Prometheus text format (requests, latency histograms per route, errors, memories).

:class:`Observed` wraps the whole app, so it sees every request, those refused before the
routing (401, 413) too. A request is labelled by its route's template
(``/v1/memories/{id}``), never by its path, so the metrics stay a few series however many ids
are asked for; a path that is no route is ``other``. The log line names the key's user, never
the key.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .keyring import PRINCIPAL

access_log = logging.getLogger("vxmem.access")
# seconds: a recall on the default model takes milliseconds, a consolidation with an LLM seconds
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (``memories``: how many the
    database holds, counted when scraped, in its turn on the memory's queue)."""

    def __init__(self, memories: Callable[[], Awaitable[int]]):
        self.count = memories
        self.registry = CollectorRegistry()
        self.requests = Counter("vxmem_requests", "HTTP requests answered", ["route", "method", "status"],
                                registry=self.registry)
        self.errors = Counter("vxmem_errors", "HTTP requests answered with a status of 400 or more",
                              ["route", "status"], registry=self.registry)
        self.latency = Histogram("vxmem_request_duration_seconds", "time to answer a request, by route",
                                 ["route", "method"], buckets=BUCKETS, registry=self.registry)
        self.memories = Gauge("vxmem_memories", "documents the database holds", registry=self.registry)

    def record(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)
        if status >= 400:
            self.errors.labels(route, str(status)).inc()

    async def endpoint(self, request: Request) -> Response:
        self.memories.set(await self.count())
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def route_of(scope: Scope) -> str:
    """The template of the route that answered, without its converters (``/v1/memories/{id}``);
    ``other`` for none."""
    path = getattr(scope.get("route"), "path", None)
    return re.sub(r":\w+}", "}", path) if isinstance(path, str) else "other"


class Observed:
    """Times every HTTP request, logs it (``vxmem.access``, INFO) and counts it in ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client gets if the app raises before it answers

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            seconds = time.perf_counter() - start
            route = route_of(scope)
            self.metrics.record(route, scope["method"], status, seconds)
            who = scope.get(PRINCIPAL)
            user = "-" if who is None else (who.user or "(token)")
            client = scope.get("client")
            access_log.info("%s %s %s %d %.1fms user=%s", client[0] if client else "-", scope["method"],
                            scope["path"], status, seconds * 1000, user)
