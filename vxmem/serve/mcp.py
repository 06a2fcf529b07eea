"""The MCP server: the memory's verbs as MCP tools, on the official SDK, over stdio
(``vxmem mcp``) or streamable HTTP at ``/mcp`` beside the REST API (``vxmem serve``).

The tools (``remember``, ``recall``, ``context``, ``feedback``, ``forget``) are defined for a
model in :mod:`vxmem.serve.tools`: small arguments, hints of what each changes, compact
answers; both transports serve these same definitions. A tool acts for the user of the key
its HTTP request carries, else for the server's ``--user``, so a client can never reach
another user's memories. A bad or unknown argument (``user`` among them) or a refused call
is a tool error with a one-line message, and writes nothing.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from .. import __version__
from .keyring import PRINCIPAL, Principal
from .service import MemoryService, error_of, errors_line
from .tools import TOOLS, ToolSpec, slim

log = logging.getLogger("vxmem.serve")
INSTRUCTIONS = ("Conversation memory. remember what the user says or a fact worth keeping; recall or context "
                "before answering; feedback on what a recalled memory was worth (corrected, with the right fact, "
                "replaces it); forget deletes.")


class ModelTool(Tool):
    """A tool that hands a call's arguments to its function as they came, for the tool's own
    model to check: the SDK's own pass would drop an unknown argument without a word, and read
    a string that looks like JSON (a ``text`` of ``"[1, 2]"``) as a list."""

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


def answer_of(out: Any) -> CallToolResult:
    """A tool's answer: its structured content, and the same as one line of JSON for a client
    that reads text (the SDK's own text is indented, twice the characters)."""
    data = out.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, separators=(",", ":")))],
                          structured_content=data)


def tool_function(name: str, spec: ToolSpec, svc: MemoryService) -> Any:
    """The tool ``name``: refuses an argument that is not a field of ``spec.args`` (``user``
    too: a tool acts for its key's user, or the server's), checks the others with that model
    and then the verb's REST model (so an error is one line, not the SDK's report), runs the
    verb as the key of the call may, and answers compactly. An argument given as null is
    left out."""
    fields = set(spec.args.model_fields)

    async def tool(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        unknown = [{"loc": (k,), "msg": "Extra inputs are not permitted"} for k in arguments if k not in fields]
        if unknown:
            raise ToolError(errors_line(unknown))
        given = {k: v for k, v in arguments.items() if v is not None}
        try:
            body = spec.body(**spec.args(**given).model_dump(exclude_unset=True))
            result = await getattr(svc.acting_for(principal_of(ctx)), spec.verb)(body)
        except Exception as exc:  # every refusal, from the models or the library, is a tool error
            failure = error_of(exc)
            if failure.status == 500:
                log.exception("vxmem mcp: a tool call failed")
            raise ToolError(failure.message) from None
        return answer_of(spec.shorten(result))

    tool.__name__ = name
    # The call's arguments whole for the SDK (ModelTool.run), and its context; clients see the
    # slimmed schema of spec.args; the return annotation gives the answer's schema.
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("arguments", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any),
         inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)],
        return_annotation=spec.out)
    return tool


def annotations_of(spec: ToolSpec) -> ToolAnnotations:
    """The tool's hints; every tool's world is closed: the memory, nothing beyond it."""
    return ToolAnnotations(read_only_hint=spec.hints["read_only"], destructive_hint=spec.hints["destructive"],
                           idempotent_hint=spec.hints["idempotent"], open_world_hint=False)


def build_server(svc: MemoryService) -> MCPServer:
    """The MCP server of ``svc``'s verbs (run it with ``.run("stdio")``, or serve it over HTTP:
    :func:`http_endpoint`)."""
    tools = []
    for name, spec in TOOLS.items():
        tool = ModelTool.from_function(tool_function(name, spec, svc), name=name, description=spec.description,
                                       annotations=annotations_of(spec), structured_output=True,
                                       context_kwarg="ctx")
        tool.parameters = slim(spec.args.model_json_schema())
        if tool.fn_metadata.output_schema is not None:  # before the tool reads it (a cached property)
            tool.fn_metadata.output_schema = slim(tool.fn_metadata.output_schema)
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
