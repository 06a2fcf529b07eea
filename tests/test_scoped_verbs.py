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
