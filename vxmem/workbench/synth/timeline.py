"""What every synthetic scenario is written with: a clock that moves, a seeded RNG, and chit-chat.

A :class:`ScenarioTimeline` appends events at a moving clock that starts at :data:`START`,
with a seeded RNG for every choice, so a seed gives the same conversation;
:func:`chit_chat` fills a session with small talk between the turns that matter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...core.clock import DAY, to_epoch
from ..datasets.model import Event

START = to_epoch("2024-01-01T09:00:00Z")
HOUR = 3600.0


class ScenarioTimeline:
    """Appends events at a moving clock, with a seeded RNG for every choice."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.t = START
        self.events: list[Event] = []
        self.n = 0

    def pick(self, options: Sequence[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def advance(self, hours: float = 0.0, days: float = 0.0, jitter_minutes: float = 30.0) -> None:
        self.t += hours * HOUR + days * DAY + float(self.rng.uniform(1.0, 1.0 + jitter_minutes)) * 60.0

    def label(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def add(self, type: str, **fields: Any) -> Event:
        ev = Event(time=round(self.t), type=type, **fields)
        self.events.append(ev)
        return ev

    def turn(self, text: str, session: str | None, role: str = "user", label: str | None = None,
             **kw: Any) -> str:
        label = label or self.label("t")
        self.add("turn", label=label, session=session, role=role, text=text, **kw)
        self.advance(jitter_minutes=5)
        return label

    def fact(self, text: str, session: str | None, label: str | None = None, **kw: Any) -> str:
        label = label or self.label("f")
        self.add("fact", label=label, session=session, text=text, **kw)
        self.advance(jitter_minutes=5)
        return label

    def probe(self, query: str, session: str | None, relevant: Mapping[str, float] | Sequence[str],
              stale: Sequence[str] = (), category: str | None = None, **meta: Any) -> None:
        rel = relevant if isinstance(relevant, dict) else {r: 1.0 for r in relevant}
        self.add("probe", label=self.label("q"), query=query, session=session, relevant=dict(rel),
                 stale=tuple(stale), category=category, meta=dict(meta))
        self.advance(jitter_minutes=2)


_CHATTER = [
    "Good morning! How's it going?", "Thanks, that was helpful.", "Can you summarise that article for me?",
    "What's the weather looking like this weekend?", "I had a long day at the office.",
    "Remind me what we talked about yesterday.", "That joke was terrible, tell me another one.",
    "I'm going to make some tea.", "Let's pick this up later.", "Could you proofread this paragraph?",
    "The train was late again this morning.", "I watched a documentary about octopuses last night.",
    "What time zone is Tokyo in?", "Please translate 'good evening' into Spanish.",
    "I need a name for my new houseplant.", "How many cups are in a litre?",
    "Give me a quick stretching routine.", "I think I'll go for a walk after lunch.",
    "Tell me something interesting about Saturn.", "Okay, sounds good.",
]
_ASSISTANT = [
    "Sure, here you go.", "Happy to help!", "Here is a short summary.", "Good question; here's what I found.",
    "Noted.", "Of course. Anything else?", "Here are a few options.", "Done. Let me know if you want changes.",
]


def reply(tl: ScenarioTimeline, session: str, chance: float = 0.5, **kw: Any) -> None:
    """The assistant's short reply in ``session``, with probability ``chance``."""
    if tl.rng.random() < chance:
        tl.turn(tl.pick(_ASSISTANT), session, "assistant", **kw)


def chit_chat(tl: ScenarioTimeline, session: str, n: int, extra: Sequence[str] = (),
              ttl_days: float | None = None) -> None:
    """``n`` chit-chat turns of the user in ``session`` (from the small talk and ``extra``),
    each answered by the assistant half the time."""
    pool = list(_CHATTER) + list(extra)
    for _ in range(n):
        kw: dict[str, Any] = {"ttl_days": ttl_days} if ttl_days else {}
        tl.turn(tl.pick(pool), session, "user", **kw)
        reply(tl, session, **kw)


UNANSWERABLE = "unanswerable"  # the category of a probe about something the conversation never mentions
# Questions no scenario answers: nothing in any scenario's statements, distractors or small talk
# mentions these things. Half ask in the first person, half about "the user", as people ask.
_NEVER_SAID = [
    "What's the name of my piano teacher?", "Which university did the user graduate from?",
    "What is my shoe size?", "Which football team does the user support?", "How old is my grandmother?",
    "What did the user name their sailing boat?", "Which language am I learning at night school?",
    "What is the user's favourite board game?", "What tattoo did I get last summer?",
    "What is the name of the user's landlord?", "Which opera did I see at the theatre?",
    "What is the user's passport number?", "Which chess opening do I usually play?",
    "Which instrument did the user play in the school orchestra?", "Which video game am I stuck on?",
    "What colour is the user's front door?", "What's my accountant called?",
    "Which podcast does the user listen to?", "What was the title of my thesis?",
    "Which mountain did the user climb on their honeymoon?",
]


def ask_unanswerable(tl: ScenarioTimeline, n: int = 4) -> None:
    """Append ``n`` probes about things the conversation never mentions (category
    :data:`UNANSWERABLE`, nothing relevant), spread over the sessions the scenario probed:
    what the confidence of a recall (:mod:`vxmem.memory.confidence`) is fitted and checked on.
    They come after every other event, so the scenario's own events stay as they were."""
    sessions = list(dict.fromkeys(e.session for e in tl.events if e.type == "probe"))
    if not sessions:
        return
    asked = tl.rng.choice(len(_NEVER_SAID), size=min(n, len(_NEVER_SAID)), replace=False)
    for i, k in enumerate(asked.tolist()):
        tl.probe(_NEVER_SAID[k], sessions[i % len(sessions)], relevant=[], category=UNANSWERABLE)
