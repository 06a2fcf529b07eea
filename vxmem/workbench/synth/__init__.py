"""Synthetic conversations that exercise one memory behaviour each.

``generate(scenario, seed=0, **size)`` returns a :class:`~vxmem.workbench.datasets.Conversation`;
the same seed gives the same conversation. Wording varies (paraphrased statements and
questions, distractors that share words with the question) so that word overlap alone
does not give the answer.

Scenarios (see :data:`SCENARIOS`; written in :mod:`vxmem.workbench.synth.scenarios`):

- ``preference_drift``: a preference corrected over weeks ("dark mode", later "actually
  light mode"), half by ``feedback(corrected)``, half by a plain later statement.
- ``old_but_relevant``: a fact said months ago must beat fresh chit-chat.
- ``knowledge_update``: a value restated weeks later without an explicit correction ("I
  live in Lisbon", later "I live in Porto these days"); the probe asks for the current one.
- ``feedback_loop``: recalled tips are graded useful or dead_end, round after round.
- ``contradicting_facts``: facts about people change; a judge must supersede the old ones.
- ``long_thread``: a long thread with TTLs, expiry and weekly consolidation.
- ``many_users``: similar facts in many sessions; a probe must never see another session.
- ``restated_preference`` and ``quiet_correction`` (:mod:`vxmem.workbench.synth.judges`):
  a favourite said again that is no contradiction, and corrections said without "actually";
  they tell contradiction judges apart in the supersession audit.
- ``plain_chat`` (:mod:`vxmem.workbench.synth.plain_chat`): remember() on every turn and nothing
  else; a fact later changed in passing and in other words, or only restated, among small talk
  and a mention of the old value in another sense.

Every scenario ends with four probes about things it never mentions (category
``"unanswerable"``, nothing relevant; :func:`~vxmem.workbench.synth.timeline.ask_unanswerable`):
the questions a recall's match probability (:mod:`vxmem.memory.confidence`) must call unmatched.

The judge and the summarizer these scenarios need are the rule-based ones of
:mod:`vxmem.memory.rules` (:class:`~vxmem.memory.rules.RuleKeyValueJudge`,
:class:`~vxmem.memory.rules.RuleSummarizer`), which understand the sentence shapes written there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..datasets.model import Conversation
from .judges import quiet_correction, restated_preference
from .plain_chat import plain_chat
from .scenarios import (
    contradicting_facts,
    feedback_loop,
    knowledge_update,
    long_thread,
    many_users,
    old_but_relevant,
    preference_drift,
)
from .timeline import ScenarioTimeline, ask_unanswerable

SCENARIOS: dict[str, tuple[Callable, dict[str, int]]] = {
    "preference_drift": (preference_drift, {"users": 2, "topics": 4, "weeks": 8, "chatter": 4}),
    "old_but_relevant": (old_but_relevant, {"facts": 5, "months": 4, "per_day": 2}),
    "knowledge_update": (knowledge_update, {"facts": 5, "weeks": 9, "per_day": 2}),
    "feedback_loop": (feedback_loop, {"topics": 5, "rounds": 6}),
    "contradicting_facts": (contradicting_facts, {"people": 6, "updates": 2}),
    "long_thread": (long_thread, {"days": 28, "per_day": 6, "consolidate_every": 7}),
    "many_users": (many_users, {"users": 6, "facts_per_user": 3}),
    "restated_preference": (restated_preference, {"people": 6, "rounds": 3}),
    "quiet_correction": (quiet_correction, {"people": 6, "updates": 2}),
    "plain_chat": (plain_chat, {"rounds": 1}),
}


def generate(scenario: str, seed: int = 0, **size: int) -> Conversation:
    """A synthetic conversation for ``scenario``; the same seed gives the same conversation.

    ``size`` overrides the scenario's size knobs (see :data:`SCENARIOS`), e.g.
    ``generate("preference_drift", seed=1, users=3, weeks=10)``.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {', '.join(SCENARIOS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    fn, defaults = SCENARIOS[scenario]
    unknown = set(size) - set(defaults)
    if unknown:
        raise TypeError(f"{scenario} has no size {sorted(unknown)[0]!r}; sizes: {', '.join(defaults)}")
    params = dict(defaults)
    for k, v in size.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"size {k} must be an int >= 1, got {v!r}")
        params[k] = int(v)
    tl = ScenarioTimeline(int(seed))
    info = fn(tl, **params)
    ask_unanswerable(tl)
    args = "".join(f" --{k.replace('_', '-')} {v}" for k, v in size.items())
    meta = {"generator": f"vxmem.workbench.synth.generate({scenario!r}, seed={seed}"
                         + "".join(f", {k}={v}" for k, v in size.items()) + ")",
            "seed": int(seed),
            "regenerate": f"vxmem synth {scenario} --seed {seed}{args} -o datasets/{scenario}.jsonl"}
    for key in ("judge", "summarizer"):
        if key in info:
            meta[key] = info[key]
    return Conversation(name=scenario, events=tl.events, description=info["description"], meta=meta)
