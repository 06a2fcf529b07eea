"""What the MCP tools cost a model's context: the size of their schemas and of a recall's answer.

    .venv/bin/python -m benchmarks.bench_mcp_tools
    .venv/bin/python -m benchmarks.bench_mcp_tools --trees before=/tmp/old-vxmem,after=.

For each tree (``--trees``, default this checkout), ``vxmem mcp`` of that tree is started on a
database of ``--memories`` short chat turns (hashing embedder) and driven by the official MCP
SDK's stdio client. Measured: the characters of the ``tools/list`` answer as JSON (what a
client puts before the model), the tools' parameters and how many have no description, and the
characters of a ``recall`` answer of ``--limit`` results (its JSON, text and structured content
both, as sent) per character of recalled memory text. Sizes, not times: the figures are the
same on any machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from benchmarks.corpora import bare_sentence
from benchmarks.harness import ROOT, Report, child_env, flags, parse_trees
from vxmem import Vectrix

T0 = 1_700_000_000.0
QUERY = "what did I say about the weekend plans"


def build(path: Path, n: int) -> None:
    """``n`` chat turns of the server's user and session, stored as ``vxmem mcp`` stores them."""
    rng = random.Random(0)
    with Vectrix(path, embedder="hashing") as db:
        db.remember_many([{"text": bare_sentence(rng), "timestamp": T0 + i * 60} for i in range(n)],
                         session="default/chat", user="default")


def wire(model: Any) -> str:
    """A result as JSON on the wire (aliases, no nulls, no spaces)."""
    return json.dumps(model.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))


def undescribed(schema: dict[str, Any]) -> int:
    return sum("description" not in p for p in schema.get("properties", {}).values())


async def measure(tree: str, path: Path, limit: int) -> dict[str, Any]:
    """The figures of one tree's ``vxmem mcp`` on ``path``."""
    env = child_env(tree)
    params = StdioServerParameters(command=sys.executable, args=["-P", "-m", "vxmem", "mcp", "--db", str(path),
                                                                   "--embedder", "hashing"],
                                   env=env, cwd=str(ROOT))
    async with Client(params) as client:
        listed = await client.list_tools()
        found = await client.call_tool("recall", {"query": QUERY, "limit": limit})
    if found.is_error:
        raise SystemExit(f"recall failed in {tree}: {found.content}")
    tools = listed.tools
    texts = sum(len(r["text"]) for r in found.structured_content["results"])
    answer = len(wire(found))
    return {"tools": len(tools), "schema chars": len(wire(listed)),
            "parameters": sum(len(t.input_schema.get("properties", {})) for t in tools),
            "recall parameters": len(next(t for t in tools if t.name == "recall").input_schema["properties"]),
            "undescribed": sum(undescribed(t.input_schema) for t in tools),
            "annotated": sum(t.annotations is not None for t in tools),
            "recalled": len(found.structured_content["results"]), "recalled chars": texts,
            "answer chars": answer, "chars per recalled char": round(answer / max(texts, 1), 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trees", help="name=path,... of vxmem trees to compare (default: this checkout)")
    p.add_argument("--memories", type=int, default=200)
    p.add_argument("--limit", type=int, default=10)
    args = flags(p).parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="vxmem-bench-mcp-"))
    rows = []
    try:
        for name, tree in parse_trees(args.trees):
            path = work / f"{name}.vxdb"
            build(path, args.memories)
            rows.append({"tree": name, **asyncio.run(measure(tree, path, args.limit))})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Report(f"MCP tools: schema size and recall answer size ({args.memories} memories, limit {args.limit})")
    out.table("tools", rows, note="schema chars: the tools/list answer as JSON; answer chars: one recall's "
                                  "CallToolResult as JSON (text and structured content)")
    print(f"\n{out.title}\n")
    out.print()
    out.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
