"""The servers read their inputs strictly, served for real: ``vxmem serve`` over HTTP (httpx) and
``vxmem mcp`` through the MCP SDK's own stdio client.

JSON ``true`` and ``false`` are no number and no time; an MCP argument the tool does not know is
an error, not dropped; a body not sent as JSON is a 415; and ``vxmem serve`` listens where it
says, or says in one line why it cannot, before it creates anything.
"""

import asyncio
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from vxmem import Vectrix

from helpers import DAY, ROOT, T0
from servers import free_port, rest_server, run_vxmem

# The least each verb needs; the sweeps below add one refused argument to it.
MINIMAL = {"remember": {"text": "x"}, "remember_many": {"memories": ["x"]}, "recall": {"query": "x"},
           "feedback": {"id": "no-such-id", "outcome": "useful"}, "forget": {"session": "bt"},
           "context": {"query": "x"}, "history": {"id": "no-such-id"}, "turns": {}, "expire": {},
           "consolidate": {"session": "bt"}}


def count(path) -> int:
    """How many memories the database holds, read by a handle of this process (read-only)."""
    with Vectrix(path, read_only=True) as db:
        return len(db)


def seeded(path):
    """A database with two old memories of the default user's session ``bt``: a forget that
    read ``true`` as a day would delete them."""
    with Vectrix(path) as db:
        db.remember("an old turn about tea", user="default", session="bt", timestamp=T0)
        db.remember("another old turn", user="default", session="bt", timestamp=T0 + 60)
    return path


def numeric(prop: dict) -> bool:
    """Whether a JSON schema property takes a number (alone or among other types)."""
    types = [prop.get("type")] + [a.get("type") for a in prop.get("anyOf", ())]
    return "number" in types or "integer" in types


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module over a seeded database: (client, database path)."""
    path = seeded(tmp_path_factory.mktemp("strict") / "served.vxdb")
    with rest_server(path) as url, httpx.Client(base_url=url, timeout=30) as c:
        yield c, path


# ---------------------------------------------------------------------------- true and false are no numbers


def test_rest_refuses_true_as_a_time_and_writes_or_deletes_nothing(served):
    c, path = served
    before = count(path)
    for verb, body, field in [("remember", {"text": "x", "timestamp": True}, "timestamp"),
                              ("recall", {"query": "tea", "now": True}, "now"),
                              ("forget", {"older_than": True, "session": "bt"}, "older_than"),
                              ("forget", {"older_than": False, "session": "bt"}, "older_than")]:
        r = c.post(f"/v1/{verb}", json=body)
        assert r.status_code == 422, (verb, body, r.text)
        assert r.json()["error"] == "invalid" and r.json()["message"].startswith(f"{field}: ")
        assert "true or false" in r.json()["message"]
    assert count(path) == before


def test_rest_refuses_a_boolean_for_every_number_of_every_endpoint(served):
    c, path = served
    spec = c.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    verbs = {p.removeprefix("/v1/") for p, ops in spec["paths"].items() if p.startswith("/v1/") and "post" in ops}
    assert verbs == set(MINIMAL)  # a new endpoint with a body gets its minimal body here
    before, checked = count(path), 0
    for verb in sorted(verbs):
        ref = spec["paths"][f"/v1/{verb}"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        for field, prop in schemas[ref.rsplit("/", 1)[1]]["properties"].items():
            if numeric(prop):
                for value in (True, False):
                    r = c.post(f"/v1/{verb}", json={**MINIMAL[verb], field: value})
                    assert r.status_code == 422, (verb, field, value, r.text)
                    assert f"{field}: " in r.json()["message"] and "true or false" in r.json()["message"]
                    checked += 1
    for field, prop in schemas["MemoryItem"]["properties"].items():  # remember_many's items
        if numeric(prop):
            r = c.post("/v1/remember_many", json={"memories": [{"text": "x", field: True}]})
            assert r.status_code == 422 and f"{field}: " in r.json()["message"], (field, r.text)
            checked += 1
    assert checked > 30 and count(path) == before


def test_numbers_are_still_numbers(served):
    c, _ = served
    r = c.post("/v1/recall", json={"query": "tea", "now": T0 + DAY, "limit": 1, "hybrid_weight": 0.5,
                                   "session": "bt"})
    assert r.status_code == 200 and len(r.json()["results"]) == 1
    assert c.post("/v1/recall", json={"query": "tea", "now": "2023-11-15T00:00:00Z"}).status_code == 200
    assert c.post("/v1/recall", json={"query": "tea", "hybrid_weight": 2}).status_code == 422


def flag(prop: dict) -> bool:
    """Whether a JSON schema property takes a boolean (alone or beside null)."""
    return "boolean" in [prop.get("type")] + [a.get("type") for a in prop.get("anyOf", ())]


def test_rest_takes_only_true_or_false_for_a_flag(served):
    c, path = served
    spec = c.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    before, checked = count(path), 0
    for verb in sorted(MINIMAL):
        ref = spec["paths"][f"/v1/{verb}"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        for field, prop in schemas[ref.rsplit("/", 1)[1]]["properties"].items():
            if flag(prop):
                for value in ("yes", "true", 1, 0):
                    r = c.post(f"/v1/{verb}", json={**MINIMAL[verb], field: value})
                    assert r.status_code == 422 and f"{field}: " in r.json()["message"], (verb, field, value, r.text)
                    checked += 1
    r = c.post("/v1/remember_many", json={"memories": [{"text": "x", "pinned": "yes"}]})
    assert r.status_code == 422 and "pinned" in r.json()["message"], r.text
    assert checked >= 20 and count(path) == before
    assert c.post("/v1/remember", json={"text": "a pinned fact", "pinned": True}).status_code == 200


# ---------------------------------------------------------------------------- MCP: strict arguments


def mcp_client(path, *flags):
    """A client of ``vxmem mcp --db path *flags``, started as a child process (closing it ends the server)."""
    mcp = pytest.importorskip("mcp")
    env = {k: os.environ[k] for k in ("VXMEM_EMBEDDER", "VXMEM_CACHE_DIR") if k in os.environ}
    return mcp.Client(mcp.StdioServerParameters(command=sys.executable, args=["-m", "vxmem", "mcp", "--db", str(path),
                                                                              *flags], env=env, cwd=str(ROOT)))


def refused(result, tool: str, *words: str) -> bool:
    """Whether a tool call was a one-line tool error of ``tool`` that says every one of ``words``."""
    text = result.content[0].text if result.content else ""
    return (result.is_error and "\n" not in text and text.startswith(f"Error executing tool {tool}: ")
            and all(w in text for w in words))


def test_mcp_takes_no_boolean_for_a_number_nor_a_word_for_a_flag(tmp_path):
    path = seeded(tmp_path / "bools.vxdb")

    async def main():
        async with mcp_client(path) as client:
            calls = [(t.name, field) for t in (await client.list_tools()).tools
                     for field, prop in t.input_schema["properties"].items() if numeric(prop)]
            got = [(tool, field, await client.call_tool(tool, {**MINIMAL[tool], field: True})) for tool, field in calls]
            forgot = await client.call_tool("forget", {"older_than": True, "session": "bt"})
            pinned = await client.call_tool("remember", {"text": "x", "pinned": "yes"})
            return got, forgot, pinned

    got, forgot, pinned = asyncio.run(main())
    assert refused(pinned, "remember", "pinned: ")
    assert {(tool, field) for tool, field, _ in got} == {("recall", "limit"), ("context", "token_budget"),
                                                         ("forget", "older_than")}
    for tool, field, result in got:
        assert refused(result, tool, f"{field}: ", "true or false"), (tool, field, result.content)
    assert refused(forgot, "forget", "older_than")
    assert count(path) == 2


def test_mcp_refuses_an_unknown_argument_and_writes_nothing(tmp_path):
    path = tmp_path / "unknown.vxdb"

    async def main():
        async with mcp_client(path, "--user", "alice") as client:
            return [(tool, word, await client.call_tool(tool, arguments)) for tool, arguments, word in [
                ("remember", {"text": "t", "sesion": "work"}, "sesion"),
                ("remember", {"text": "t", "sesion": None}, "sesion"),
                ("remember", {"text": "t", "user": "eve"}, "user"),  # the server's --user decides, never a client
                ("recall", {"query": "q", "limt": 1}, "limt"),
                ("forget", {"sessions": "work"}, "sessions"),
            ]]

    for tool, word, result in asyncio.run(main()):
        assert refused(result, tool, f"{word}: Extra inputs are not permitted"), (tool, word, result.content)
    assert not path.exists() or count(path) == 0


def test_mcp_takes_a_text_that_looks_like_json_as_text(tmp_path):
    path = tmp_path / "json.vxdb"

    async def main():
        async with mcp_client(path, "--user", "alice") as client:
            first = await client.call_tool("remember", {"text": "[1, 2]", "session": "work"})
            second = await client.call_tool("remember", {"text": '{"a": 1}', "session": "work", "user": None})
            return first, second

    first, second = asyncio.run(main())
    assert not first.is_error and refused(second, "remember", "user: ")
    with Vectrix(path, read_only=True) as db:
        stored = db.get(first.structured_content["id"])
        assert stored.text == "[1, 2]" and stored.metadata["_vx_user"] == "alice" and len(db) == 1


# ---------------------------------------------------------------------------- REST: the body's content type


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_a_body_not_sent_as_json_gets_415_that_names_the_header(served, content_type):
    c, path = served
    before = count(path)
    headers = {} if content_type is None else {"content-type": content_type}
    r = c.post("/v1/remember", content=b'{"text": "sent as a form", "session": "bt"}', headers=headers)
    assert r.status_code == 415, r.text
    assert set(r.json()) == {"error", "message"} and "Content-Type: application/json" in r.json()["message"]
    assert count(path) == before


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/merge-patch+json"])
def test_json_by_any_of_its_names_is_read(served, content_type):
    c, _ = served
    r = c.post("/v1/recall", content=b'{"query": "tea"}', headers={"content-type": content_type})
    assert r.status_code == 200, r.text


# ---------------------------------------------------------------------------- vxmem serve: where it listens


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "http"])
def test_a_port_out_of_range_is_refused_before_anything_is_created(tmp_path, port):
    out = run_vxmem("serve", "--db", str(tmp_path / "p.vxdb"), "--port", port)
    assert out.returncode == 2 and "--port" in out.stderr and "0 to 65535" in out.stderr
    assert "vxmem serve:" not in out.stderr and not (tmp_path / "p.vxdb").exists()


def test_a_port_in_use_is_one_line_and_creates_nothing(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_vxmem("serve", "--db", str(tmp_path / "p.vxdb"), "--port", str(port))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"vxmem: error: cannot listen on 127.0.0.1:{port}: ")
    assert out.stderr.count("\n") == 1 and "vxmem serve:" not in out.stderr and "ERROR" not in out.stderr
    assert not (tmp_path / "p.vxdb").exists()


def test_an_unknown_host_is_one_line_and_creates_nothing(tmp_path):
    out = run_vxmem("serve", "--db", str(tmp_path / "h.vxdb"), "--host", "no-such-host.invalid",
                    "--port", str(free_port()), "--token", "test-token-not-a-secret")
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("vxmem: error: cannot listen on no-such-host.invalid:")
    assert out.stderr.count("\n") == 1 and not (tmp_path / "h.vxdb").exists()


def test_the_announced_port_is_the_one_it_listens_on(tmp_path):
    log = tmp_path / "serve.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "vxmem", "serve", "--db", str(tmp_path / "any.vxdb"),
                                 "--port", "0"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(600):
            if "http://" in log.read_text() or proc.poll() is not None:
                break
            time.sleep(0.1)  # a poll interval, never asserted on
        banner = log.read_text()
        url = banner[banner.index("http://"):].split()[0]
        assert not url.endswith(":0")
        assert httpx.get(f"{url}/healthz", timeout=30).json() == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---------------------------------------------------------------------------- messages in the client's words


def test_a_conflict_names_the_session_as_the_client_named_it(served):
    c, path = served
    before = count(path)
    assert c.post("/v1/remember", json={"text": "first", "session": "chat", "turn": 7}).status_code == 200
    for verb, body in [("remember", {"text": "again", "session": "chat", "turn": 7}),
                       ("remember_many", {"memories": [{"text": "again", "turn": 7}], "session": "chat"})]:
        r = c.post(f"/v1/{verb}", json=body)
        assert r.status_code == 409, r.text
        assert "session 'chat'" in r.json()["message"] and "default/" not in r.json()["message"]
    assert count(path) == before + 1


def test_an_id_or_a_session_of_only_spaces_is_refused(served):
    c, path = served
    before = count(path)
    for body, field in [({"text": "x", "session": "  "}, "session"), ({"text": "x", "id": " "}, "id")]:
        r = c.post("/v1/remember", json=body)
        assert r.status_code == 422 and r.json()["message"].startswith(f"{field}: "), r.text
    assert count(path) == before


def test_a_blank_query_is_refused_as_a_blank_text_is(served):
    c, path = served
    before = count(path)
    for verb, body, field in [("remember", {"text": "   "}, "text"), ("recall", {"query": "   "}, "query"),
                              ("context", {"query": " \t"}, "query")]:
        r = c.post(f"/v1/{verb}", json=body)
        assert r.status_code == 422 and field in r.json()["message"], (verb, r.text)
    assert count(path) == before
