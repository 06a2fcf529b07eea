"""The MCP server: the memory's verbs as MCP tools, on the official SDK, over stdio
(``vxmem mcp``) or streamable HTTP at ``/mcp`` beside the REST API (``vxmem serve``).

Tools ``remember``, ``recall``, ``feedback``, ``forget``, ``context``, ``history`` and
``turns``. Each tool's input schema is its REST request model's (:mod:`vxmem.serve.schemas`)
without ``user``: a tool acts for the user of the key its HTTP request carries, else for the
server's ``--user``, so a client can never reach another user's memories. Results are
structured content (ids, texts, scores and their breakdown, created times). A bad or unknown
argument (``user`` among them) or a refused call is a tool error with a one-line message,
and writes nothing.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import BaseModel

from .. import __version__
from ..vectrix import Vectrix
from . import schemas as m
from .keyring import PRINCIPAL, Principal
from .service import MemoryService, error_of, errors_line

# tool: (request model, the service's verb, response model)
TOOLS: dict[str, tuple[type[BaseModel], str, type[BaseModel]]] = {
    "remember": (m.RememberBody, "remember", m.RememberOut),
    "recall": (m.RecallBody, "recall", m.RecallOut),
    "feedback": (m.FeedbackBody, "feedback", m.FeedbackOut),
    "forget": (m.ForgetBody, "forget", m.CountOut),
    "context": (m.ContextBody, "context", m.ContextOut),
    "history": (m.HistoryBody, "history", m.HistoryOut),
    "turns": (m.TurnsBody, "turns", m.TurnsOut),
}
log = logging.getLogger("vxmem.serve")
INSTRUCTIONS = ("Conversation memory. remember() what the user says or a fact worth keeping; recall() or "
                "context() before answering; feedback() on what a recalled memory was worth (corrected, with the "
                "corrected fact, supersedes it); forget() deletes.")


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model``'s fields but ``user``: the tool's input schema."""
    schema = model.model_json_schema()
    schema["properties"].pop("user", None)
    if "user" in schema.get("required", ()):
        schema["required"].remove("user")
    schema.pop("title", None)
    return schema


def description(verb: str) -> str:
    """The first paragraph of the library's docstring of ``verb``."""
    doc = getattr(Vectrix, verb).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


class ModelTool(Tool):
    """A tool that hands a call's arguments to its function as they came, for the request model
    to check: the SDK's own pass would drop an unknown argument without a word, and read a
    string that looks like JSON (a ``text`` of ``"[1, 2]"``) as a list."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        return await super().run({"arguments": arguments}, context, convert_result=convert_result)


def principal_of(ctx: Context) -> Principal | None:
    """Whom the tool call acts for: the key of its HTTP request, else (stdio) the server's user."""
    try:
        request = ctx.request_context.request
    except ValueError:  # no request: a call from within
        return None
    scope = getattr(request, "scope", None)
    return scope.get(PRINCIPAL) if isinstance(scope, dict) else None


def tool_function(name: str, model: type[BaseModel], svc: MemoryService, verb: str,
                  out: type[BaseModel]) -> Any:
    """The tool ``name``: refuses an argument that is not a field of ``model`` (``user`` too: a
    tool acts for its key's user, or the server's), checks the others with the model itself
    (so an error is one line, not the SDK's report) and runs ``verb`` of ``svc`` as the key
    of the call may. An argument given as null is left out."""
    fields = set(model.model_fields) - {"user"}

    async def tool(arguments: dict[str, Any], ctx: Context) -> BaseModel:
        unknown = [{"loc": (k,), "msg": "Extra inputs are not permitted"} for k in arguments if k not in fields]
        if unknown:
            raise ToolError(errors_line(unknown))
        given = {k: v for k, v in arguments.items() if v is not None}
        try:
            result: BaseModel = await getattr(svc.acting_for(principal_of(ctx)), verb)(model(**given))
            return result
        except Exception as exc:  # every refusal, from the model or the library, is a tool error
            failure = error_of(exc)
            if failure.status == 500:
                log.exception("vxmem mcp: a tool call failed")
            raise ToolError(failure.message) from None

    tool.__name__ = name
    # The call's arguments whole for the SDK (ModelTool.run), and its context; clients see input_schema().
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("arguments", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any),
         inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)],
        return_annotation=out)
    return tool


def build_server(svc: MemoryService) -> MCPServer:
    """The MCP server of ``svc``'s verbs (run it with ``.run("stdio")``, or serve it over HTTP:
    :func:`http_endpoint`)."""
    tools = []
    for name, (model, verb, out) in TOOLS.items():
        tool = ModelTool.from_function(tool_function(name, model, svc, verb, out), name=name,
                                       description=description(verb), structured_output=True, context_kwarg="ctx")
        tool.parameters = input_schema(model)
        tools.append(tool)
    return MCPServer("vxmem", version=__version__, instructions=INSTRUCTIONS, tools=tools, log_level="WARNING")


@dataclass(frozen=True)
class HttpEndpoint:
    """MCP over streamable HTTP, to add to an app: its route, and the lifespan that runs its
    sessions (the app's own)."""

    route: Any
    manager: Any

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        async with self.manager.run():
            yield


def http_endpoint(svc: MemoryService, host: str, path: str = "/mcp") -> HttpEndpoint:
    """The MCP server of ``svc`` at ``path`` over streamable HTTP, as served on ``host`` (a
    loopback host keeps the SDK's guard against DNS rebinding: requests must name a loopback
    host). Any number of clients, each with a session of its own; each call acts for its key."""
    server = build_server(svc)
    sdk_app = server.streamable_http_app(streamable_http_path=path, host=host)
    route = next(r for r in sdk_app.routes if getattr(r, "path", None) == path)
    return HttpEndpoint(route=route, manager=server.session_manager)
