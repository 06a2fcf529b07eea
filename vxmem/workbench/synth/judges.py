"""Two scenarios that tell contradiction judges apart, for the supersession audit
(:mod:`vxmem.workbench.analysis.audit`).

- ``restated_preference``: a favourite said again later is not a contradiction ("Omar's
  favourite tea is still jasmine"); a judge that retires the first saying is wrong. A third
  of the people do change their favourite, plainly ("... is now green tea").
- ``quiet_correction``: where people live and work changes, said without "actually",
  "correction" or any other marker ("These days Priya calls Lisbon home"); a judge that
  waits for the marker misses them all.

Each new fact says what it means in its ``meta``: ``"supersedes": [label]`` for a change,
``"restates": [label]`` for a restatement, so the audit needs no guessing. The rule-based
key-value judge gets some of each right and some wrong, on purpose: it reads sentence shapes.
"""

from __future__ import annotations

from typing import Any

from .timeline import ScenarioTimeline

_PEOPLE = ["Dana", "Omar", "Priya", "Tomas", "Keiko", "Lena", "Marco", "Ines", "Ravi", "Sofia"]
_FAVOURITES = {
    "tea": ["jasmine", "green tea", "rooibos", "earl grey"], "colour": ["teal", "orange", "navy", "olive"],
    "band": ["Radiohead", "Abba", "Queen", "Blur"], "season": ["autumn", "spring", "winter", "summer"],
}
_FAV_Q = ["What is {p}'s favourite {a}?", "Which {a} does {p} like best?", "Name {p}'s favourite {a}."]
# Restatements: the same value again; the rule-based judge reads "still X" and "X again" as new values.
_RESTATE = ["{p}'s favourite {a} is still {v}.", "As before, {p}'s favourite {a} is {v}.",
            "{p}'s favourite {a} is {v}, as ever.", "{p}'s favourite {a} is {v} again."]
# Changes: the first in a shape the rule-based judge reads, the second not.
_CHANGE = ["{p}'s favourite {a} is now {v}.", "{p}'s favourite {a} has become {v}."]

_CITIES = ["Lisbon", "Porto", "Berlin", "Osaka", "Denver", "Quito", "Oslo", "Nairobi", "Leeds", "Hanoi"]
_EMPLOYERS = ["Acme", "Globex", "Initech", "Hooli", "Wayne Foods", "Stark Freight"]
_FIRST = {"home": "{p} lives in {v}.", "employer": "{p} works at {v}."}
# Corrections with no "actually": the first of each list is a shape the rule-based judge reads.
_QUIET = {"home": ["{p} has moved to {v}.", "These days {p} calls {v} home.", "{p}'s flat is in {v} now.",
                   "{p} lives in {v} since the spring."],
          "employer": ["{p} has joined {v}.", "{p}'s new employer is {v}.", "{p} is on the payroll of {v} now.",
                       "{p} started at {v} last month."]}
_WHERE_Q = {"home": ["Where does {p} live?", "Which city is {p}'s home?"],
            "employer": ["Who does {p} work for?", "Which company employs {p}?"]}
_NOISE = ["{p} visited {v} last spring.", "{p} has a friend who lives near {v}.", "{p} read a book set in {v}."]


def _noise(tl: ScenarioTimeline, p: str, s: str) -> None:
    said = {e.text for e in tl.events}
    options = [f.format(p=p, v=c) for f in _NOISE for c in _CITIES]
    tl.fact(tl.pick([o for o in options if o not in said]), s)


def restated_preference(tl: ScenarioTimeline, people: int, rounds: int) -> dict[str, Any]:
    s = "kb"
    names = list(tl.rng.permutation(_PEOPLE)[:min(people, len(_PEOPLE))])
    attrs = list(_FAVOURITES)
    said: dict[tuple[str, str], tuple[list[str], str]] = {}  # (person, attribute) -> (its sayings, value)
    for i, p in enumerate(names):
        a = attrs[i % len(attrs)]
        v = tl.pick(_FAVOURITES[a])
        said[(p, a)] = ([tl.fact(f"{p}'s favourite {a} is {v}.", s)], v)
        _noise(tl, p, s)
    for r in range(rounds):
        tl.advance(days=10)
        for i, (p, a) in enumerate(said):
            labels, v = said[(p, a)]
            if (i + r) % 3 == 2:  # a real change: every saying of the old value is retired
                v2 = tl.pick([x for x in _FAVOURITES[a] if x != v])
                text = _CHANGE[(i + r) % len(_CHANGE)].format(p=p, a=a, v=v2)
                new = tl.fact(text, s, meta={"supersedes": list(labels)})
                tl.probe(tl.pick(_FAV_Q).format(p=p, a=a), s, relevant=[new], stale=labels, category="changed")
                said[(p, a)] = ([new], v2)
            else:
                text = _RESTATE[(i + r) % len(_RESTATE)].format(p=p, a=a, v=v)
                new = tl.fact(text, s, meta={"restates": list(labels)})
                tl.probe(tl.pick(_FAV_Q).format(p=p, a=a), s, relevant=[*labels, new], category="restated")
                said[(p, a)] = ([*labels, new], v)
            tl.advance(hours=2)
    return {"description": f"{len(names)} people restate their favourites {rounds} times, some in words a "
                           "shape-reading judge takes for a change; a third change them for real. Restating is "
                           "not contradicting: the audit counts a retired restatement as wrongful.",
            "judge": "rule_key_value"}


def quiet_correction(tl: ScenarioTimeline, people: int, updates: int) -> dict[str, Any]:
    s = "kb"
    names = list(tl.rng.permutation(_PEOPLE)[:min(people, len(_PEOPLE))])
    values = {"home": _CITIES, "employer": _EMPLOYERS}
    current: dict[tuple[str, str], tuple[str, str]] = {}
    for p in names:
        for a in ("home", "employer"):
            v = tl.pick(values[a])
            current[(p, a)] = (tl.fact(_FIRST[a].format(p=p, v=v), s), v)
        _noise(tl, p, s)
    for u in range(updates):
        tl.advance(days=15)
        for i, p in enumerate(names):
            a = "home" if (i + u) % 2 == 0 else "employer"
            old, v = current[(p, a)]
            v2 = tl.pick([x for x in values[a] if x != v])
            form = _QUIET[a][(i + u) % len(_QUIET[a])]
            new = tl.fact(form.format(p=p, v=v2), s, meta={"supersedes": [old]})
            current[(p, a)] = (new, v2)
            _noise(tl, p, s)
            tl.advance(hours=3)
            tl.probe(tl.pick(_WHERE_Q[a]).format(p=p), s, relevant=[new], stale=[old], category="corrected")
    return {"description": f"Where {len(names)} people live and work changes {updates} times, said without "
                           "'actually' or any marker of a correction; some in shapes the rule-based judge reads.",
            "judge": "rule_key_value"}
