"""remember_many(): many memories in one transaction, embedded in batches, stored as a loop would store them."""

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.memory import K_SUPERSEDED_BY, K_SUPERSEDES, K_TURN
from vxmem.memory.draft import EMBED_BATCH

from helpers import DAY, T0, WordHashEmbedder


class CountingEmbedder(WordHashEmbedder):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __call__(self, texts):
        self.calls.append(len(texts))
        return super().__call__(texts)


TURNS = [{"text": "I moved to Lisbon", "timestamp": T0},
         {"text": "The weather is lovely here", "timestamp": T0 + 60},
         {"text": "My cat is called Miso", "timestamp": T0 + 120, "role": "assistant"},
         {"text": "I prefer tea to coffee", "timestamp": T0 + 180, "kind": "fact", "metadata": {"topic": "food"}}]


def test_remember_many_stores_what_a_loop_of_remember_stores():
    batch, loop = Vectrix(embedder=WordHashEmbedder()), Vectrix(embedder=WordHashEmbedder())
    ids = batch.remember_many(TURNS, session="s")
    for t in TURNS:
        loop.remember(**t, session="s")
    assert [(batch.get(i).text, batch.get(i).metadata) for i in ids] == [(r.text, r.metadata) for r in loop.scan()]
    assert [r.metadata[K_TURN] for r in batch.turns("s", now=T0 + DAY)] == [0, 1, 2]
    recalled = [[r.text for r in db.recall("where do I live", session="s", now=T0 + DAY)] for db in (batch, loop)]
    assert recalled[0] == recalled[1] and recalled[0]


def test_remember_many_embeds_in_one_batch():
    emb = CountingEmbedder()
    db = Vectrix(embedder=emb)
    emb.calls.clear()
    db.remember_many(["one", "two", "three"], session="s", timestamp=T0)
    assert emb.calls == [3]


def test_one_bad_item_refuses_the_whole_call_naming_it_and_nothing_is_written():
    emb = CountingEmbedder()
    db = Vectrix(embedder=emb)
    emb.calls.clear()
    with pytest.raises(ValueError, match=r"memories\[1\]: text must not be empty"):
        db.remember_many(["fine", "   ", "also fine"], session="s", timestamp=T0)
    with pytest.raises(TypeError, match=r"memories\[0\].*'colour'"):
        db.remember_many([{"text": "x", "colour": "red"}], timestamp=T0)
    with pytest.raises(TypeError, match=r"memories\[0\] must be a str or a dict"):
        db.remember_many([42], timestamp=T0)
    for one in ("hello", {"text": "hello"}, None, 42):
        with pytest.raises(TypeError, match="memories must be a list of texts or dicts"):
            db.remember_many(one, timestamp=T0)
    with pytest.raises(ValueError, match="same id twice"):
        db.remember_many([{"text": "a", "id": "x"}, {"text": "b", "id": "x"}], timestamp=T0)
    assert len(db) == 0 and emb.calls == []


def test_an_id_already_taken_refuses_the_batch():
    db = Vectrix(embedder=WordHashEmbedder())
    db.remember("first", id="taken", timestamp=T0)
    with pytest.raises(ValueError, match="already exists"):
        db.remember_many(["new one", {"text": "clash", "id": "taken"}], timestamp=T0)
    assert len(db) == 1


def test_a_turn_number_given_twice_in_one_batch_is_named_and_nothing_is_written():
    emb = CountingEmbedder()
    db = Vectrix(embedder=emb)
    emb.calls.clear()
    with pytest.raises(ValueError, match="turn 5 of session 's' is given twice"):
        db.remember_many([{"text": "a", "turn": 5}, {"text": "b", "turn": 5}], session="s", timestamp=T0)
    assert len(db) == 0 and emb.calls == []
    with pytest.raises(ValueError, match="turn 5 of session 's' is given twice"):  # one user's
        db.remember_many([{"text": "a", "turn": 5, "user": "bob"}, {"text": "b", "turn": 5, "user": "bob"}],
                         session="s", timestamp=T0)
    db.remember_many([{"text": "a", "turn": 5, "session": "s"}, {"text": "b", "turn": 5, "session": "t"}],
                     timestamp=T0)  # the same number in two sessions is two turns
    db.remember_many([{"text": "c", "turn": 5}, {"text": "d", "turn": 5, "user": "bob"}], session="u",
                     timestamp=T0)  # and in two users' sessions of one name
    assert len(db) == 4


def test_the_judge_supersedes_stored_facts_inside_the_batch_transaction():
    def judge(new, olds):
        return [new.split()[0] == old.split()[0] for old in olds]

    db = Vectrix(embedder=WordHashEmbedder(), judge=judge)
    old = db.remember("Lisbon is where I live", kind="fact", session="s", timestamp=T0)
    new, other = db.remember_many([{"text": "Lisbon is no longer home: Porto is", "kind": "fact"},
                                   {"text": "Cats are lovely", "kind": "fact"}], session="s", timestamp=T0 + DAY)
    assert db.get(old).metadata[K_SUPERSEDED_BY] == new
    assert db.get(new).metadata[K_SUPERSEDES] == [old]
    assert K_SUPERSEDES not in db.get(other).metadata


def test_an_empty_batch_writes_nothing():
    db = Vectrix(embedder=WordHashEmbedder())
    assert db.remember_many([]) == [] and len(db) == 0


def test_warm_loads_the_models_and_changes_nothing():
    emb = CountingEmbedder()
    db = Vectrix(embedder=emb)
    emb.calls.clear()
    db.warm()
    assert emb.calls == [1] and len(db) == 0
    assert np.isfinite(db.memory.store.embed(["still works"], queries=True)).all()


class PoisonedEmbedder(CountingEmbedder):
    """Embeds as its parent does, but gives a text holding "poison" a row of NaNs, which
    the store refuses, as it would a model's broken output."""

    def __call__(self, texts):
        out = super().__call__(texts)
        out[[i for i, t in enumerate(texts) if "poison" in t]] = np.nan
        return out


def test_a_large_call_is_embedded_batch_by_batch_and_stored_whole(tmp_path):
    n = 2 * EMBED_BATCH + 5
    emb = CountingEmbedder()
    with Vectrix(str(tmp_path / "many.vxdb"), embedder=emb) as db:
        emb.calls.clear()
        ids = db.remember_many([f"turn {i} about tea" for i in range(n)], session="s", timestamp=T0)
        assert emb.calls == [EMBED_BATCH, EMBED_BATCH, 5]  # never all n texts in one call
        assert len(set(ids)) == n == len(db)
        assert [r.metadata[K_TURN] for r in db.turns("s", now=T0 + DAY)] == list(range(n))


def test_an_error_in_the_last_batch_writes_nothing_of_the_call(tmp_path):
    path = str(tmp_path / "many.vxdb")
    emb = PoisonedEmbedder()
    with Vectrix(path, embedder=emb) as db:
        db.remember("kept from before", session="s", timestamp=T0)
        emb.calls.clear()
        texts = [f"turn {i} about tea" for i in range(2 * EMBED_BATCH)] + ["the last one, poison"]
        with pytest.raises(ValueError, match="NaN or an infinity|non-finite|finite"):
            db.remember_many(texts, session="s", timestamp=T0 + 1)
        assert emb.calls == [EMBED_BATCH, EMBED_BATCH, 1]  # the first two batches were embedded, then refused
        assert len(db) == 1
        assert db.remember("next", session="s", timestamp=T0 + 2)  # the turn numbers were not taken either
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as db:
        assert [(r.text, r.metadata[K_TURN]) for r in db.turns("s", now=T0 + DAY)] == \
            [("kept from before", 0), ("next", 1)]
