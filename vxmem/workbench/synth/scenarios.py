"""The scenarios :func:`vxmem.workbench.synth.generate` writes, one memory behaviour each, with
the statements, questions and distractors they are written from.

Each scenario writes its events on a :class:`~vxmem.workbench.synth.timeline.ScenarioTimeline`
and returns what the conversation's header says of it: a ``description`` and, where the
scenario needs one, the rule-based ``judge`` or ``summarizer`` to replay it with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.clock import DAY
from ...memory.rules import rule_key_value
from .timeline import ScenarioTimeline, chit_chat

_TOPICS = [
    {"topic": "theme", "old": ["I prefer dark mode for every app.",
                               "Please always use a dark theme, my eyes hurt on white.",
                               "Dark mode, please: bright screens give me headaches."],
     "new": "Actually I prefer light mode now, the dark theme is hard to read in my sunny office.",
     "queries": ["Which colour scheme should the interface use?", "Should the screen be bright or dim for me?"],
     "distractors": ["The dark chocolate cake was amazing.", "What mode of transport is fastest to Lyon?",
                     "My office gets a lot of light in the mornings."]},
    {"topic": "units", "old": ["I like measurements in metric, kilometres and kilos.",
                               "Use metric units for me, please.",
                               "Give me distances in kilometres, never miles."],
     "new": "Scratch that: I moved to Ohio, so give me miles and pounds from now on.",
     "queries": ["How should I express distances to this person?", "Which measurement system does the user want?"],
     "distractors": ["I ran a few kilometres this morning.", "The unit test suite is failing again.",
                     "How far is the moon in miles?"]},
    {"topic": "reports", "old": ["I prefer my reports as PDF files.", "Send the weekly report as a PDF, please.",
                                 "PDF is my favourite format for reports."],
     "new": "Correction: spreadsheets work better for me, send reports as Excel files.",
     "queries": ["In what file type should the weekly summary be delivered?", "How do they want documents sent?"],
     "distractors": ["The report on climate change was sobering.", "Can you convert this image to PNG?",
                     "My weekly team meeting moved to Thursday."]},
    {"topic": "contact", "old": ["Email is the best way to reach me.", "Please notify me by email, not by phone.",
                                 "I prefer getting notifications through email."],
     "new": "Actually text messages work better now; I never check my inbox.",
     "queries": ["What's the right channel to send this person alerts?", "How should reminders reach the user?"],
     "distractors": ["I got a spam email about a cruise.", "My phone battery died at lunch.",
                     "Send a thank-you note to the caterers."]},
]


@dataclass
class _Change:
    """One user's preference on one topic: the label first said, the week it changes, the label after."""

    session: str
    spec: dict[str, Any]
    by_feedback: bool
    week: int
    old: str = ""
    new: str = ""


def preference_drift(tl: ScenarioTimeline, users: int, topics: int, weeks: int, chatter: int) -> dict[str, Any]:
    topics = min(topics, len(_TOPICS))
    sessions = [f"user{u + 1}" for u in range(users)]
    changes = [_Change(s, _TOPICS[k], by_feedback=(u + k) % 2 == 0,
                       week=int(tl.rng.integers(max(1, weeks // 3), max(2, weeks - 1))))
               for u, s in enumerate(sessions) for k in range(topics)]
    extra = [d for p in _TOPICS[:topics] for d in p["distractors"]]
    for c in changes:
        c.old = tl.turn(tl.pick(c.spec["old"]), c.session)
        chit_chat(tl, c.session, 1, extra)
    for week in range(1, weeks + 1):
        tl.advance(days=7)
        for s in sessions:
            chit_chat(tl, s, chatter, extra)
        for c in changes:
            if c.week == week:
                _change_preference(tl, c)
            if week in (c.week - 1, c.week + 1, weeks):
                changed = week >= c.week  # the change lands before this week's probes
                tl.probe(tl.pick(c.spec["queries"]), c.session,
                         relevant=[c.new] if changed else [c.old],
                         stale=[c.old] if changed else [],
                         category="after_change" if changed else "before_change", topic=c.spec["topic"])
    return {"description": f"{users} users change {topics} preferences over {weeks} weeks; half the changes "
                           "are corrections through feedback(), half are plain later statements."}


def _change_preference(tl: ScenarioTimeline, c: _Change) -> None:
    """The new preference, as a correction through feedback() or as a plain later statement."""
    if c.by_feedback:
        c.new = tl.label("c")
        tl.add("feedback", label=c.new, target=c.old, outcome="corrected", correction=c.spec["new"])
        tl.advance(jitter_minutes=5)
    else:
        c.new = tl.turn(c.spec["new"], c.session)


_OLD_FACTS = [
    ("I'm allergic to peanuts, it's serious.", ["Is there any food I must avoid?", "What can't I eat safely?"],
     ["Peanut butter cookies are on sale.", "Which foods are high in protein?", "I avoid the gym on Mondays."]),
    ("My passport expires in March 2026.",
     ["When does my travel document run out?", "Until when is my ID for flights valid?"],
     ["I need to travel to Madrid in March.", "What documents do I need for a mortgage?",
      "The expiry date on the milk passed."]),
    ("My daughter Lina was born on 4 June.",
     ["When is my kid's birthday?", "What date should I plan the girl's party for?"],
     ["The party at work is on Friday.", "Which plants bloom in June?", "My kid wants a puppy."]),
    ("I drive a blue Volvo estate.", ["What car do I have?", "Which vehicle should the parking permit list?"],
     ["The blue whale is the largest animal.", "Parking downtown is impossible.", "Which car rental is cheapest?"]),
    ("My blood type is O negative.", ["What is my blood group?", "Which transfusion type matches me?"],
     ["The blood drive at work is on Friday.", "Our hiking group meets on Sundays.",
      "What type of bread is healthiest?"]),
    ("I'm a vegetarian since 2015.", ["Should the dinner menu for me include meat?", "What diet do I follow?"],
     ["The dinner menu at the steakhouse changed.", "I follow a cooking channel about meat smoking.",
      "I've been at this job since 2015."]),
]


def old_but_relevant(tl: ScenarioTimeline, facts: int, months: int, per_day: int) -> dict[str, Any]:
    s = "user1"
    chosen = [_OLD_FACTS[i] for i in tl.rng.permutation(len(_OLD_FACTS))[:min(facts, len(_OLD_FACTS))]]
    labels = []
    for text, _, _ in chosen:
        labels.append(tl.turn(text, s))
        chit_chat(tl, s, 1)
    extra = [d for _, _, ds in chosen for d in ds]
    days = max(1, int(months * 30))
    ask_days = {days // 2, days}
    for day in range(1, days + 1):
        tl.advance(days=1)
        chit_chat(tl, s, per_day, extra)
        if day in ask_days:
            for label, (_, queries, _) in zip(labels, chosen):
                tl.probe(tl.pick(queries), s, relevant=[label], category=f"age_{day}d")
    return {"description": f"{len(chosen)} facts said once, then {months} months of chit-chat that shares "
                           "words with the later questions."}


# (attribute, old statement, new statement, questions, distractors). The new statement restates the
# value as plainly as the old one did, with no correction and no link to it: relevance alone cannot
# tell which is current, recency can.
_UPDATES = [
    ("home", "I live in Lisbon, in a flat near the river.", "I live in Porto these days, we moved last month.",
     ["Which city do I live in?", "Where do I live?"],
     ["My brother lives in a flat in Madrid.", "The river cruise in Lisbon looked fun on TV."]),
    ("job", "I work as a nurse at the city hospital.", "I work as a chemistry teacher at the high school.",
     ["What do I do for work?", "Where do I work?"],
     ["My neighbour works at the hospital cafeteria.", "Work was busy today."]),
    ("car", "I drive a red Toyota hatchback.", "I drive an electric Kia, the Toyota is sold.",
     ["What car do I drive?", "Which car do I have?"],
     ["The red traffic light on Main Street is broken.", "Can you drive me to the airport on Friday?"]),
    ("gym", "My gym sessions are on Monday evenings.", "My gym sessions are on Thursday mornings.",
     ["Which day do I go to the gym?", "When are my gym sessions?"],
     ["The gym near the station has a new pool.", "Monday evenings are always quiet."]),
    ("phone", "My phone number is 555-0101.", "My phone number is 555-0199, I got a new SIM.",
     ["What's my phone number?", "Which number should you call me on?"],
     ["The phone shop closes at six.", "My number of unread emails is scary."]),
    ("diet", "I eat meat with almost every meal.", "I don't eat meat any more, I went vegan.",
     ["Do I eat meat?", "Should my dinner include meat?"],
     ["The meal kit arrived late again.", "Every meal at that diner is huge."]),
]


def knowledge_update(tl: ScenarioTimeline, facts: int, weeks: int, per_day: int) -> dict[str, Any]:
    s = "user1"
    chosen = [_UPDATES[i] for i in tl.rng.permutation(len(_UPDATES))[:min(facts, len(_UPDATES))]]
    old = {}
    for attr, text, *_ in chosen:
        old[attr] = tl.turn(text, s)
        chit_chat(tl, s, 1)
    # each value changes in a week of its own in the middle third, and is asked for the week
    # before, the day after and a fortnight after (or at the end); each distractor, which
    # shares words with the questions, is said once on a day of its own
    weeks = max(weeks, 3)
    days = weeks * 7
    when = {attr: int(tl.rng.integers(max(1, weeks // 3), max(2, 2 * weeks // 3) + 1)) for attr, *_ in chosen}
    distractors = [d for *_, ds in chosen for d in ds]
    said_on = {int(d): text for d, text in zip(tl.rng.choice(np.arange(1, days + 1), len(distractors), replace=False),
                                                 distractors)}
    new: dict[str, str] = {}
    pending: list[tuple[int, str, str]] = []  # (day, attr, category) of the probes still to ask
    for day in range(1, days + 1):
        tl.advance(days=1)
        chit_chat(tl, s, per_day)
        if day in said_on:
            tl.turn(said_on[day], s)
        for attr, _, new_text, queries, _ in chosen:
            if day == when[attr] * 7:
                tl.probe(tl.pick(queries), s, relevant=[old[attr]], category="before_update", attribute=attr)
                tl.advance(hours=2)
                new[attr] = tl.turn(new_text, s)
                pending += [(day + 1, attr, "day_after"), (min(day + 14, days), attr, "weeks_after")]
        for due, attr, category in [p for p in pending if p[0] == day]:
            queries = next(q for a, _, _, q, _ in chosen if a == attr)
            tl.probe(tl.pick(queries), s, relevant=[new[attr]], stale=[old[attr]], category=category, attribute=attr)
            pending.remove((due, attr, category))
    return {"description": f"{len(chosen)} things the user said change weeks later, restated as plainly as "
                           "before and without a correction; the probe asks for the current value, the old one "
                           "is stale."}


_TIPS = [
    ("wifi", "How do I fix my wifi dropping?", [
        "For wifi drops, move the router away from the microwave and change the channel.",
        "Wifi dropping is usually fixed by restarting everything, router and modem and laptop.",
        "If the wifi keeps dropping, update the router firmware."]),
    ("sleep", "What helps me fall asleep?", [
        "To fall asleep faster, keep the bedroom cool and dark.",
        "Falling asleep is easier after a big late-night meal.",
        "Try a fixed bedtime and no screens an hour before sleep."]),
    ("printer", "Why won't my printer print?", [
        "When the printer won't print, clear the queue and reinstall the driver.",
        "A printer that won't print just needs to be shaken gently.",
        "Check the printer is on the same network as the laptop."]),
    ("focus", "How can I focus better at work?", [
        "For better focus at work, block notifications for 50-minute sprints.",
        "Focus at work improves with a third coffee in the afternoon.",
        "Write tomorrow's three priorities before leaving work."]),
    ("plants", "Why are my plant leaves turning yellow?", [
        "Yellow plant leaves usually mean overwatering; let the soil dry out.",
        "Plant leaves turning yellow need more fertiliser every day.",
        "Move the plant to brighter indirect light."]),
]


def feedback_loop(tl: ScenarioTimeline, topics: int, rounds: int) -> dict[str, Any]:
    s = "user1"
    specs = _TIPS[:min(topics, len(_TIPS))]
    tips = {}
    for topic, _, texts in specs:
        # the dead end repeats the question's words most, so it starts on top
        tips[topic] = [tl.turn(t, s, "assistant", label=f"{topic}-{i}") for i, t in enumerate(texts)]
        chit_chat(tl, s, 2)
    for r in range(rounds):
        tl.advance(days=3)
        chit_chat(tl, s, 3)
        for topic, query, _ in specs:
            good, bad, ok = tips[topic]
            tl.probe(query, s, relevant={good: 2, ok: 1}, category=f"round_{r}", topic=topic)
            tl.add("feedback", target=good, outcome="useful")
            tl.add("feedback", target=bad, outcome="dead_end")
            tl.advance(jitter_minutes=5)
    return {"description": f"{len(specs)} topics with three stored tips each; after every probe the good tip "
                           f"is graded useful and the bad one dead_end, for {rounds} rounds."}


_PEOPLE = ["Dana", "Omar", "Priya", "Tomas", "Keiko", "Lena", "Marco", "Ines"]
_CITIES = ["Lisbon", "Porto", "Berlin", "Osaka", "Denver", "Quito", "Oslo", "Nairobi", "Leeds", "Hanoi"]
_EMPLOYERS = ["Acme", "Globex", "Initech", "Umbrella Health", "Stark Freight", "Wayne Foods", "Hooli"]
_HOME_FORMS = ["{p} lives in {v}.", "{p} has moved to {v}.", "{p} relocated to {v}.", "{p} is based in {v}."]
_JOB_FORMS = ["{p} works at {v}.", "{p} has joined {v}.", "{p} took a job at {v}.", "{p} now works for {v}."]
_HOME_Q = ["Where does {p} live these days?", "Which city is {p} in now?", "What's {p}'s current town?"]
_JOB_Q = ["Who is {p}'s employer?", "Which company does {p} work for?", "Where is {p} employed?"]
_NOISE = ["{p} visited {v} last spring.", "{p} has a friend who lives near {v}.",
          "{p} wrote a review of a cafe in {v}."]


def contradicting_facts(tl: ScenarioTimeline, people: int, updates: int) -> dict[str, Any]:
    s = "kb"
    names = list(tl.rng.permutation(_PEOPLE)[:min(people, len(_PEOPLE))])
    current: dict[tuple[str, str], list[str]] = {}
    values = {"home": _CITIES, "employer": _EMPLOYERS}
    forms = {"home": _HOME_FORMS, "employer": _JOB_FORMS}
    questions = {"home": _HOME_Q, "employer": _JOB_Q}

    def say(p, attr, first=False):
        old = [e for e in tl.events if e.label in current.get((p, attr), [])]
        olds = {rule_key_value(e.text)[1] for e in old}
        v = tl.pick([c for c in values[attr] if c.lower() not in olds])
        form = forms[attr][0] if first else tl.pick(forms[attr][1:])
        text = form.format(p=p, v=v)
        current.setdefault((p, attr), []).append(tl.fact(text, s))

    def noise(p):
        said = {e.text for e in tl.events}
        options = [f.format(p=p, v=c) for f in _NOISE for c in _CITIES]
        tl.fact(tl.pick([o for o in options if o not in said]), s)

    for p in names:
        for attr in ("home", "employer"):
            say(p, attr, first=True)
        noise(p)
    for u in range(updates):
        tl.advance(days=20)
        for p in names:
            attr = "home" if (u + names.index(p)) % 2 == 0 else "employer"
            for a in ("home", "employer"):
                labels = current[(p, a)]
                tl.probe(tl.pick(questions[a]).format(p=p), s, relevant=[labels[-1]], stale=labels[:-1],
                         category="before_update" if a == attr else "unchanged")
            tl.advance(days=1)
            say(p, attr)
            noise(p)
    tl.advance(days=5)
    for p in names:
        for a in ("home", "employer"):
            labels = current[(p, a)]
            tl.probe(tl.pick(questions[a]).format(p=p), s, relevant=[labels[-1]], stale=labels[:-1],
                     category="after_update" if len(labels) > 1 else "unchanged")
    return {"description": f"Facts about {len(names)} people change {updates} times; the rule-based "
                           "key-value judge must supersede the old ones.", "judge": "rule_key_value"}


_LASTING = [
    ("My sister is called Ana.", ["What's my sister's name?", "Who is my sibling?"]),
    ("I prefer aisle seats on flights.", ["Book me a seat on the plane: which kind?", "Window or aisle for me?"]),
    ("I work as a nurse at the city hospital.", ["What is my job?", "Where am I employed?"]),
    ("My favourite cuisine is Ethiopian.", ["Which restaurant food do I like best?", "Pick a dinner place I'd love."]),
    ("I live in a flat on Rua Augusta.", ["What's my street?", "Where is my home?"]),
    ("I always take my coffee black.", ["How do I drink coffee?", "Should my latte have milk?"]),
]
_TEMP = [
    ("For tonight my hotel room is 312.", ["What's my hotel room number?"]),
    ("Today my parking spot is B7.", ["Where did I park?"]),
    ("For now the door code is 4471.", ["What is the door code?"]),
]


def long_thread(tl: ScenarioTimeline, days: int, per_day: int, consolidate_every: int) -> dict[str, Any]:
    s = "user1"
    lasting: dict[int, str] = {}  # index in _LASTING -> label of the turn that said it
    temps: list[tuple[str, list[str], float]] = []  # (label, queries, when said) of each temporary fact
    order = list(tl.rng.permutation(len(_LASTING)))
    temp_order = list(tl.rng.permutation(len(_TEMP)))
    for day in range(1, days + 1):
        tl.advance(days=1)
        if order and day % 3 == 1:
            i = order.pop()
            lead, text = tl.pick(["", "By the way, ", "Just so you know, "]), _LASTING[i][0]
            if lead and not text.startswith(("I ", "I'")):
                text = text[0].lower() + text[1:]
            lasting[i] = tl.turn(lead + text, s)
        if temp_order and day % 7 == 2:
            i = temp_order.pop()
            temps.append((tl.turn(_TEMP[i][0], s, ttl_days=1.0), _TEMP[i][1], tl.t))
        chit_chat(tl, s, per_day, ttl_days=None)
        for lab, queries, said in temps:
            if said + DAY < tl.t < said + 3 * DAY:
                tl.probe(tl.pick(queries), s, relevant=[], stale=[lab], category="expired")
        if day % consolidate_every == 0:
            tl.add("expire")
            tl.add("consolidate", session=s, keep_recent=6)
            tl.advance(hours=1)
            for i, (_, queries) in enumerate(_LASTING):
                if i in lasting:
                    tl.probe(tl.pick(queries), s, relevant=[lasting[i]], category="lasting")
    return {"description": f"A {days}-day thread in one session, {per_day} chit-chat turns a day; temporary "
                           f"facts expire after a day; every {consolidate_every} days expire() and "
                           "consolidate() run with the rule-based summarizer.",
            "summarizer": "rule_summarizer"}


_USER_FACTS = [
    ("pet", ["My dog is called {v}.", "Our puppy's name is {v}.", "I have a dog named {v}."],
     ["Rex", "Bella", "Miso", "Pepper", "Ziggy", "Luna", "Biscuit", "Olive"],
     ["What's my pet called?", "Remind me of the puppy's name."]),
    ("city", ["I live in {v}.", "Home for me is {v}.", "I'm based in {v} these days."],
     ["Lisbon", "Denver", "Osaka", "Leeds", "Quito", "Oslo", "Hanoi", "Perth"],
     ["Where do I live?", "Which city is home?"]),
    ("drink", ["My favourite drink is {v}.", "I always order {v}.", "Nothing beats {v} for me."],
     ["green tea", "espresso", "lemonade", "oat latte", "mint tea", "hot chocolate", "kombucha", "cola"],
     ["What should you order me at the cafe?", "Which drink do I like?"]),
]


def many_users(tl: ScenarioTimeline, users: int, facts_per_user: int) -> dict[str, Any]:
    sessions = [f"user{u + 1}" for u in range(users)]
    specs = _USER_FACTS[:min(facts_per_user, len(_USER_FACTS))]
    said: dict[tuple[str, str], str] = {}
    for kind, forms, values, _ in specs:
        vals = list(tl.rng.permutation(values))
        for u, s in enumerate(sessions):
            said[(s, kind)] = tl.turn(tl.pick(forms).format(v=vals[u % len(vals)]), s)
            chit_chat(tl, s, 1)
    tl.advance(days=2)
    for s in sessions:
        chit_chat(tl, s, 2)
        for kind, _, _, queries in specs:
            tl.probe(tl.pick(queries), s, relevant=[said[(s, kind)]], category=kind)
    return {"description": f"{users} users state the same kinds of facts with different values; every probe "
                           "runs in one user's session and must never see another's."}
