"""The MCP server, served for real: ``vxmem mcp`` in a child process, driven by the MCP SDK's
own stdio client."""

import asyncio
import os
import sys
from datetime import UTC, datetime

import pytest

from vxmem import Vectrix

from helpers import ROOT, T0

mcp = pytest.importorskip("mcp")

TOOLS = {"remember", "recall", "feedback", "forget", "context"}


def _params(path, *flags):
    env = {k: os.environ[k] for k in ("VXMEM_EMBEDDER", "VXMEM_CACHE_DIR") if k in os.environ}
    return mcp.StdioServerParameters(command=sys.executable, args=["-m", "vxmem", "mcp", "--db", str(path), *flags],
                                     env=env, cwd=str(ROOT))


def _session(path, *flags):
    """A client talking to ``vxmem mcp --db path *flags`` (closing it ends the server)."""
    return mcp.Client(_params(path, *flags))


def _count(path) -> int:
    with Vectrix(path, read_only=True) as db:
        return len(db)


def test_the_tools_remember_and_recall_with_compact_structured_results(tmp_path):
    path = tmp_path / "m.vxdb"

    async def main():
        async with _session(path, "--user", "alice") as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == TOOLS
            recall_schema = listed["recall"].input_schema
            assert recall_schema["required"] == ["query"] and "user" not in recall_schema["properties"]
            assert recall_schema["properties"]["limit"]["maximum"] == 100
            assert listed["recall"].output_schema is not None

            stored = await client.call_tool("remember", {"text": "I prefer dark mode", "session": "chat"})
            assert not stored.is_error
            mid = stored.structured_content["id"]
            found = await client.call_tool("recall", {"query": "dark mode"})
            assert not found.is_error
            return mid, found.structured_content["results"]

    mid, results = asyncio.run(main())
    top = results[0]
    assert set(top) == {"id", "text", "time", "score"}  # no breakdown: the server's business
    assert top["id"] == mid and top["text"] == "I prefer dark mode" and top["score"] > 0
    with Vectrix(path, read_only=True) as db:
        stored = db.get(mid)
        assert stored.metadata["_vx_user"] == "alice"
        assert top["time"] == datetime.fromtimestamp(stored.metadata["_vx_ts"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


BAD_CALLS = [
    ("remember", {"text": ""}),
    ("remember", {"text": "x", "kind": "rumour"}),
    ("remember", {"text": "x", "metadata": {"_vx_kind": "fact"}}),
    ("remember", {"text": "x", "turn": -1}),
    ("remember", {"text": "x", "timestamp": T0}),  # the time of a write is the server's
    ("recall", {"query": "x", "now": T0}),  # a model's guess of the date never reaches the ranking
    ("recall", {"query": "x", "half_life_days": 3}),  # nor does a blend: the server's configuration
    ("recall", {"query": "x", "limit": 1000}),
    ("recall", {}),
    ("recall", {"query": "   "}),
    ("context", {"query": " "}),
    ("feedback", {"id": "no-such-id", "outcome": "useful"}),
    ("feedback", {"id": "no-such-id", "outcome": "loved"}),
    ("forget", {"ids": "not a list"}),
]


def test_bad_arguments_are_a_one_line_tool_error_and_write_nothing(tmp_path):
    path = tmp_path / "bad.vxdb"
    with Vectrix(path) as db:
        db.remember("already here", user="default", session="default/s", timestamp=T0)

    async def main():
        async with _session(path) as client:
            return [await client.call_tool(tool, arguments) for tool, arguments in BAD_CALLS]

    for (tool, arguments), got in zip(BAD_CALLS, asyncio.run(main())):
        assert got.is_error, (tool, arguments)
        text = got.content[0].text
        assert "\n" not in text and "Traceback" not in text and text.startswith(f"Error executing tool {tool}: ")
    assert _count(path) == 1


def test_a_forget_that_names_no_scope_is_a_tool_error_unless_it_says_all(tmp_path):
    path = tmp_path / "sweep.vxdb"
    with Vectrix(path) as db:
        for session in ("one", "two"):
            db.remember(f"a turn of {session}", user="default", session=f"default/{session}", timestamp=T0)

    async def main():
        async with _session(path) as client:
            refused = await client.call_tool("forget", {})
            count = _count(path)
            done = await client.call_tool("forget", {"all": True})
            return refused, count, done

    refused, count, done = asyncio.run(main())
    assert refused.is_error and "all" in refused.content[0].text and count == 2
    assert done.structured_content == {"deleted": 2} and _count(path) == 0


def test_a_client_stays_in_the_users_scope(tmp_path):
    path = tmp_path / "scope.vxdb"
    with Vectrix(path) as db:
        theirs = db.remember("alice keeps green tea", user="alice", session="alice/chat", pinned=True,
                             timestamp=T0)

    async def main():
        async with _session(path, "--user", "bob", "--session", "chat") as client:
            found = await client.call_tool("recall", {"query": "green tea"})
            block = await client.call_tool("context", {"query": "tea"})
            graded = await client.call_tool("feedback", {"id": theirs, "outcome": "dead_end"})
            gone = await client.call_tool("forget", {"ids": [theirs], "kinds": ["pinned"]})
            return found, block, graded, gone

    found, block, graded, gone = asyncio.run(main())
    assert found.structured_content["results"] == []
    assert block.structured_content["ids"] == [] and "green tea" not in block.structured_content["text"]
    assert graded.is_error
    assert gone.structured_content == {"deleted": 0}
    with Vectrix(path, read_only=True) as db:
        assert theirs in db and "_vx_feedback" not in db.get(theirs).metadata


def test_the_documented_client_configuration_starts_the_server(tmp_path):
    import json
    import re

    page = (ROOT / "README.md").read_text(encoding="utf-8")  # docs/SERVING.md shows the same
    config = json.loads(re.search(r"<!--\s*mcp-config\s*-->\s*\n```json\n(.*?)^```", page, re.S | re.M).group(1))
    server = config["mcpServers"]["vxmem"]
    assert server["command"] == "vxmem"
    # As a client runs it, with this environment's vxmem command and a database of the test's own.
    args = [str(tmp_path / "chat.vxdb") if a.endswith("chat.vxdb") else a for a in server["args"]]
    command = os.path.join(os.path.dirname(sys.executable), "vxmem")
    env = {k: os.environ[k] for k in ("VXMEM_EMBEDDER", "VXMEM_CACHE_DIR") if k in os.environ}

    async def main():
        async with mcp.Client(mcp.StdioServerParameters(command=command, args=args, env=env)) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert asyncio.run(main()) == TOOLS


@pytest.mark.parametrize("verb", ["mcp", "serve"])
def test_a_database_another_process_writes_is_refused_in_the_servers_words(tmp_path, verb):
    from servers import free_port, run_vxmem

    path = tmp_path / "held.vxdb"
    with Vectrix(path):  # a writer of this process holds the file
        flags = ["--port", str(free_port())] if verb == "serve" else []
        out = run_vxmem(verb, "--db", str(path), *flags)
    assert out.returncode == 2 and out.stderr.startswith("vxmem: error:"), out.stderr
    assert "another process" in out.stderr and "/mcp" in out.stderr and "read_only" not in out.stderr
