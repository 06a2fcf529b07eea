"""What the servers need of the library: expire() for one user, a context ranked by a blend of
its own, and taken ids and turn numbers refused as conflicts."""

import pytest

from vxmem import Blend, ConflictError, Vectrix

from helpers import DAY, T0


def test_expire_for_one_user_leaves_the_others_expired_memories_alone():
    db = Vectrix()
    a = db.remember("alice's note", user="alice", ttl_days=1, timestamp=T0)
    b = db.remember("bob's note", user="bob", ttl_days=1, timestamp=T0)
    assert db.expire(now=T0 + 2 * DAY, user="alice") == 1
    assert a not in db and b in db
    assert db.expire(now=T0 + 2 * DAY) == 1 and b not in db


def test_a_context_block_recalls_with_the_blend_it_is_given():
    settings = {"query": "cat on the mat", "session": "s", "now": T0 + 40 * DAY, "recent_turns": 0}
    texts = [("the cat sat on the mat", T0), ("a cat", T0 + 39 * DAY)]
    fresh_first, by_blend = Vectrix(recency_weight=0.0), Vectrix(recency_weight=3.0)
    for db in (fresh_first, by_blend):
        for i, (text, ts) in enumerate(texts):
            db.remember(text, session="s", kind="fact", timestamp=ts, id=f"m{i}")
    want = fresh_first.context(**settings)
    got = by_blend.context(**settings, blend=Blend(recency_weight=0.0))
    assert [r.id for r in got.recalled] == [r.id for r in want.recalled]
    assert [r.id for r in by_blend.context(**settings).recalled] != [r.id for r in want.recalled]


def test_a_taken_id_or_turn_is_a_conflict_and_a_value_error():
    db = Vectrix()
    db.remember("one", id="x", session="s", turn=3, timestamp=T0)
    with pytest.raises(ConflictError, match="id already exists"):
        db.remember("two", id="x", timestamp=T0)
    with pytest.raises(ConflictError, match="turn 3"):
        db.remember("three", session="s", turn=3, timestamp=T0)
    with pytest.raises(ValueError):
        db.add(["four"], ids=["x"])
    assert len(db) == 1


def test_deleting_a_correction_brings_back_the_memory_it_superseded():
    db = Vectrix()
    old = db.remember("I live in Paris", kind="fact", session="s", timestamp=T0)
    fix = db.feedback(old, "corrected", correction="I live in Lyon", timestamp=T0 + DAY)
    assert db.forget(ids=[fix]) == 1
    assert "_vx_superseded_by" not in db.get(old).metadata
    [entry] = db.history(old)
    assert entry.live and entry.superseded_by is None
    assert db.recall("where do I live", session="s", now=T0 + 2 * DAY).ids == [old]


def test_deleting_a_middle_correction_leaves_the_newest_superseding_the_first():
    db = Vectrix()
    first = db.remember("I live in Paris", kind="fact", session="s", timestamp=T0)
    middle = db.feedback(first, "corrected", correction="I live in Lyon", timestamp=T0 + DAY)
    newest = db.feedback(middle, "corrected", correction="I live in Nice", timestamp=T0 + 2 * DAY)
    assert db.forget(ids=[middle]) == 1
    chain = db.history(newest)
    assert [(e.id, e.live, e.superseded_by) for e in chain] == [(first, False, newest), (newest, True, None)]
    assert db.recall("where do I live", session="s", now=T0 + 3 * DAY).ids == [newest]


def test_a_blank_query_is_refused_as_a_blank_text_is():
    db = Vectrix()
    db.remember("something said", timestamp=T0)
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="text must not be empty"):
            db.remember(blank)
        with pytest.raises(ValueError, match="query must not be empty"):
            db.recall(blank)
        with pytest.raises(ValueError, match="query must not be empty"):
            db.context(blank)
