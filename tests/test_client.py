"""``vxmem.Client`` and ``AsyncClient`` against a real ``vxmem serve`` child process: the same
code runs in process (``Vectrix``) and over HTTP, with the same answers."""

import asyncio

import pytest

from vxmem import AsyncClient, Client, ConflictError, ContextBlock, HistoryEntry, Vectrix

from helpers import DAY, T0, vxmem_here
from servers import rest_server


def scenario(db):
    """A conversation, a correction and the reads an agent makes, on any handle with the verbs."""
    first = db.remember("I prefer dark mode", session="chat", timestamp=T0)
    db.remember_many(["we talked about tea", {"text": "The user lives in Paris", "kind": "fact"}], session="chat",
                     timestamp=T0 + 60)
    hits = db.recall("dark mode theme", session="chat", now=T0 + DAY, limit=3)
    fixed = db.feedback(first, "corrected", correction="I prefer light mode", timestamp=T0 + 2 * DAY)
    chain = db.history(first, now=T0 + 3 * DAY)
    block = db.context("which theme?", session="chat", now=T0 + 3 * DAY)
    turns = db.turns("chat", now=T0 + 3 * DAY)
    return {
        "recall": [(r.text, round(r.score, 6), r.metadata["_vx_kind"]) for r in hits],
        "truncated": hits.truncated,
        "chain": [(e.text, e.live, e.kind) for e in chain],
        "fixed_is_last": chain[-1].id == fixed and isinstance(chain[0], HistoryEntry),
        "block": block.text, "is_block": isinstance(block, ContextBlock),
        "turns": [(t.text, t.metadata["_vx_turn"], t.metadata["_vx_role"]) for t in turns],
        "forgot": db.forget(session="chat", kinds=("turn",), now=T0 + 3 * DAY),
    }


def test_the_same_code_runs_in_process_and_against_a_server(tmp_path):
    with Vectrix(tmp_path / "local.vxdb") as local:
        expected = scenario(local)
    with rest_server(tmp_path / "served.vxdb") as url, Client(url) as remote:
        got = scenario(remote)
    assert got == expected
    assert expected["recall"][0][0] == "I prefer dark mode" and expected["forgot"] == 2


def test_a_keyed_client_reaches_its_user_and_refusals_raise_the_librarys_errors(tmp_path):
    path = tmp_path / "keyed.vxdb"
    key = vxmem_here("keys", "add", "--db", str(path), "--user", "alice").stdout.strip().splitlines()[-1]
    with rest_server(path) as url, Client(url, key=key) as db, Client(url, key="vxk_not-a-key") as stranger:
        mid = db.remember("a note", id="n-1", timestamp=T0)
        assert mid == "n-1" and db.get(mid).metadata["_vx_kind"] == "turn"
        assert db.update_metadata(mid, {"topic": "x"})["topic"] == "x"
        assert [r.id for r in db.memories(page=1)] == ["n-1"]
        assert db.stats()["memories"] == 1
        with pytest.raises(ConflictError):
            db.remember("again", id="n-1")
        with pytest.raises(ValueError):
            db.remember("x", kind="rumour")
        with pytest.raises(KeyError):
            db.get("no-such-id")
        with pytest.raises(PermissionError):
            stranger.recall("note")
        with pytest.raises(PermissionError):
            db.recall("note", user="bob")
        assert db.delete(mid) == 1
    with Vectrix(path, read_only=True) as local:
        assert len(local) == 0


def test_the_async_client_awaits_the_same_verbs(tmp_path):
    with rest_server(tmp_path / "async.vxdb") as url:
        async def main():
            async with AsyncClient(url) as db:
                ids = await asyncio.gather(*(db.remember(f"note {i}", session="s", timestamp=T0 + i)
                                             for i in range(5)))
                hits = await db.recall("note 3", session="s", now=T0 + DAY)
                listed = [r.id async for r in db.memories(session="s", page=2)]
                return ids, hits, listed

        ids, hits, listed = asyncio.run(main())
    assert len(set(ids)) == 5 and hits[0].text == "note 3" and sorted(listed) == sorted(ids)
