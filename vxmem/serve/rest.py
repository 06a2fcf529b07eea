"""The REST API: one POST endpoint per verb under ``/v1/``, on FastAPI.

:func:`create_app` builds the app over a :class:`~vxmem.serve.service.MemoryService`; ``vxmem
serve`` runs it under uvicorn. OpenAPI is at ``/openapi.json`` and ``/docs``; ``/healthz``
reads the database and answers ``{"status": "ok"}`` (503 when it cannot). The memory served
whole (``/v1/memories``, ``/v1/consolidate``, ``/v1/stats``) is :mod:`vxmem.serve.rest_records`,
the access log and ``/metrics`` :mod:`vxmem.serve.observe`, MCP at ``/mcp``
:mod:`vxmem.serve.mcp`. Every error is JSON, ``{"error": kind, "message": one line}``,
with a status that fits: 400 (not JSON), 401 (no or wrong key), 403 (a user the key may not
reach), 404 (no such memory, or not this user's), 409 (an id or a turn number taken), 413
(body over the limit), 415 (a body not sent as ``Content-Type: application/json``), 422 (an
argument refused); a refused request writes nothing, and no response carries a stack trace.

With a token, or once the database has a key (``vxmem keys``), every request but to
``/healthz`` and the description itself (``/openapi.json``, ``/docs`` and its files), which hold
no data, must carry ``Authorization: Bearer <key>`` (:class:`AccessCheck`), and the OpenAPI
description declares the bearer scheme. Each endpoint's operation id is its verb. CORS is off
unless origins are given."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence

from fastapi import APIRouter, Depends, FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..vectrix import Vectrix
from . import schemas as m
from .docs_page import ASSETS, OAUTH2_REDIRECT, serve_docs
from .keyring import PRINCIPAL, TOKEN_HOLDER, KeyRing, Principal
from .observe import Metrics, Observed
from .routing import ERRORS, ApiError, Service, answer, json_body, operation_id
from .service import Failure, MemoryService, errors_line, one_line

DEFAULT_MAX_BODY = 1_000_000  # bytes: 1 MB
log = logging.getLogger("vxmem.serve")


def error_body(f: Failure) -> dict[str, str]:
    return {"error": f.kind, "message": f.message}


def error_response(f: Failure) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if f.status == 401 else None
    return JSONResponse(error_body(f), status_code=f.status, headers=headers)


def described(verb: str) -> str:
    """The first paragraph of the library's docstring of ``verb``: the endpoint says what it does."""
    doc = getattr(Vectrix, verb).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


router = APIRouter(prefix="/v1", responses=ERRORS, dependencies=[Depends(json_body)],
                   generate_unique_id_function=operation_id)
# Declares the key in the OpenAPI description (AccessCheck checks it): it never refuses a request itself.
BEARER = HTTPBearer(auto_error=False, description="a key made by `vxmem keys add`, or the server's token "
                                                   "(`--token` or VXMEM_TOKEN)")


@router.post("/remember", response_model=m.RememberOut, description=described("remember"))
async def remember(body: m.RememberBody, svc: Service) -> Response:
    return await answer(svc.remember, body)


@router.post("/remember_many", response_model=m.RememberManyOut, description=described("remember_many"))
async def remember_many(body: m.RememberManyBody, svc: Service) -> Response:
    return await answer(svc.remember_many, body)


@router.post("/recall", response_model=m.RecallOut, description=described("recall"))
async def recall(body: m.RecallBody, svc: Service) -> Response:
    return await answer(svc.recall, body)


@router.post("/feedback", response_model=m.FeedbackOut, description=described("feedback"))
async def feedback(body: m.FeedbackBody, svc: Service) -> Response:
    return await answer(svc.feedback, body)


@router.post("/forget", response_model=m.CountOut, description=described("forget"))
async def forget(body: m.ForgetBody, svc: Service) -> Response:
    return await answer(svc.forget, body)


@router.post("/context", response_model=m.ContextOut, description=described("context"))
async def context(body: m.ContextBody, svc: Service) -> Response:
    return await answer(svc.context, body)


@router.post("/history", response_model=m.HistoryOut, description=described("history"))
async def history(body: m.HistoryBody, svc: Service) -> Response:
    return await answer(svc.history, body)


@router.post("/turns", response_model=m.TurnsOut, description=described("turns"))
async def turns(body: m.TurnsBody, svc: Service) -> Response:
    return await answer(svc.turns, body)


@router.post("/expire", response_model=m.CountOut, description=described("expire"))
async def expire(body: m.ExpireBody, svc: Service) -> Response:
    return await answer(svc.expire, body)


# ---------------------------------------------------------------------------- the app


async def send_failure(scope: Scope, receive: Receive, send: Send, failure: Failure) -> None:
    """Answer a raw ASGI request with ``failure`` (the middlewares run before the routing)."""
    await error_response(failure)(scope, receive, send)


OPEN_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", OAUTH2_REDIRECT})  # they hold no data, nor do ASSETS


class AccessCheck:
    """Every request but to :data:`OPEN_PATHS` must carry ``Authorization: Bearer <secret>``
    once the server has a token or the database a key: the token (compared in constant time)
    acts for any user, a key for whom it was made. Whom a request acts for goes in its scope
    (:data:`PRINCIPAL`); with neither token nor key, no one (the server's users, as asked)."""

    def __init__(self, app: ASGIApp, token: str | None, keys: KeyRing | None):
        self.app = app
        self.token = None if token is None else token.encode("utf-8")
        self.keys = keys

    def principal(self, scope: Scope) -> Principal | None | bool:
        """Whom the request acts for; False when it must be refused."""
        if self.token is None and (self.keys is None or not self.keys.required()):
            return None
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        scheme, _, value = given.partition(b" ")
        value = value.strip()
        if scheme.lower() != b"bearer" or not value:
            return False
        if self.token is not None and hmac.compare_digest(value, self.token):
            return TOKEN_HOLDER
        found = None if self.keys is None else self.keys.principal(value.decode("utf-8", "replace"))
        return False if found is None else found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path not in OPEN_PATHS and not path.startswith(ASSETS + "/"):
            who = self.principal(scope)
            if who is False:
                await send_failure(scope, receive, send, Failure(401, "unauthorized", "missing or wrong key: send "
                                                                      "'Authorization: Bearer <key>'"))
                return
            scope[PRINCIPAL] = who
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413 before the app sees any of it."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = Failure(413, "too_large", f"request body over the limit of {self.limit} bytes")
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await send_failure(scope, receive, send, too_large)
            return
        body, more = bytearray(), True
        while more:  # read it all here (at most the limit), so an oversized stream is refused whole
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await send_failure(scope, receive, send, too_large)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


async def on_invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return error_response(Failure(400, "bad_request", "the body is not valid JSON"))
    return error_response(Failure(422, "invalid", errors_line(exc.errors())))


async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.failure)


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    kinds = {404: "not_found", 405: "method_not_allowed"}
    message = f"no such endpoint: {request.url.path}" if exc.status_code == 404 else str(exc.detail)
    return error_response(Failure(exc.status_code, kinds.get(exc.status_code, "error"), message))


def create_app(svc: MemoryService, *, token: str | None = None, keys: KeyRing | None = None,
               max_body: int = DEFAULT_MAX_BODY, cors_origins: Sequence[str] = (),
               mcp_host: str | None = None) -> FastAPI:
    """The REST app over ``svc``: ``token`` (any user) or one of ``keys`` (its user) required on
    every request but to :data:`OPEN_PATHS` once either is had (and declared in the OpenAPI
    description), bodies over ``max_body`` bytes refused, CORS for ``cors_origins`` alone (none:
    off); with ``mcp_host`` (the address served), MCP over streamable HTTP at ``/mcp`` too."""
    mounted = None
    if mcp_host is not None:  # the MCP SDK loads with the first request to /mcp (see mcp_http)
        from .mcp_http import LazyMcp

        mounted = LazyMcp(svc, mcp_host)
    app = FastAPI(title="vxmem", version=__version__,
                  description="Conversation memory: relevance blended with recency and feedback. Every verb acts "
                              "for one user (`user`, default: the server's); with keys or a token, send "
                              "`Authorization: Bearer <key>`: a user's key acts for its user alone.",
                  generate_unique_id_function=operation_id, lifespan=None if mounted is None else mounted.lifespan,
                  docs_url=None, redoc_url=None)
    serve_docs(app)  # Swagger UI from its package, not a CDN
    app.state.service = svc
    app.include_router(router, dependencies=[Security(BEARER)] if token or keys else None)
    from . import rest_records  # it builds on this module's helpers

    app.include_router(rest_records.router, dependencies=[Security(BEARER)] if token or keys else None)
    metrics = Metrics(svc.db.count)
    app.add_api_route("/metrics", metrics.endpoint, methods=["GET"], include_in_schema=False)

    @app.get("/healthz", responses={503: {"model": m.ErrorOut, "description": "the database does not answer"}})
    async def healthz() -> Response:
        """Whether the server answers and its database file does (a read of it)."""
        try:
            if keys is not None:
                keys.touch()
            await svc.db.count()
        except Exception as exc:
            log.warning("vxmem serve: /healthz: the database does not answer: %s", one_line(str(exc)))
            return JSONResponse({"error": "unavailable", "message": "the database does not answer"}, 503)
        return JSONResponse({"status": "ok"})

    if mounted is not None:
        app.router.routes.append(mounted.route)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_middleware(BodyLimit, limit=max_body)
    if token or keys:
        app.add_middleware(AccessCheck, token=token, keys=keys)
    if cors_origins:  # outermost, so a browser's preflight is answered without a token
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins),
                           allow_methods=["GET", "POST", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(Observed, metrics=metrics)  # outermost: it sees every request, refused ones too
    return app
