"""The REST API, served for real: ``vxmem serve`` in a child process, driven over HTTP with httpx."""

import re

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import Vectrix

from helpers import DAY, T0
from servers import free_port, rest_server, run_vxmem

TOKEN = "test-token-not-a-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module, with a token: (client, database path)."""
    path = tmp_path_factory.mktemp("rest") / "served.vxdb"
    with rest_server(path, "--token", TOKEN) as url, httpx.Client(base_url=url, headers=AUTH, timeout=30) as c:
        yield c, path


def _count(path) -> int:
    """How many memories the database holds, read by a handle of this process (read-only)."""
    with Vectrix(path, read_only=True) as db:
        return len(db)


def test_every_endpoint_serves_its_verb(served):
    c, _ = served
    u = {"user": "every"}
    first = c.post("/v1/remember", json={**u, "text": "I prefer dark mode", "session": "chat", "timestamp": T0})
    assert first.status_code == 200, first.text
    mid = first.json()["id"]
    many = c.post("/v1/remember_many", json={**u, "session": "chat", "timestamp": T0 + 60, "memories": [
        "we talked about tea", {"text": "The user lives in Paris", "kind": "fact"}]})
    assert many.status_code == 200 and len(many.json()["ids"]) == 2

    hits = c.post("/v1/recall", json={**u, "query": "dark mode", "now": T0 + DAY, "recency_weight": 0.0}).json()
    top = hits["results"][0]
    assert top["id"] == mid and top["session"] == "chat" and top["created"] == T0
    assert {"relevance", "recency", "feedback", "score"} <= set(top["breakdown"])
    assert hits["blend"]["recency_weight"] == 0.0

    fixed = c.post("/v1/feedback", json={**u, "id": mid, "outcome": "corrected", "correction": "I prefer light mode",
                                         "timestamp": T0 + 2 * DAY}).json()["id"]
    chain = c.post("/v1/history", json={**u, "id": mid, "now": T0 + 3 * DAY}).json()["entries"]
    assert [e["id"] for e in chain] == [mid, fixed] and chain[0]["superseded_by"] == fixed

    block = c.post("/v1/context", json={**u, "query": "theme", "session": "chat", "now": T0 + 3 * DAY}).json()
    assert "light mode" in block["text"] and block["tokens_used"] <= block["token_budget"]
    turns = c.post("/v1/turns", json={**u, "session": "chat", "now": T0 + 3 * DAY}).json()["turns"]
    assert [t["turn"] for t in turns] == [0, 1]

    assert c.post("/v1/forget", json={**u, "ids": [mid], "now": T0 + 3 * DAY}).json() == {"deleted": 1}
    c.post("/v1/remember", json={**u, "text": "short lived", "ttl_days": 1, "timestamp": T0})
    assert c.post("/v1/expire", json={**u, "now": T0 + 5 * DAY}).json() == {"deleted": 1}


def test_openapi_and_the_docs_are_served(served):
    c, _ = served
    spec = c.get("/openapi.json").json()
    verbs = {"remember", "remember_many", "recall", "feedback", "forget", "context", "history", "turns", "expire"}
    assert {f"/v1/{v}" for v in verbs} <= set(spec["paths"])
    recall = spec["components"]["schemas"]["RecallBody"]["properties"]
    assert recall["limit"]["maximum"] == 100 and recall["limit"]["default"] == 10
    assert recall["hybrid_weight"]["anyOf"][0]["maximum"] == 1.0
    assert "swagger" in c.get("/docs").text.lower()


@pytest.mark.parametrize("body, status, kind", [
    ({"query": "x", "limit": 101}, 422, "invalid"),
    ({"query": "x", "token_budget": 10**9}, 422, "invalid"),
    ({"query": "x", "half_life_days": 0}, 422, "invalid"),
    ({"query": "x", "filter": {"_vx_kind": "turn"}}, 422, "invalid"),
    ({"query": "x", "surprise": 1}, 422, "invalid"),
    ({}, 422, "invalid"),
])
def test_a_refused_recall_is_json_with_a_fitting_status(served, body, status, kind):
    c, _ = served
    r = c.post("/v1/recall", json=body)
    assert r.status_code == status and r.json()["error"] == kind
    assert "Traceback" not in r.text and "\n" not in r.json()["message"]


def test_every_error_status_and_nothing_written(served):
    c, path = served
    u = {"user": "errors"}
    mid = c.post("/v1/remember", json={**u, "text": "kept", "id": "errors-1", "session": "s", "turn": 5,
                                       "timestamp": T0}).json()["id"]
    before = _count(path)
    bad = [
        (c.post("/v1/remember", content=b"{not json", headers={"content-type": "application/json"}), 400),
        (c.post("/v1/feedback", json={**u, "id": "no-such-id", "outcome": "useful"}), 404),
        (c.post("/v1/history", json={**u, "id": "no-such-id"}), 404),
        (c.post("/v1/nowhere", json={}), 404),
        (c.post("/v1/remember", json={**u, "text": "again", "id": mid}), 409),
        (c.post("/v1/remember", json={**u, "text": "same turn", "session": "s", "turn": 5}), 409),
        (c.post("/v1/remember", json={**u, "text": "x" * 1_100_000}), 413),
        (c.post("/v1/remember", json={**u, "text": "reserved", "metadata": {"_vx_kind": "fact"}}), 422),
        (c.post("/v1/remember", json={**u, "text": "bad kind", "kind": "rumour"}), 422),
        (c.post("/v1/remember_many", json={**u, "memories": ["fine", {"text": "", "kind": "fact"}]}), 422),
        (c.post("/v1/feedback", json={**u, "id": mid, "outcome": "useful", "correction": "no"}), 422),
        (c.post("/v1/remember", json={**u, "text": "bad user", "user": "a/b"}), 422),
    ]
    for r, status in bad:
        assert r.status_code == status, (status, r.text)
        assert set(r.json()) == {"error", "message"} and "Traceback" not in r.text
    assert _count(path) == before


def test_a_streamed_body_over_the_limit_is_refused_with_413(served):
    c, path = served
    before = _count(path)

    def chunks():
        for _ in range(40):
            yield b"x" * 50_000

    r = c.post("/v1/remember", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "too_large"
    assert _count(path) == before


def test_the_token_is_required_on_every_verb_and_checked(served):
    c, _ = served
    url = str(c.base_url).rstrip("/")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        r = httpx.post(f"{url}/v1/recall", json={"query": "x"}, headers=headers)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{url}/healthz").status_code == 200


def test_the_description_loads_without_the_token_names_the_verbs_and_declares_it(served):
    c, _ = served
    url = str(c.base_url).rstrip("/")
    spec = httpx.get(f"{url}/openapi.json").json()  # no token: it describes the API, it holds no data
    ops = [op for p, methods in spec["paths"].items() if p.startswith("/v1/") for op in methods.values()]
    verbs = {p.removeprefix("/v1/"): ops["post"] for p, ops in spec["paths"].items()
             if p.startswith("/v1/") and "post" in ops}
    assert {v: op["operationId"] for v, op in verbs.items()} == {v: v for v in verbs} and len(verbs) == 10
    assert {op["operationId"] for op in ops} - set(verbs) == {"get_memory", "list_memories", "patch_memory",
                                                               "delete_memory", "stats"}
    scheme = spec["components"]["securitySchemes"]["HTTPBearer"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    assert all(op["security"] == [{"HTTPBearer": []}] for op in ops)
    docs = httpx.get(f"{url}/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert httpx.post(f"{url}/v1/recall", json={"query": "x"}).status_code == 401
    # offline: the page names no other host, and every file it loads comes from the server, with no key
    assert re.findall(r"(?:src|href)=['\"]?(https?:)?//", docs.text) == []
    files = re.findall(r"['\"](/docs/assets/[\w.-]+)['\"]", docs.text)
    assert {f.rsplit("/", 1)[1] for f in files} >= {"swagger-ui-bundle.js", "swagger-ui.css"}
    for f in files:
        got = httpx.get(f"{url}{f}")
        assert got.status_code == 200 and len(got.content) > 500, f  # the icon is the smallest
    sneaky = httpx.get(f"{url}/docs/assets/..%2F..%2Fv1%2Fstats")  # the files' folder holds no way out
    assert sneaky.status_code == 404 and "memories" not in sneaky.text


def test_binding_off_the_loopback_without_a_token_refuses_to_start(tmp_path):
    out = run_vxmem("serve", "--db", str(tmp_path / "x.vxdb"), "--host", "0.0.0.0", "--port", str(free_port()),
                    env={"VXMEM_TOKEN": ""})
    assert out.returncode == 2
    assert "token" in out.stderr and out.stderr.startswith("vxmem: error:")
    out = run_vxmem("serve", "--db", str(tmp_path / "x.vxdb"), "--host", "0.0.0.0", "--port", str(free_port()))
    assert out.returncode == 2 and "--token" in out.stderr
    assert not (tmp_path / "x.vxdb").exists()  # refused before anything was opened


def test_binding_off_the_loopback_with_a_token_demands_it(tmp_path):
    with rest_server(tmp_path / "open.vxdb", "--host", "0.0.0.0", env={"VXMEM_TOKEN": TOKEN}) as url:
        assert httpx.post(f"{url}/v1/recall", json={"query": "x"}).status_code == 401
        assert httpx.post(f"{url}/v1/recall", json={"query": "x"}, headers=AUTH).status_code == 200


def test_cors_is_off_unless_origins_are_given(served, tmp_path):
    c, _ = served
    pre = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    assert "access-control-allow-origin" not in c.options("/v1/recall", headers=pre).headers
    with rest_server(tmp_path / "cors.vxdb", "--cors-origin", "https://app.example") as url:
        ok = httpx.options(f"{url}/v1/recall", headers={**pre, "Origin": "https://app.example"})
        assert ok.headers["access-control-allow-origin"] == "https://app.example"
        other = httpx.options(f"{url}/v1/recall", headers=pre)
        assert "access-control-allow-origin" not in other.headers


def test_one_user_never_reads_or_forgets_anothers_memories(served):
    c, path = served
    a = c.post("/v1/remember", json={"user": "alice", "text": "alice likes green tea", "session": "shared",
                                     "pinned": True, "timestamp": T0}).json()["id"]
    c.post("/v1/remember", json={"user": "alice", "text": "alice's turn about tea", "session": "shared",
                                 "timestamp": T0})
    bob = {"user": "bob", "now": T0 + DAY}
    assert c.post("/v1/recall", json={**bob, "query": "green tea"}).json()["results"] == []
    block = c.post("/v1/context", json={**bob, "query": "tea", "session": "shared"}).json()
    assert block["pinned"] == block["recent"] == block["recalled"] == []
    assert c.post("/v1/turns", json={**bob, "session": "shared"}).json()["turns"] == []
    assert c.post("/v1/history", json={**bob, "id": a}).status_code == 404
    assert c.post("/v1/feedback", json={"user": "bob", "id": a, "outcome": "dead_end"}).status_code == 404
    assert c.post("/v1/forget", json={**bob, "ids": [a]}).json() == {"deleted": 0}
    assert c.post("/v1/forget", json={**bob, "kinds": ["turn", "fact", "pinned"], "all": True}).json() == {
        "deleted": 0}
    assert c.post("/v1/expire", json={**bob, "now": T0 + 10_000 * DAY}).json() == {"deleted": 0}
    with Vectrix(path, read_only=True) as db:
        assert a in db and "_vx_feedback" not in db.get(a).metadata
    mine = c.post("/v1/recall", json={"user": "alice", "query": "green tea", "now": T0 + DAY}).json()["results"]
    assert mine[0]["id"] == a and mine[0]["session"] == "shared"


def test_a_forget_that_names_no_scope_is_refused_unless_it_says_all(served):
    c, path = served
    u = {"user": "sweeping"}
    for session in ("one", "two"):
        c.post("/v1/remember", json={**u, "text": f"a turn of {session}", "session": session, "timestamp": T0})
    before = _count(path)
    for body in ({}, {"kinds": ["turn"]}, {"now": T0 + DAY}):
        r = c.post("/v1/forget", json={**u, **body})
        assert r.status_code == 422 and "all" in r.json()["message"], r.text
    assert _count(path) == before
    assert c.post("/v1/forget", json={**u, "all": True}).json() == {"deleted": 2}
    assert c.post("/v1/forget", json={**u, "all": "yes"}).status_code == 422


def test_two_users_may_choose_one_id_and_neither_learns_of_the_other(served):
    c, path = served
    ids = {}
    for user in ("same-id-ann", "same-id-bob"):
        r = c.post("/v1/remember", json={"user": user, "text": f"{user} likes tea", "id": "fixed-1",
                                         "kind": "fact", "timestamp": T0})
        assert r.status_code == 200, r.text
        ids[user] = r.json()["id"]
    assert ids == {"same-id-ann": "fixed-1", "same-id-bob": "fixed-1"}
    bob = {"user": "same-id-bob"}
    again = c.post("/v1/remember", json={**bob, "text": "again", "id": "fixed-1"})
    assert again.status_code == 409 and "'fixed-1'" in again.json()["message"]
    fixed = c.post("/v1/feedback", json={**bob, "id": "fixed-1", "outcome": "corrected",
                                         "correction": "same-id-bob likes coffee", "timestamp": T0 + DAY}).json()["id"]
    chain = c.post("/v1/history", json={**bob, "id": "fixed-1"}).json()["entries"]
    assert [(e["id"], e["superseded_by"]) for e in chain] == [("fixed-1", fixed), (fixed, None)]
    assert chain[1]["supersedes"] == ["fixed-1"]
    hits = c.post("/v1/recall", json={"user": "same-id-ann", "query": "likes tea", "now": T0 + DAY}).json()
    assert [(h["id"], h["text"]) for h in hits["results"]] == [("fixed-1", "same-id-ann likes tea")]
    assert c.post("/v1/recall", json={"user": "same-id-ann", "query": "likes tea", "exclude_ids": ["fixed-1"],
                                      "now": T0 + DAY}).json()["results"] == []
    assert c.post("/v1/forget", json={**bob, "ids": ["fixed-1"]}).json() == {"deleted": 1}
    with Vectrix(path, read_only=True) as db:  # each user's id is stored under their name
        assert db.get("same-id-ann/fixed-1").text == "same-id-ann likes tea"
        assert "same-id-bob/fixed-1" not in db


def test_forgetting_a_correction_brings_back_what_it_corrected(served):
    c, _ = served
    u = {"user": "unfixed"}
    old = c.post("/v1/remember", json={**u, "text": "unfixed lives in Paris", "kind": "fact",
                                       "timestamp": T0}).json()["id"]
    fix = c.post("/v1/feedback", json={**u, "id": old, "outcome": "corrected", "correction": "unfixed lives in Lyon",
                                       "timestamp": T0 + DAY}).json()["id"]
    assert c.post("/v1/forget", json={**u, "ids": [fix]}).json() == {"deleted": 1}
    [entry] = c.post("/v1/history", json={**u, "id": old}).json()["entries"]
    assert entry["live"] and entry["superseded_by"] is None
    hits = c.post("/v1/recall", json={**u, "query": "where does unfixed live", "now": T0 + 2 * DAY}).json()
    assert [h["id"] for h in hits["results"]] == [old]


# ---------------------------------------------------------------------------- isolation, as a property

PEOPLE = ["h-ann", "h-ben", "h-cy"]  # users of the property test alone; they share session names
SESSIONS = [None, "chat", "work"]
WORDS = ["tea", "green", "paris", "mode", "dark", "report", "cat"]
OPS = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(PEOPLE), st.sampled_from(SESSIONS),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), st.sampled_from(["turn", "fact", "pinned"])),
    st.tuples(st.sampled_from(["recall", "context", "turns"]), st.sampled_from(PEOPLE), st.sampled_from(SESSIONS),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["history", "feedback", "forget_ids"]), st.sampled_from(PEOPLE),
              st.integers(min_value=0, max_value=10_000)),
    st.tuples(st.just("forget_session"), st.sampled_from(PEOPLE), st.sampled_from(SESSIONS)),
)


class Ledger:
    """Who made each memory the property test made, and which are still there."""

    def __init__(self):
        self.owner: dict[str, str] = {}
        self.clock = T0

    def tick(self) -> float:
        self.clock += 60
        return self.clock


LEDGER = Ledger()  # shared by the examples: the server keeps what each example made


def _returned_ids(verb: str, body: dict) -> list[str]:
    if verb == "recall":
        return [r["id"] for r in body["results"]]
    if verb == "context":
        return [r["id"] for part in ("pinned", "recent", "recalled") for r in body[part]]
    if verb == "turns":
        return [r["id"] for r in body["turns"]]
    return [e["id"] for e in body.get("entries", ())]


def _apply(c, ledger: Ledger, db, op) -> None:
    verb, user = op[0], op[1]
    now = ledger.tick()
    if verb == "remember":
        _, _, session, words, kind = op
        r = c.post("/v1/remember", json={"user": user, "session": session, "text": " ".join(words), "kind": kind,
                                         "timestamp": now})
        assert r.status_code == 200, r.text
        ledger.owner[r.json()["id"]] = user
        return
    if verb in ("recall", "context", "turns"):
        body = {"user": user, "session": op[2], "now": now}
        if verb != "turns":
            body["query"] = " ".join(op[3])
        r = c.post(f"/v1/{verb}", json=body)
        assert r.status_code == 200, r.text
        assert all(ledger.owner.get(i) == user for i in _returned_ids(verb, r.json())), (op, r.json())
        return
    known = sorted(ledger.owner)
    before = {i for i in known if i in db}
    if verb == "forget_session":
        r = c.post("/v1/forget", json={"user": user, "session": op[2], "kinds": ["turn", "fact", "pinned"],
                                       "now": now, "all": op[2] is None})
    else:
        target = known[op[2] % len(known)] if known else "none-yet"
        if verb == "forget_ids":
            r = c.post("/v1/forget", json={"user": user, "ids": [target], "now": now})
        else:
            r = c.post(f"/v1/{verb}", json={"user": user, "id": target, "outcome": "useful", "timestamp": now}
                       if verb == "feedback" else {"user": user, "id": target, "now": now})
            mine = ledger.owner.get(target) == user and target in before
            assert r.status_code == (200 if mine else 404), (op, r.text)
            if mine and verb == "history":
                assert all(ledger.owner.get(i) == user for i in _returned_ids(verb, r.json()))
    gone = {i for i in before if i not in db}
    assert all(ledger.owner[i] == user for i in gone), (op, gone)  # only the caller's own went


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=12))
def test_no_request_reaches_another_users_memories(served, ops):
    c, path = served
    ledger = LEDGER
    with Vectrix(path, read_only=True) as db:
        for op in ops:
            _apply(c, ledger, db, op)



def test_the_models_spell_the_librarys_choices_and_defaults():
    from typing import get_args

    from vxmem.core.keys import KINDS, OUTCOMES
    from vxmem.memory.request import RecallRequest
    from vxmem.memory.stages import PRESETS
    from vxmem.ranking.blend import BLEND_FIELDS
    from vxmem.ranking.scoring import RECENCY_FROM
    from vxmem.serve import schemas
    from vxmem.store.arguments import SEARCH_MODES

    assert get_args(schemas.Kind) == KINDS and get_args(schemas.Outcome) == OUTCOMES
    assert get_args(schemas.Mode) == SEARCH_MODES and get_args(schemas.RecencyFrom) == RECENCY_FROM
    assert get_args(schemas.Preset) == PRESETS
    assert set(BLEND_FIELDS) <= set(schemas.RecallBody.model_fields) & set(schemas.ContextBody.model_fields)
    request = RecallRequest(query="x")
    body = schemas.RecallBody(query="x")
    for name in ("limit", "token_budget", "include_superseded", "mode", "rerank", "recency_from", "preset"):
        assert getattr(body, name) == getattr(request, name), name


def test_the_documented_curl_example_runs_as_written(tmp_path):
    import json
    import re
    import shutil
    import subprocess

    from helpers import ROOT

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    page = (ROOT / "README.md").read_text(encoding="utf-8")  # docs/SERVING.md shows the same
    block = re.search(r"<!--\s*serve\s*-->\s*\n```bash\n(.*?)^```", page, re.S | re.M).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == 2 and all("http://127.0.0.1:8765/v1/" in line for line in lines)
    with rest_server(tmp_path / "readme.vxdb") as url:
        outputs = []
        for line in lines:  # the server's port is a free one, not 8765: the only change
            done = subprocess.run(["bash", "-c", line.replace("http://127.0.0.1:8765", url)], capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            outputs.append(json.loads(done.stdout))
    assert outputs[1]["results"][0]["id"] == outputs[0]["id"]
    assert outputs[1]["results"][0]["text"] == "I prefer dark mode"
