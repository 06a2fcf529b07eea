"""Late interaction reads each turn twice: as it is, and after the end of the turn before it."""

import numpy as np

from vxmem import Vectrix
from vxmem.memory.late_stage import CONTEXT_SHARE, context_text
from vxmem.models.late import LateInteraction, default_late_interaction

from helpers import T0

CHAT = ["Did you book the flight to Porto?", "Yes, for Tuesday morning.", "Great, and the hotel?",
        "Booked too, near the river."]
QUERY = "When does the flight leave?"


def _context_rows(db):
    conn = db.engine.database.conn
    ids = {rowid: i for i, rowid in conn.execute("SELECT id, rowid FROM vx_docs").fetchall()}
    rows = conn.execute("SELECT doc, prev, bits FROM vx_late_context").fetchall()
    return {ids[doc]: (ids.get(prev), bits) for doc, prev, bits in rows}


def _want(texts_before, text):
    late = default_late_interaction()
    own = late(QUERY, [text])[0]
    read = late(QUERY, [context_text(texts_before, text)])[0]
    return (1 - CONTEXT_SHARE) * own + CONTEXT_SHARE * read


def test_each_turn_is_stored_read_after_the_turn_before_it_and_scored_half_and_half():
    db = Vectrix(embedder="hashing", rerank=True)
    ids = db.remember_many(CHAT[:3], session="trip", timestamp=T0)
    ids.append(db.remember(CHAT[3], session="trip", timestamp=T0 + 1))  # one write: it follows the stored turn
    other = db.remember("Yes, for Tuesday morning.", session="elsewhere", timestamp=T0 + 2)
    rows = _context_rows(db)
    assert set(rows) == set(ids[1:])  # the first turn of a session follows nothing: it reads as itself
    late = default_late_interaction()
    for k in (1, 2, 3):
        prev, bits = rows[ids[k]]
        assert prev == ids[k - 1] and bits == late.encode([context_text(CHAT[k - 1], CHAT[k])])[0]
    scores = db.memory.stage_scores(QUERY, ids + [other])
    want = [_want(None, CHAT[0])] + [_want(CHAT[k - 1], CHAT[k]) for k in (1, 2, 3)] + [_want(None, CHAT[1])]
    np.testing.assert_allclose(scores, want, atol=1e-6)
    assert scores[1] > scores[4]  # the same words, read after the question they answer


def test_forgetting_the_turn_before_takes_what_was_read_with_it():
    db = Vectrix(embedder="hashing", rerank=True)
    ids = db.remember_many(CHAT, session="trip", timestamp=T0)
    db.forget(ids=[ids[0]])
    rows = _context_rows(db)
    assert ids[1] not in rows and set(rows) == {ids[2], ids[3]}  # nothing derived from the forgotten turn
    np.testing.assert_allclose(db.memory.stage_scores(QUERY, [ids[1]]), [_want(None, CHAT[1])], atol=1e-6)


def test_turns_without_stored_context_are_read_in_context_at_recall():
    stored, bare = Vectrix(embedder="hashing", rerank=True), Vectrix(embedder="hashing", rerank=True)
    a = stored.remember_many(CHAT, session="trip", timestamp=T0)
    b = bare.remember_many(CHAT, session="trip", timestamp=T0)
    with bare.engine.database.conn:
        bare.engine.database.conn.execute("DELETE FROM vx_late_context")  # as a file written before it
    np.testing.assert_allclose(stored.memory.stage_scores(QUERY, a), bare.memory.stage_scores(QUERY, b), atol=1e-9)
    assert [r.text for r in stored.recall(QUERY, now=T0 + 60)] == [r.text for r in bare.recall(QUERY, now=T0 + 60)]


def test_a_write_mixing_sessions_and_numbered_turns_reads_each_after_its_own_turn_before():
    db = Vectrix(embedder="hashing", rerank=True)
    ids = db.remember_many([{"text": "Where is the key?", "session": "a"}, {"text": "Hi there", "session": "b"},
                            {"text": "Under the mat.", "session": "a"},
                            {"text": "Skipped ahead.", "session": "a", "turn": 7},
                            {"text": "And after it.", "session": "a", "turn": 8}], timestamp=T0)
    rows = _context_rows(db)
    assert rows[ids[2]][0] == ids[0] and rows[ids[4]][0] == ids[3]
    assert ids[1] not in rows and ids[3] not in rows  # turn 7 follows no turn 6


def test_a_memory_whose_recall_reads_no_token_vectors_stores_none():
    db = Vectrix(embedder="hashing", preset="fast")
    db.remember_many(CHAT, session="trip", timestamp=T0)
    tables = {r[0] for r in db.engine.database.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "vx_docs" in tables and "vx_late_context" not in tables


def _late_rows(db):
    conn = db.engine.database.conn
    return (conn.execute("SELECT doc, bits FROM vx_late ORDER BY doc").fetchall(),
            conn.execute("SELECT doc, prev, bits FROM vx_late_context ORDER BY doc").fetchall())


def test_a_write_stores_the_same_token_vectors_however_many_lanes_its_model_has():
    # one turn on two lanes or fewer encodes its own text on the writer's thread, else on the model's worker
    stored = []
    for lanes in (1, 2, 4):
        late = LateInteraction(threads=lanes)
        db = Vectrix(embedder="hashing", rerank=True, reranker=late)
        db.remember("I keep the spare key under the mat.", kind="fact", timestamp=T0)
        for i, text in enumerate(CHAT):
            db.remember(text, session="trip", timestamp=T0 + i)
        own, read = _late_rows(db)
        assert len(own) == 5 and len(read) == 3
        assert [b for _, b in own] == late.encode(["I keep the spare key under the mat."] + CHAT)
        assert [b for _, _, b in read] == late.encode([context_text(CHAT[k - 1], CHAT[k]) for k in (1, 2, 3)])
        stored.append((own, read))
    assert stored[0] == stored[1] == stored[2]
