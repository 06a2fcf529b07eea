"""The plain-chat scenario: updates told in passing, restatements, other-sense mentions, frozen splits."""

import re

import pytest

from vxmem.workbench.synth import generate
from vxmem.workbench.synth.plain_chat import SLOTS, SPLITS


@pytest.fixture(scope="module")
def chat():
    conv = generate("plain_chat", seed=5)
    return conv, {e.label: e for e in conv.events if e.type == "turn"}


def _probes(conv, category):
    return [p for p in conv.probes if p.category == category]


def test_every_slot_has_an_update_and_a_control_session(chat):
    conv, _ = chat
    for category in ("update", "control"):
        assert sorted(p.meta["slot"] for p in _probes(conv, category)) == sorted(s["slot"] for s in SLOTS)


def test_an_update_probe_wants_the_update_and_calls_the_old_statement_stale(chat):
    conv, turns = chat
    for p in _probes(conv, "update"):
        assert set(p.relevant) == {p.meta["update"]} and set(p.stale) == {p.meta["old"]}
        old, new, namesake = (turns[p.meta[k]] for k in ("old", "update", "namesake"))
        assert old.time < new.time < namesake.time < p.time
        assert {old.session, new.session, namesake.session} == {p.session}


def test_a_control_probe_wants_the_fact_or_its_restatement_and_nothing_is_stale(chat):
    conv, turns = chat
    for p in _probes(conv, "control"):
        assert set(p.relevant) == {p.meta["old"], p.meta["restatement"]} and not p.stale
        assert turns[p.meta["old"]].time < turns[p.meta["restatement"]].time < p.time


def test_the_update_names_another_value_and_the_namesake_the_old_one(chat):
    conv, turns = chat
    for p in _probes(conv, "update"):
        spec = next(s for s in SLOTS if s["slot"] == p.meta["slot"])
        old_value = next(v for v in spec["values"] if v.lower() in turns[p.meta["old"]].text.lower())
        assert old_value.lower() not in turns[p.meta["update"]].text.lower()
        assert old_value.lower() in turns[p.meta["namesake"]].text.lower()


def test_no_update_says_actually_or_corrects_itself(chat):
    conv, turns = chat
    for p in _probes(conv, "update"):
        assert not re.search(r"\b(actually|correction|scratch that)\b", turns[p.meta["update"]].text, re.I)


def test_the_splits_are_the_first_and_last_six_slots(chat):
    conv, _ = chat
    index = {s["slot"]: i for i, s in enumerate(SLOTS)}
    for p in conv.probes:
        if p.category in ("update", "control"):
            assert index[p.meta["slot"]] in SPLITS[p.meta["split"]]
    assert set(SPLITS["dev"]).isdisjoint(SPLITS["held"]) and len(SLOTS) == 12


def test_rounds_multiply_the_sessions():
    one, two = generate("plain_chat", seed=1), generate("plain_chat", seed=1, rounds=2)
    sessions = lambda c: {e.session for e in c.events if e.type == "turn"}
    assert len(sessions(two)) == 2 * len(sessions(one)) == 4 * len(SLOTS)
