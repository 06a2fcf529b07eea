"""The REST endpoints of the memory served whole: ``/v1/memories`` (one by id, a listing by
pages, a metadata update, a deletion), ``/v1/consolidate`` and ``/v1/stats``.

Beside the verbs of :mod:`vxmem.serve.rest` (which includes these routes), with the same keys, scoping and errors; reads
are ``GET`` with their arguments in the query (no body, no ``Content-Type``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import Response

from . import records as r
from . import schemas as m
from .routing import ERRORS, Service, answer, json_body, operation_id
from .scope import USER_PATTERN
from .service import ListQuery

router = APIRouter(prefix="/v1", responses=ERRORS, generate_unique_id_function=operation_id)
MemoryId = Annotated[str, Path(min_length=1, max_length=256, description="the memory's id")]
UserQuery = Annotated[str | None, Query(pattern=USER_PATTERN, description="whose memories (default: the key's, "
                                                                          "else the server's user)")]


@router.get("/memories/{id:path}", response_model=m.MemoryOut, description="One memory of the user, by id.")
async def get_memory(id: MemoryId, svc: Service, user: UserQuery = None) -> Response:
    return await answer(lambda _: svc.get_memory(id, user), None)


@router.get("/memories", response_model=r.PageOut,
            description="The user's memories, a page at a time, oldest first; `next_cursor` fetches the next page.")
async def list_memories(
        svc: Service, user: UserQuery = None,
        session: Annotated[str | None, Query(min_length=1, max_length=256, pattern=r"\S")] = None,
        kind: Annotated[m.Kind | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=r.MAX_PAGE)] = r.DEFAULT_PAGE,
        cursor: Annotated[str | None, Query(max_length=2048, description="from the previous page")] = None,
) -> Response:
    query = ListQuery(user=user, session=session, kind=kind, limit=limit, cursor=cursor)
    return await answer(svc.list_memories, query)


@router.patch("/memories/{id:path}", response_model=m.MemoryOut, dependencies=[Depends(json_body)],
              description="Set keys of a memory's own metadata (merged; the reserved `_vx_` keys are refused).")
async def patch_memory(id: MemoryId, body: r.PatchBody, svc: Service) -> Response:
    return await answer(lambda b: svc.patch_memory(id, b), body)


@router.delete("/memories/{id:path}", response_model=m.CountOut,
               description="Delete one memory of any kind (a deleted correction gives back the place of what it "
                           "replaced).")
async def delete_memory(id: MemoryId, svc: Service, user: UserQuery = None) -> Response:
    return await answer(lambda _: svc.delete_memory(id, user), None)


@router.post("/consolidate", response_model=r.ConsolidateOut, dependencies=[Depends(json_body)],
             description="Summarise a session's older turns into standalone facts with the server's summarizer "
                         "(409 when it has none).")
async def consolidate(body: r.ConsolidateBody, svc: Service) -> Response:
    return await answer(svc.consolidate, body)


@router.get("/stats", response_model=r.StatsOut, description="How many memories the user has, of each kind.")
async def stats(svc: Service, user: UserQuery = None) -> Response:
    return await answer(lambda _: svc.stats(user), None)
