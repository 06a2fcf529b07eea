"""The memory served whole, for real: ``/v1/memories`` (by id, by pages, metadata, deletion),
``/v1/consolidate``, ``/v1/stats``, ``/healthz``, ``/metrics`` and the access log, on a
``vxmem serve`` child process driven with httpx."""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from vxmem import Vectrix

from helpers import DAY, T0
from servers import llm_stub, rest_server


def _keyed(path, user, *flags):
    done = subprocess.run([sys.executable, "-m", "vxmem", "keys", "add", "--db", str(path), "--user", user, *flags],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {"Authorization": f"Bearer {done.stdout.strip().splitlines()[-1]}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One keyed server: (client, database path, alice's headers, bob's headers, the log file)."""
    root = tmp_path_factory.mktemp("records")
    path = root / "records.vxdb"
    alice, bob = _keyed(path, "alice"), _keyed(path, "bob")
    with open(root / "stderr.log", "w+") as log, rest_server(path, log=log) as url, \
            httpx.Client(base_url=url, timeout=30) as c:
        yield c, path, alice, bob, log


def test_a_memory_is_read_updated_and_deleted_by_id_by_its_user_alone(served):
    c, path, alice, bob, _ = served
    mid = c.post("/v1/remember", json={"text": "alice's locker is 42", "id": "gym/locker", "kind": "fact",
                                       "metadata": {"topic": "gym"}, "timestamp": T0}, headers=alice).json()["id"]
    got = c.get(f"/v1/memories/{mid}", headers=alice)
    assert got.status_code == 200 and got.json()["text"] == "alice's locker is 42" and mid == "gym/locker"
    assert got.json()["metadata"] == {"topic": "gym"} and got.json()["kind"] == "fact"
    assert c.get(f"/v1/memories/{mid}", headers=bob).status_code == 404
    assert c.patch(f"/v1/memories/{mid}", json={"metadata": {"x": 1}}, headers=bob).status_code == 404
    assert c.delete(f"/v1/memories/{mid}", headers=bob).status_code == 404

    patched = c.patch(f"/v1/memories/{mid}", json={"metadata": {"floor": 2}}, headers=alice)
    assert patched.status_code == 200 and patched.json()["metadata"] == {"topic": "gym", "floor": 2}
    refused = c.patch(f"/v1/memories/{mid}", json={"metadata": {"_vx_kind": "turn"}}, headers=alice)
    assert refused.status_code == 422
    assert c.patch(f"/v1/memories/{mid}", content=b"{}", headers=alice).status_code == 415
    assert c.delete(f"/v1/memories/{mid}", headers=alice).json() == {"deleted": 1}
    assert c.get(f"/v1/memories/{mid}", headers=alice).status_code == 404
    with Vectrix(path, read_only=True) as db:
        assert "alice/gym/locker" not in db


def test_a_listing_pages_with_a_cursor_that_holds_while_memories_come_and_go(served):
    c, _, alice, bob, _ = served
    ids = c.post("/v1/remember_many", json={"session": "pages", "timestamp": T0, "memories": [
        {"text": f"page note {i}", "timestamp": T0 + i} for i in range(7)]}, headers=bob).json()["ids"]
    c.post("/v1/remember", json={"text": "elsewhere", "session": "other", "timestamp": T0}, headers=bob)
    first = c.get("/v1/memories", params={"session": "pages", "limit": 3}, headers=bob).json()
    assert [x["id"] for x in first["memories"]] == ids[:3] and first["next_cursor"]
    c.delete(f"/v1/memories/{ids[3]}", headers=bob)  # the next page's first memory goes meanwhile
    second = c.get("/v1/memories", params={"session": "pages", "limit": 3, "cursor": first["next_cursor"]},
                   headers=bob).json()
    assert [x["id"] for x in second["memories"]] == ids[4:7] and second["next_cursor"] is None
    facts = c.get("/v1/memories", params={"kind": "fact"}, headers=bob).json()
    assert facts["memories"] == []
    assert c.get("/v1/memories", params={"user": "alice"}, headers=bob).status_code == 403
    assert c.get("/v1/memories", params={"cursor": "garbage"}, headers=bob).status_code == 422
    assert c.get("/v1/memories", params={"limit": 0}, headers=bob).status_code == 422


def test_stats_count_the_users_memories_alone(served):
    c, _, _, _, _ = served
    carol = _keyed(served[1], "carol")
    c.post("/v1/remember_many", json={"session": "s1", "memories": ["one", "two", {"text": "a fact", "kind": "fact",
                                                                                    "timestamp": T0}]},
           headers=carol)
    c.post("/v1/remember", json={"text": "pinned", "pinned": True, "session": "s2", "timestamp": T0 + DAY},
           headers=carol)
    got = c.get("/v1/stats", headers=carol).json()
    assert got["user"] == "carol" and got["memories"] == 4 and got["sessions"] == 2
    assert got["kinds"] == {"turn": 2, "fact": 1, "pinned": 1} and got["superseded"] == 0


def test_consolidate_without_a_summarizer_is_a_clear_409(served):
    c, _, alice, _, _ = served
    got = c.post("/v1/consolidate", json={"session": "s"}, headers=alice)
    assert got.status_code == 409 and got.json()["error"] == "not_configured"
    assert "--summarizer-model" in got.json()["message"]


def test_healthz_metrics_and_one_access_log_line_per_request(served):
    c, _, alice, _, log = served
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/metrics").status_code == 401  # it counts every user's requests: a key reads it
    c.post("/v1/remember", json={"text": "counted", "timestamp": T0}, headers=alice)
    c.get("/v1/memories/nope-1", headers=alice)
    c.get("/v1/memories/nope-2", headers=alice)
    text = c.get("/metrics", headers=alice).text
    assert 'vxmem_requests_total{method="GET",route="/v1/memories/{id}",status="404"}' in text
    assert 'vxmem_request_duration_seconds_bucket{le="+Inf",method="GET",route="/v1/memories/{id}"}' in text
    assert 'vxmem_errors_total{route="/v1/memories/{id}",status="404"}' in text
    assert "nope-1" not in text  # routes by their template: a few series whatever is asked
    count = next(line for line in text.splitlines() if line.startswith("vxmem_memories "))
    assert float(count.split()[1]) >= 1
    log.flush()
    lines = Path(log.name).read_text().splitlines()
    mine = [line for line in lines if "/v1/memories/nope-" in line]
    assert len(mine) == 2 and all(" 404 " in line and "user=alice" in line for line in mine)
    assert not any("Bearer" in line or "vxk_" in line for line in lines)


@pytest.fixture
def llm():
    with llm_stub() as base:
        yield f"{base}/v1"


def test_consolidate_summarises_old_turns_with_the_configured_summarizer(tmp_path, llm):
    path = tmp_path / "c.vxdb"
    with rest_server(path, "--summarizer-model", "summarizer-recorded", "--llm-url", llm) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        c.post("/v1/remember_many", json={"session": "chat", "timestamp": T0, "memories": [
            "I can't eat peanuts", "I moved to Lisbon", "what's the weather", "thanks"]})
        got = c.post("/v1/consolidate", json={"session": "chat", "keep_recent": 1, "now": T0 + DAY})
        assert got.status_code == 200, got.text
        report = got.json()
        facts = [c.get(f"/v1/memories/{i}").json() for i in report["facts"]]
        stats = c.get("/v1/stats").json()
    assert report["completed"] and len(report["turns_consolidated"]) == 3 and report["turns_deleted"] == 3
    assert sorted(f["text"] for f in facts) == ["The user is allergic to peanuts.", "The user lives in Lisbon."]
    assert all(f["kind"] == "fact" and f["session"] == "chat" for f in facts)
    assert stats["kinds"] == {"turn": 1, "fact": 2, "pinned": 0}
