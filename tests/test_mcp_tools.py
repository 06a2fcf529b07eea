"""The MCP tools as a model reads them, served for real (``vxmem mcp``, and ``vxmem serve`` at
``/mcp``) and listed and called with the official MCP SDK's clients: few tools, small schemas,
every argument described in plain words, hints of what each tool changes, compact answers."""

import asyncio
import json
import os
import re
import sys

import pytest

from vxmem import Vectrix
from vxmem.ranking.blend import BLEND_FIELDS

from helpers import ROOT, T0
from servers import rest_server

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402 - the MCP SDK's HTTP client
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

# Measured with benchmarks/bench_mcp_tools.py: the tools/list answer is 5,549 characters (20.5K when
# the tools were the REST models), and a recall of 10 answers 5.6 characters per recalled one (28.8).
SCHEMA_BOUND = 7_000
ANSWER_BOUND = 8.0
# (read-only, destructive, idempotent) of each tool.
HINTS = {"remember": (False, False, False), "recall": (True, False, True), "context": (True, False, True),
         "feedback": (False, False, False), "forget": (False, True, True)}
# Arguments a model must not set: the time (it may guess a date), whose memories, and the ranking's settings.
SERVERS_OWN = {"now", "timestamp", "user", "preset", "rerank", "mode", "min_relevance", "recency_from", *BLEND_FIELDS}
MARKUP = re.compile(r"``|`|:param|:class:|:func:|:data:|:mod:|\*\*|\n")
TEXTS = [f"note {i}: the weekend plan was a hike by the lake, then dinner at eight" for i in range(12)]


def _stdio(path):
    env = {k: os.environ[k] for k in ("VXMEM_EMBEDDER", "VXMEM_CACHE_DIR") if k in os.environ}
    return mcp.Client(mcp.StdioServerParameters(command=sys.executable, args=["-m", "vxmem", "mcp", "--db", str(path)],
                                                env=env, cwd=str(ROOT)))


def _wire(result) -> str:
    """A result as JSON on the wire."""
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))


def _seeded(path):
    with Vectrix(path) as db:
        for i, text in enumerate(TEXTS):
            db.remember(text, user="default", session="default/chat", timestamp=T0 + i * 60)
    return path


def _listed_and_recalled(path):
    async def main():
        async with _stdio(path) as client:
            listed = await client.list_tools()
            found = await client.call_tool("recall", {"query": "weekend plan", "limit": 10})
            return listed, found

    return asyncio.run(main())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The tools listed by ``vxmem mcp``, and its answer to a recall of 10."""
    return _listed_and_recalled(_seeded(tmp_path_factory.mktemp("tools") / "m.vxdb"))


def test_the_tools_are_few_and_their_schemas_small(served):
    listed, _ = served
    assert {t.name for t in listed.tools} == set(HINTS)
    assert len(_wire(listed)) < SCHEMA_BOUND
    for tool in listed.tools:
        assert not SERVERS_OWN & set(tool.input_schema["properties"]), tool.name
        assert len(tool.input_schema["properties"]) <= 5, tool.name


def test_every_tool_and_argument_is_described_in_plain_words(served):
    listed, _ = served
    for tool in listed.tools:
        assert tool.description and not MARKUP.search(tool.description), tool.name
        for name, prop in tool.input_schema["properties"].items():
            words = prop.get("description", "")
            assert re.fullmatch(r"[A-Za-z].{10,}\.", words), (tool.name, name, words)
            assert not MARKUP.search(words), (tool.name, name, words)
            assert "title" not in prop, (tool.name, name)


def test_each_tool_says_what_it_changes(served):
    listed, _ = served
    for tool in listed.tools:
        a = tool.annotations
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint) == HINTS[tool.name], tool.name
        assert a.open_world_hint is False, tool.name


def test_a_recall_answers_each_memorys_id_text_time_and_score_only(served):
    _, found = served
    assert not found.is_error, found.content
    results = found.structured_content["results"]
    assert len(results) == 10 and {r["text"] for r in results} <= set(TEXTS)
    for r in results:
        assert set(r) == {"id", "text", "time", "score"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["time"]) and r["score"] > 0
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    # The text a client without structured content reads: the same, as one line of JSON.
    assert json.loads(found.content[0].text) == found.structured_content and "\n" not in found.content[0].text
    assert len(_wire(found)) / sum(len(r["text"]) for r in results) < ANSWER_BOUND


def test_vxmem_serve_offers_the_same_tools_at_mcp(tmp_path, served):
    listed, _ = served
    with rest_server(tmp_path / "http.vxdb") as url:
        async def main():
            http = httpx2.AsyncClient(timeout=60)
            async with mcp.Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                return await client.list_tools()

        over_http = asyncio.run(main())
    assert [t.model_dump() for t in over_http.tools] == [t.model_dump() for t in listed.tools]
