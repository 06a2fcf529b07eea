"""Rule-based contradiction judge and summarizer: no model, for the workbench and demos only.

The spec bundles no model: contradiction judges and summarizers are callables the caller
brings. The workbench runs offline, so the synthetic scenarios (:mod:`vxmem.workbench.synth`) are
replayed with these two, which are rule-based and named as such:
:class:`RuleKeyValueJudge` and :class:`RuleSummarizer`. They understand the sentence
shapes the scenarios write and little else; bring an LLM callable for real data.

Replay finds them by the names a conversation's header gives (``"judge":
"rule_key_value"``, ``"summarizer": "rule_summarizer"``) through :func:`get_judge` and
:func:`get_summarizer`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# ---------------------------------------------------------------------------- the key-value judge

# (pattern, attribute): a pattern without an attribute names it in its group "a".
_KV_PATTERNS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"^(?P<s>[A-Z]\w+) (?:now )?(?:lives in|is living in|has moved to|moved to|relocated to|"
                r"is based in) (?P<v>[A-Z][\w ]*?)\.?$"), "home"),
    (re.compile(r"^(?P<s>[A-Z]\w+) (?:now )?(?:works at|works for|is employed at|has joined|joined|"
                r"took a job at) (?P<v>[A-Z][\w ]*?)\.?$"), "employer"),
    (re.compile(r"^(?P<s>[A-Z]\w+)(?:'s| has a new) favou?rite (?P<a>\w+) is (?:now )?(?P<v>[\w ]+?)\.?$"), None),
    (re.compile(r"^(?P<s>[A-Z]\w+) (?:now )?drives an? (?P<v>[\w ]+?)\.?$"), "car"),
]


def rule_key_value(text: str) -> tuple[tuple[str, str], str] | None:
    """``((subject, attribute), value)`` for the fact shapes the synthetic scenarios write."""
    text = " ".join(text.strip().split())
    for pattern, attribute in _KV_PATTERNS:
        m = pattern.match(text)
        if m:
            attr = attribute or m.group("a").lower()
            return (m.group("s").lower(), attr), m.group("v").strip().lower()
    return None


class RuleKeyValueJudge:
    """Rule-based contradiction judge: no model, for the workbench and demos only.

    Reads each fact as ``subject / attribute = value`` with a few regular expressions
    ("Dana lives in Lisbon", "Dana has moved to Porto", "Omar's favourite tea is jasmine")
    and says an old fact is contradicted when the new one has the same subject and
    attribute and a different value. Anything it cannot read is never contradicted.
    """

    name = "rule_key_value"

    def __call__(self, new_text: str, old_texts: list[str]) -> list[bool]:
        new = rule_key_value(new_text)
        out = []
        for old in old_texts:
            kv = rule_key_value(old)
            out.append(bool(new and kv and kv[0] == new[0] and kv[1] != new[1]))
        return out


# ---------------------------------------------------------------------------- the summarizer

_KEEP = re.compile(r"\b(prefer|favou?rite|allergic|live|lives|work|works|name is|called|birthday|"
                   r"always|never|remember|my \w+ is|i'm a|i am a|vegetarian|vegan)\b", re.I)
_TEMPORARY = re.compile(r"\b(tonight|today|right now|for now|this morning|this evening|temporar\w*)\b", re.I)
_LEADIN = re.compile(r"^(?:oh,? |by the way,? |btw,? |just so you know,? |fyi,? |also,? |actually,? |"
                     r"remember that |please remember that |note that )+", re.I)
_PERSON = [(re.compile(r"\bI'm\b"), "the user is"), (re.compile(r"\bI am\b"), "the user is"),
           (re.compile(r"\bI've\b"), "the user has"),
           (re.compile(r"\bI (always |never |really |usually |now )?have\b"), r"the user \1has"),
           (re.compile(r"\bI (always |never |really |usually |now )?(prefer|like|love|live|work|drive|take|want|"
                       r"need|own|hate|eat|drink|order)\b"), r"the user \1\2s"),
           (re.compile(r"\bI\b"), "the user"), (re.compile(r"\bme\b"), "the user"),
           (re.compile(r"\bmine\b"), "the user's")]
_MY = re.compile(r"\b[Mm]y\b")


def _third_person_my(s: str) -> str:
    """"my" becomes "the user's" the first time the user is named, "their" after that."""
    out, pos = [], 0
    for m in _MY.finditer(s):
        out.append(s[pos:m.start()])
        out.append("their" if "the user" in "".join(out) else "the user's")
        pos = m.end()
    return "".join(out) + s[pos:]


def _lasting(sentence: str) -> bool:
    """Whether a sentence states something lasting: not a question, not marked temporary."""
    return bool(sentence) and not sentence.endswith("?") and bool(_KEEP.search(sentence)) \
        and not _TEMPORARY.search(sentence)


def _third_person(sentence: str) -> str:
    """The sentence said about the user rather than by them, as one capitalised fact."""
    s = _LEADIN.sub("", sentence)
    for pattern, repl in _PERSON:
        s = pattern.sub(repl, s)
    s = _third_person_my(s)
    s = s.rstrip(".!") + "."
    return s[0].upper() + s[1:]


class RuleSummarizer:
    """Rule-based summarizer for ``consolidate()``: no model, for the workbench and demos only.

    Keeps the user turns that state something lasting (a preference, a name, where they
    live or work, an allergy), drops questions, chit-chat and anything marked temporary
    ("tonight", "for now"), and rewrites the rest in the third person so each fact stands
    on its own: "my sister is called Ana" becomes "The user's sister is called Ana."
    """

    name = "rule_summarizer"

    def __call__(self, turns: list[dict[str, Any]]) -> list[str]:
        facts: list[str] = []
        for turn in turns:
            if turn.get("role", "user") != "user":
                continue
            for sentence in re.split(r"(?<=[.!])\s+", turn["text"].strip()):
                s = sentence.strip()
                if not _lasting(s):
                    continue
                fact = _third_person(s)
                if fact not in facts:
                    facts.append(fact)
        return facts


# ---------------------------------------------------------------------------- by name

JUDGES: dict[str, Callable[[str, list[str]], list[bool]]] = {"rule_key_value": RuleKeyValueJudge()}
SUMMARIZERS: dict[str, Callable[[list[dict[str, Any]]], list[str]]] = {"rule_summarizer": RuleSummarizer()}


def get_judge(name: str | None) -> Callable[[str, list[str]], list[bool]] | None:
    """The rule-based judge registered under ``name`` (None: no judge)."""
    if name is None:
        return None
    try:
        return JUDGES[name]
    except KeyError:
        raise ValueError(f"unknown judge {name!r}; known: {', '.join(JUDGES)}") from None


def get_summarizer(name: str | None) -> Callable[[list[dict[str, Any]]], list[str]]:
    """The rule-based summarizer registered under ``name`` (None: the default one)."""
    if name is None:
        return SUMMARIZERS["rule_summarizer"]
    try:
        return SUMMARIZERS[name]
    except KeyError:
        raise ValueError(f"unknown summarizer {name!r}; known: {', '.join(SUMMARIZERS)}") from None
