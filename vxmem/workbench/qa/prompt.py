"""The pinned prompts of answer-level evaluation: read from the text files shipped beside this
module, filled with a question and the memories recalled for it, and identified by their sha256.

``prompts/answer.txt`` asks the model to answer from the recalled memories only;
``prompts/judge.txt`` asks the judge whether an answer states the gold answer's fact. Each is a
:class:`string.Template` (``$question``, ``$memories``, ``$today``; ``$gold``, ``$answer``), so
a memory's own braces or dollar signs are never read as placeholders. Every report carries each
prompt's text and hash: a score means nothing without the prompt that graded it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).with_name("prompts")
PROMPT_NAMES = ("answer", "judge")
# The placeholders each prompt may hold, and those it must (a prompt without them cannot do its job).
PLACEHOLDERS = {"answer": ("memories", "question", "today"), "judge": ("question", "gold", "answer")}
REQUIRED = {"answer": ("memories", "question"), "judge": ("gold", "answer")}
NO_MEMORIES = "(no memory was recalled)"


@dataclass(frozen=True)
class PinnedPrompt:
    """A prompt template by name, with its exact text; ``sha256`` identifies it in reports."""

    name: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def fill(self, **values: str) -> str:
        """The template with every placeholder replaced; ``KeyError`` names one left unfilled."""
        return Template(self.text).substitute(**values)

    def describe(self) -> dict[str, str]:
        """What a report records of the prompt: its name, hash and text."""
        return {"name": self.name, "sha256": self.sha256, "text": self.text}


@dataclass(frozen=True)
class Recalled:
    """One recalled memory as the answer prompt shows it: what was said and when (epoch seconds)."""

    text: str
    time: float | None = None


def pinned(name: str, path: str | Path | None = None) -> PinnedPrompt:
    """The prompt ``name`` ("answer" or "judge") shipped with vxmem, or the file at ``path`` instead
    (a prompt of one's own: its hash in the report says it is not the shipped one). A prompt whose
    placeholders are not its job's is refused now, before any work."""
    if name not in PROMPT_NAMES:
        raise ValueError(f"name must be one of {', '.join(PROMPT_NAMES)}, got {name!r}")
    path = PROMPTS_DIR / f"{name}.txt" if path is None else path
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the {name} prompt {str(path)!r}: {exc}") from None
    return prompt_of(name, text, repr(str(path)))


def prompt_of(name: str, text: str, where: str = "of your own") -> PinnedPrompt:
    """The prompt ``name`` ("answer" or "judge") with the text ``text`` (written in a dashboard, say),
    refused with a ``ValueError`` when its placeholders are not its job's; ``where`` names it there."""
    if name not in PROMPT_NAMES:
        raise ValueError(f"name must be one of {', '.join(PROMPT_NAMES)}, got {name!r}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"the {name} prompt {where} is empty")
    template = Template(text)
    if not template.is_valid():
        raise ValueError(f"the {name} prompt {where} has a stray $ (write $$ for a dollar sign)")
    found = set(template.get_identifiers())
    unknown = sorted(found - set(PLACEHOLDERS[name]))
    missing = [p for p in REQUIRED[name] if p not in found]
    if unknown or missing:
        what = f"no placeholder ${unknown[0]}" if unknown else f"no ${missing[0]} in it"
        raise ValueError(f"the {name} prompt {where}: {what}; it takes "
                         + ", ".join(f"${p}" for p in PLACEHOLDERS[name]))
    return PinnedPrompt(name, text)


def day(t: float | None) -> str:
    """``t`` (epoch seconds) as the date a prompt shows, ``2023-05-08 13:56`` (UTC); "unknown" for None."""
    if t is None:
        return "unknown"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def memory_block(memories: Sequence[Recalled]) -> str:
    """The memories as numbered lines, each with its date, best first."""
    if not memories:
        return NO_MEMORIES
    return "\n".join(f"{i + 1}. [{day(m.time)}] {' '.join(m.text.split())}" for i, m in enumerate(memories))


def answer_messages(prompt: PinnedPrompt, question: str, memories: Sequence[Recalled],
                    asked_at: float | None) -> list[dict[str, str]]:
    """The chat messages that ask ``question`` from ``memories`` alone, as ``prompt`` words it."""
    text = prompt.fill(memories=memory_block(memories), question=question.strip(), today=day(asked_at))
    return [{"role": "user", "content": text}]


def judge_messages(prompt: PinnedPrompt, question: str, gold: str, answer: str) -> list[dict[str, str]]:
    """The chat messages that ask the judge whether ``answer`` states ``gold``."""
    text = prompt.fill(question=question.strip(), gold=gold.strip(), answer=" ".join(answer.split()))
    return [{"role": "user", "content": text}]
