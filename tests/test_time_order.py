"""Memories written out of time order: a memory never supersedes one from its own future,
whether a judge or a correction would make it."""

import pytest

from vxmem import Vectrix

from helpers import DAY, T0, WordHashEmbedder


def always(new, old):
    return [True] * len(old)


def live(db, id, now):
    [entry] = [e for e in db.history(id, now=now) if e.id == id]
    return entry.live


def test_a_fact_written_with_an_earlier_time_does_not_supersede_a_later_one():
    db = Vectrix(embedder=WordHashEmbedder(), judge=always)
    lisbon = db.remember("Dana lives in Lisbon", kind="fact", timestamp=T0 + 10 * DAY)
    porto = db.remember("Dana lives in Porto", kind="fact", timestamp=T0 + 5 * DAY)
    assert live(db, lisbon, T0 + 12 * DAY) and live(db, porto, T0 + 12 * DAY)
    assert lisbon in db.recall("where does Dana live", now=T0 + 12 * DAY).ids
    # in time order the judge still supersedes both
    faro = db.remember("Dana lives in Faro", kind="fact", timestamp=T0 + 20 * DAY)
    assert not live(db, lisbon, T0 + 21 * DAY) and not live(db, porto, T0 + 21 * DAY)
    assert db.recall("where does Dana live", now=T0 + 21 * DAY).ids == [faro]


def test_remember_many_judges_by_the_same_rule():
    db = Vectrix(embedder=WordHashEmbedder(), judge=always)
    later = db.remember("Dana lives in Lisbon", kind="fact", timestamp=T0 + 10 * DAY)
    [earlier] = db.remember_many([{"text": "Dana lives in Porto", "kind": "fact", "timestamp": T0}])
    assert live(db, later, T0 + 11 * DAY) and live(db, earlier, T0 + 11 * DAY)


def test_a_correction_dated_before_what_it_replaces_is_refused_and_nothing_is_written():
    db = Vectrix(embedder=WordHashEmbedder())
    dark = db.remember("I prefer dark mode", kind="fact", timestamp=T0 + DAY)
    with pytest.raises(ValueError, match=f"comes before memory '{dark}'"):
        db.feedback(dark, "corrected", correction="light mode now", timestamp=T0)
    light = db.feedback(dark, "corrected", correction="light mode now", timestamp=T0 + 5 * DAY)
    before = [(r.id, r.metadata) for r in db.scan()]
    with pytest.raises(ValueError, match=f"comes before memory '{light}'"):
        db.feedback(dark, "corrected", correction="back to dark", timestamp=T0 + 3 * DAY)
    assert [(r.id, r.metadata) for r in db.scan()] == before
    newest = db.feedback(dark, "corrected", correction="back to dark", timestamp=T0 + 6 * DAY)
    assert db.recall("which mode", now=T0 + 7 * DAY).ids == [newest]
