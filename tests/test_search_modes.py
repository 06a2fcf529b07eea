"""Search modes: dense, lexical (SQLite FTS5 BM25) and hybrid, on search(), recall() and context()."""

import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vxmem import K_SCORING, K_SESSION, Vectrix
from vxmem.ranking.scoring import fuse_relevance
from vxmem.store.lexical.fts import fts_match, fts_query
from vxmem.store.mirror.mirror import ANY_SESSION
from vxmem.store.sqlite import database

from helpers import DAY, T0, fts_count, run_python


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_every_mode_finds_the_matching_document(mode):
    db = Vectrix()
    db.add(["invoice 4471 was paid in March", "the weather in March was mild", "lunch with Bob"])
    res = db.search("invoice 4471", mode=mode)
    assert res[0].text == "invoice 4471 was paid in March"


def test_lexical_search_returns_only_documents_that_share_a_word():
    db = Vectrix()
    db.add(["zebra crossing", "a horse in a field", "zebras are striped"])
    assert {r.text for r in db.search("zebra", mode="lexical")} == {"zebra crossing", "zebras are striped"}


def test_lexical_search_ignores_case_accents_and_inflections():
    db = Vectrix()
    db.add(["We met at the Café Müller", "Running every morning"])
    assert db.search("cafe muller", mode="lexical")[0].text == "We met at the Café Müller"
    assert db.search("run", mode="lexical")[0].text == "Running every morning"


@pytest.mark.parametrize("query", ['"unbalanced', "a* OR NEAR(b c)", "-minus -(x)", "col:umn", ")(", "AND", "***",
                                   "'; DROP TABLE vx_docs; --", "NOT alpha", "^start", ""])
def test_fts_syntax_in_queries_is_text_never_syntax_or_error(query):
    db = Vectrix()
    db.add(["alpha beta", "near the column start", "x minus b c"])
    res = db.search(query or " ", mode="lexical")
    assert isinstance(res.items, list)
    assert db.count() == 3
    res = db.search(query or " ", mode="hybrid")
    assert isinstance(res.items, list)


def test_fts_query_quotes_every_word():
    assert fts_query('say "hi" NEAR(x)') == '"say" OR "hi" OR "near" OR "x"'
    assert fts_query("what is the") == '"what" OR "is" OR "the"'  # only stopwords: keep them
    assert fts_query("?!") is None


def test_session_lexical_recall_sees_only_that_session_even_when_others_match_better():
    db = Vectrix()
    for k in range(300):
        db.remember(f"kayak rental kayak trip {k}", session="other", timestamp=T0)
    db.remember("we might rent a kayak", session="me", timestamp=T0)
    db.remember("no match here", session="me", timestamp=T0)
    res = db.recall("kayak rental", session="me", mode="lexical", now=T0)
    assert [r.text for r in res] == ["we might rent a kayak"]


def test_moving_a_document_to_another_session_moves_its_lexical_scope():
    db = Vectrix()
    (i,) = db.add(["otter sighting"], metadata=[{"_vx_session": "a"}])
    assert len(db.search("otter", mode="lexical", filter={"_vx_session": "a"})) == 1
    db.update_metadata(i, {"_vx_session": "b"})
    assert len(db.search("otter", mode="lexical", filter={"_vx_session": "a"})) == 0
    assert len(db.search("otter", mode="lexical", filter={"_vx_session": "b"})) == 1


def test_lexical_filter_is_exact_when_the_filter_selects_a_tiny_fraction():
    db = Vectrix()
    db.add([f"server crashed at night {i}" for i in range(2000)], metadata=[{"u": "many"}] * 2000)
    db.add(["my server crashed", "server is fine"], metadata=[{"u": "rare"}, {"u": "rare"}])
    res = db.search("server crashed", mode="lexical", limit=5, filter={"u": "rare"})
    assert [r.text for r in res] == ["my server crashed", "server is fine"]


def test_recall_lexical_applies_session_kinds_superseded_and_expiry_exactly():
    db = Vectrix(ttl_days={"turn": 1})
    db.remember("passport renewal form", session="a", timestamp=T0)                        # expired at T0+2d
    old = db.remember("passport number 111", session="a", kind="fact", timestamp=T0 + DAY)
    new = db.feedback(old, "corrected", "passport number 222", timestamp=T0 + DAY)
    db.remember("passport of bob", session="b", kind="fact", timestamp=T0 + DAY)
    res = db.recall("passport", session="a", mode="lexical", now=T0 + 2 * DAY)
    assert [r.id for r in res] == [new]
    assert res[0].metadata[K_SCORING]["mode"] == "lexical"
    assert res[0].metadata[K_SCORING]["lexical"] > 0 and res[0].metadata[K_SCORING]["dense"] is None


def test_hybrid_scoring_says_which_parts_contributed():
    db = Vectrix()
    db.remember("the quarterly report is due friday", session="s", timestamp=T0)
    db.remember("report the bug", session="s", timestamp=T0)
    (r, *_) = db.recall("quarterly report", session="s", mode="hybrid", now=T0)
    parts = r.metadata[K_SCORING]
    assert parts["mode"] == "hybrid" and parts["hybrid_weight"] == 0.5
    assert parts["dense"] is not None and parts["lexical"] is not None


def test_hybrid_weight_one_ranks_like_dense_and_zero_like_lexical():
    dense = np.array([0.9, 0.5, 0.1])
    lexical = np.array([0.0, 2.0, 4.0])
    assert np.argmax(fuse_relevance(dense, lexical, 1.0)) == 0
    assert np.argmax(fuse_relevance(dense, lexical, 0.0)) == 2
    assert fuse_relevance(dense, lexical, 0.5).tolist() == pytest.approx([0.5, 0.5 * 0.5 + 0.5 * 0.5, 0.5])


def test_unknown_mode_and_bad_weight_are_clear_errors():
    db = Vectrix()
    db.add(["x"])
    with pytest.raises(ValueError, match="unknown mode"):
        db.search("x", mode="bm42")
    with pytest.raises(ValueError, match="unknown mode"):
        db.recall("x", mode="sparse")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        db.search("x", mode="hybrid", hybrid_weight=1.5)


def test_context_takes_the_mode_through_its_recall_arguments():
    db = Vectrix()
    db.remember("flight AB123 departs at 9", session="s", timestamp=T0 - 30 * DAY)
    for k in range(3):
        db.remember(f"chit chat {k}", session="s", timestamp=T0 + k)
    block = db.context("AB123", session="s", recent_turns=1, mode="lexical", now=T0 + 10)
    assert [r.text for r in block.recalled] == ["flight AB123 departs at 9"]


def test_fts_follows_inserts_deletes_and_consolidation():
    db = Vectrix()
    ids = [db.remember(f"kiwi number {k}", session="s", timestamp=T0 + k) for k in range(5)]
    assert fts_count(db, "kiwi") == 5
    db.forget(ids=ids[:2])
    assert fts_count(db, "kiwi") == 3
    db.consolidate("s", lambda items: ["the user listed mangos"], keep_recent=0, now=T0 + 10)
    assert fts_count(db, "kiwi") == 0 and fts_count(db, "mango") == 1
    assert [r.text for r in db.recall("mangos", session="s", mode="lexical", now=T0 + 10)] == [
        "the user listed mangos"]


def test_a_failed_transaction_leaves_fts_and_documents_in_step(monkeypatch):
    db = Vectrix(judge=lambda new, olds: [True] * len(olds))
    db.remember("rome is home", session="s", kind="fact", check=False, timestamp=T0)
    def boom(self, id, meta):
        raise OSError("disk full")

    monkeypatch.setattr(database.Transaction, "update_meta", boom)
    with pytest.raises(OSError):
        db.remember("milan is home", session="s", kind="fact", timestamp=T0 + 1)
    monkeypatch.undo()
    assert fts_count(db, "milan") == 0 and fts_count(db, "rome") == 1
    docs = db.engine.database.conn.execute("SELECT count(*) FROM vx_docs").fetchone()[0]
    assert docs == 1


def test_fts_agrees_with_documents_after_a_killed_writer(tmp_path):
    path = tmp_path / "k.vxdb"
    code = f"""
import os, signal
from vxmem import Vectrix
db = Vectrix({str(path)!r})
for k in range(300):
    db.remember(f"durian {{k}}", session="s", timestamp={T0} + k)
    if k == 150:
        os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = run_python(code)
    assert proc.returncode == -9
    with Vectrix(path) as db:
        n = db.count()
        assert n == 151
        assert fts_count(db, "durian") == n
        conn = db.engine.database.conn
        assert conn.execute("INSERT INTO vx_fts(vx_fts, rank) VALUES ('integrity-check', 1)") is not None


def test_opening_a_database_made_before_fts_builds_the_index_once(tmp_path):
    path = tmp_path / "old.vxdb"
    with Vectrix(path) as db:
        db.remember("legacy memory about walruses", session="s", timestamp=T0)
    # Turn it into a version-1 database: no FTS table.
    con = sqlite3.connect(path)
    con.execute("DROP TABLE vx_fts")
    con.execute("UPDATE vx_meta SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with Vectrix(path) as db:
        assert db.recall("walruses", session="s", mode="lexical", now=T0)[0].text == "legacy memory about walruses"
        conn = db.engine.database.conn
        version = conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0]
        assert version == str(database.SCHEMA_VERSION)  # and every later migration ran too
        db.remember("new memory about walruses", session="s", timestamp=T0)
        assert fts_count(db, "walruses") == 2


def _fts5_scores(db, m, query, session=ANY_SESSION):
    """BM25 straight from FTS5 for every match, once it holds every document: {position: score}."""
    db.engine.database.index_pending()
    rows = db.engine.database.conn.execute("SELECT rowid, -bm25(vx_fts, 1.0, 0.0) FROM vx_fts WHERE vx_fts MATCH ?",
                                     (fts_match(query, session),)).fetchall()
    return {m.pos_of_rowid[r]: s for r, s in rows if r in m.pos_of_rowid}


@settings(max_examples=25, deadline=None)
@given(docs=st.lists(st.tuples(st.sampled_from(["a", "b", None]),
                               st.lists(st.sampled_from(["run", "running", "runs", "café", "cafe", "tea", "Tea",
                                                         "green", "the", "a", "kiwi", "kiwis", "x1", "42"]),
                                        min_size=1, max_size=8)), min_size=1, max_size=30),
       deletes=st.lists(st.integers(0, 29), max_size=8),
       query=st.lists(st.sampled_from(["run", "cafe", "tea", "green", "the", "kiwi", "zzz", "42", "Running"]),
                      min_size=1, max_size=4))
def test_numpy_bm25_equals_fts5_bm25(docs, deletes, query):
    db = Vectrix()
    ids = []
    for k, (session, words) in enumerate(docs):
        text = " ".join(words)
        if session is None:
            ids += db.add([text])  # a plain document: no scope token
        else:
            ids.append(db.remember(text, session=session, timestamp=T0 + k))
    db.search("warm", mode="lexical")  # builds the in-memory postings
    for d in deletes:
        if d < len(ids):
            db.delete([ids[d]])
    db.remember("tea after the first search", session="a", timestamp=T0 + 99)  # read incrementally
    q = " ".join(query)
    for session in ("a", ANY_SESSION):
        with db.engine.locked() as m:
            positions = m.matching(None if session is ANY_SESSION else {K_SESSION: [session]})
            allowed = np.zeros(m.n, dtype=bool)
            allowed[positions] = True
            got = db.engine.lexical.numpy_scores(m, q, allowed, k=1000)
            assert got is not None
            pos, score, _ = got
            want = _fts5_scores(db, m, q, session)
            assert set(pos.tolist()) == set(want)
            for p, s in zip(pos.tolist(), score.tolist()):
                assert s == pytest.approx(want[p], rel=1e-9, abs=1e-12)


def test_a_query_word_fts5_reads_as_a_phrase_is_ranked_by_fts5_itself():
    db = Vectrix()
    db.add(["send it by e_mail today", "mail the letter"])
    with db.engine.locked() as m:
        assert db.engine.lexical.numpy_scores(m, "e_mail", np.ones(m.n, dtype=bool), 5) is None
    assert db.search("e_mail", mode="lexical")[0].text == "send it by e_mail today"
