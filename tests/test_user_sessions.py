"""A session belongs to its user: two users who name a session alike have two sessions (two
transcripts, two turn counters, two sets of facts a contradiction may replace), and a file
written before that is migrated once, on its first writable open."""

import shutil
import sqlite3
from pathlib import Path

import pytest

from vxmem import Vectrix
from vxmem.memory import K_SESSION, K_USER
from vxmem.models.embed import HashingEmbedder
from vxmem.store.sqlite import database

from helpers import DAY, T0

OLD_FILE = Path(__file__).parent / "data" / "schema7_users.vxdb"


def _two_users(db):
    db.remember("ann: I want tea", session="s", user="ann", timestamp=T0)
    db.remember("bob: I want coffee", session="s", user="bob", timestamp=T0 + 1)
    db.remember("ann: with milk", session="s", user="ann", timestamp=T0 + 2)
    db.remember("no one's: a plain turn", session="s", timestamp=T0 + 3)


def test_two_users_sessions_of_one_name_are_two_transcripts_with_their_own_turn_numbers(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    _two_users(db)
    ann = db.turns("s", user="ann", now=T0 + DAY)
    assert [(t.text, t.metadata["_vx_turn"]) for t in ann] == [("ann: I want tea", 0), ("ann: with milk", 1)]
    assert [(t.text, t.metadata["_vx_turn"]) for t in db.turns("s", user="bob", now=T0 + DAY)] == [
        ("bob: I want coffee", 0)]
    assert [t.text for t in db.turns("s", now=T0 + DAY)] == ["no one's: a plain turn"]  # the session of no user
    assert {r.metadata[K_SESSION] for r in db.scan()} == {"s"}  # stored under the name as given
    block = db.context("tea", session="s", user="bob", now=T0 + DAY)
    assert [r.text for r in block.recent] == ["bob: I want coffee"]
    assert all(r.metadata.get(K_USER) == "bob" for r in block.recalled)


def test_forget_and_consolidate_of_a_users_session_leave_the_others_alone(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    _two_users(db)
    report = db.consolidate("s", lambda turns: [" / ".join(t["text"] for t in turns)], keep_recent=0,
                            now=T0 + DAY, user="ann")
    assert [db.get(f).text for f in report.facts] == ["ann: I want tea / ann: with milk"]
    assert db.get(report.facts[0]).metadata[K_USER] == "ann"
    assert db.forget(session="s", user="bob") == 1
    assert db.forget(session="s") == 1  # the session of no user
    assert [r.text for r in db.scan()] == ["ann: I want tea / ann: with milk"]


def test_a_contradiction_replaces_a_fact_of_the_users_own_session_only(word_embedder):
    seen = []

    def judge(new, olds):
        seen.append(list(olds))
        return [True] * len(olds)

    db = Vectrix(None, embedder=word_embedder, judge=judge)
    bob = db.remember("lives in Paris", session="s", user="bob", kind="fact", timestamp=T0)
    ann = db.remember("lives in Paris", session="s", user="ann", kind="fact", timestamp=T0 + 1)
    assert seen == []  # ann's session held no fact: bob's is not hers to contradict
    db.remember("lives in Rome now", session="s", user="ann", kind="fact", timestamp=T0 + 2)
    assert seen == [["lives in Paris"]]
    assert db.get(ann).metadata.get("_vx_superseded_by") is not None
    assert db.get(bob).metadata.get("_vx_superseded_by") is None


def test_a_filter_on_the_session_name_matches_every_users_session_of_that_name(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    _two_users(db)
    assert len(list(db.scan({K_SESSION: "s"}))) == 4
    assert [r.text for r in db.scan({K_SESSION: "s", K_USER: "bob"})] == ["bob: I want coffee"]
    for mode in ("lexical", "dense", "hybrid"):
        found = db.search("tea coffee", filter={K_SESSION: "s"}, mode=mode, limit=10)
        assert {"ann: I want tea", "bob: I want coffee"} <= {r.text for r in found}, mode
        found = db.search("tea coffee", filter={K_SESSION: "s", K_USER: "bob"}, mode=mode, limit=10)
        assert [r.text for r in found] == ["bob: I want coffee"], mode


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "old.vxdb"
    shutil.copy(OLD_FILE, path)
    return path


def _schema(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


def test_a_schema_7_file_moves_each_users_rows_to_sessions_of_their_own(old_file):
    assert _schema(old_file) == "7"
    with Vectrix(old_file, embedder=HashingEmbedder(dim=64)) as db:
        assert _schema(old_file) == str(database.SCHEMA_VERSION)
        # What a server stored as "u/chat" is u's session "chat", found by words and by meaning.
        for mode in ("lexical", "dense", "hybrid"):
            got = db.recall("green tea", session="chat", user="u", mode=mode, now=T0 + DAY)
            assert got.ids[:1] == ["u/pref"], mode
        assert db.recall("green tea", session="u/chat", user="u", now=T0 + DAY).ids == []
        assert [t.metadata["_vx_turn"] for t in db.turns("chat", user="u", now=T0 + DAY)] == [0, 1]
        # The session all three wrote to is now three: each user's, and the one of no user.
        assert [t.text for t in db.turns("shared", user="ann", now=T0 + DAY)] == ["ann says tea please"]
        assert [t.text for t in db.turns("shared", now=T0 + DAY)] == ["nobody's turn about tea"]
        lexical = db.recall("tea", session="shared", mode="lexical", now=T0 + DAY)
        assert [r.text for r in lexical] == ["nobody's turn about tea"]
        lexical = db.recall("tea please", session="shared", user="ann", mode="lexical", now=T0 + DAY)
        assert [r.text for r in lexical] == ["ann says tea please"]
        # Numbers go on from where each session's counter stood: none is given twice.
        assert db.get(db.remember("more tea", session="chat", user="u", timestamp=T0 + DAY)).metadata[
            "_vx_turn"] == 2
        assert db.get(db.remember("bob again", session="shared", user="bob", timestamp=T0 + DAY)).metadata[
            "_vx_turn"] == 3
    with Vectrix(old_file, embedder=HashingEmbedder(dim=64), read_only=True) as db:  # once: nothing moves again
        assert [t.text for t in db.turns("chat", user="u", now=T0 + 2 * DAY)] == [
            "I like green tea", "and the weather is cold", "more tea"]


OLD_EXPORT = Path(__file__).parent / "data" / "export_v2_users.jsonl"


@pytest.mark.parametrize("target", ["file", "memory"])
def test_an_export_of_version_2_restores_each_users_rows_to_sessions_of_their_own(tmp_path, target):
    path = tmp_path / "restored.vxdb" if target == "file" else None
    with Vectrix.restore(OLD_EXPORT, path, embedder=HashingEmbedder(dim=64), progress=False) as db:
        assert [t.id for t in db.turns("chat", user="u", now=T0 + DAY)][:1] == ["u/pref"]
        assert db.recall("green tea", session="chat", user="u", mode="lexical", now=T0 + DAY).ids[:1] == ["u/pref"]
        assert db.turns("u/chat", user="u", now=T0 + DAY) == []
        assert [t.text for t in db.turns("shared", user="bob", now=T0 + DAY)] == ["bob says coffee please"]
        assert db.get(db.remember("bob again", session="shared", user="bob", timestamp=T0 + DAY)).metadata[
            "_vx_turn"] == 3  # from where the shared counter stood
        assert db.get(db.remember("u again", session="chat", user="u", timestamp=T0 + DAY)).metadata[
            "_vx_turn"] == 2
        again = tmp_path / "again.jsonl"
        db.export(again)
    with Vectrix.restore(again, None, embedder=HashingEmbedder(dim=64), progress=False) as db:  # version 3: as is
        assert [t.text for t in db.turns("chat", user="u", now=T0 + 2 * DAY)] == [
            "I like green tea", "and the weather is cold", "u again"]
