"""What every REST endpoint shares: the service as the request's key may use it, the answer
of a verb (or its refusal, :class:`ApiError`), the check that a body is JSON, the error
responses the OpenAPI description lists and the operation ids (the verbs).

Apart from the routes, so that each module of routes (:mod:`vxmem.serve.rest`,
:mod:`vxmem.serve.rest_records`) builds on it alone.
"""

from __future__ import annotations

import email.message
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from . import schemas as m
from .keyring import PRINCIPAL
from .service import Failure, MemoryService, error_of

log = logging.getLogger("vxmem.serve")
B = TypeVar("B")


class ApiError(Exception):
    """A refused request, answered as :class:`~vxmem.serve.service.Failure` says."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


async def answer(verb: Callable[[B], Awaitable[BaseModel]], body: B) -> Response:
    """``verb(body)`` as JSON, or the :class:`ApiError` its failure makes (a 500 is logged, never
    shown). The response model is made once, by the verb, and serialised once, here: FastAPI's
    own pass (validate again, encode, dump) costs more than the recall itself."""
    try:
        out = await verb(body)
    except Exception as exc:
        failure = error_of(exc)
        if failure.status == 500:
            log.exception("vxmem serve: a request failed")
        raise ApiError(failure) from None
    return Response(out.model_dump_json(), media_type="application/json")


async def service(request: Request) -> MemoryService:  # async: FastAPI runs a plain def on a thread
    """The service as the request's key may use it (see :class:`~vxmem.serve.rest.AccessCheck`)."""
    svc: MemoryService = request.app.state.service
    return svc.acting_for(request.scope.get(PRINCIPAL))


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` says JSON (``application/json``, or ``application/*+json``),
    as FastAPI reads it: a body of any other type (or of none) never reaches the model."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


async def json_body(request: Request) -> None:
    """Refuse a request whose body is not sent as JSON with 415, not with the model's puzzling
    "Input should be a valid dictionary" (``curl -d`` sends a form unless told otherwise)."""
    if not is_json(request.headers.get("content-type")):
        raise ApiError(Failure(415, "unsupported_media_type",
                               "send the body as JSON with the header 'Content-Type: application/json'"))


Service = Annotated[MemoryService, Depends(service)]
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": m.ErrorOut, "description": text}
    for status, text in ((400, "not JSON"), (401, "no or wrong key"),
                         (403, "a user this key may not reach"), (404, "no such memory for this user"),
                         (409, "an id or turn number already taken"), (413, "body over the limit"),
                         (415, "body not sent as Content-Type: application/json"), (422, "an argument refused"))}


def operation_id(route: APIRoute) -> str:
    """An endpoint's OpenAPI operation id: its verb (``remember``), as a generated client names it."""
    return route.name


