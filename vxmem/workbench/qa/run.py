"""One answer-level evaluation: recall with each system, answer from the recalled memories, grade.

Every probe with a gold answer (``meta["answer"]``: LoCoMo's and LongMemEval's questions, or a
probe of one's own) is asked of each system through the neutral harness
(:func:`vxmem.workbench.systems.compare.compare`), which also scores its retrieval (recall@k and
the rest) and times each recall. The memories each system returned, as their texts and dates,
are all the model sees; the judge grades its answer against the gold one. LoCoMo's adversarial
questions (no answer in the conversation) are left out. Replies come through the on-disk cache
(:mod:`.cache`): a rerun asks the endpoint nothing. An endpoint that fails raises
:class:`~vxmem.llm.LLMError` before anything is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...llm import OpenAICompatibleChat
from ..datasets.model import Conversation, Event
from ..systems.compare import compare
from .cache import AnswerCache
from .grading import answer, grade
from .prompt import PinnedPrompt, Recalled, pinned
from .report import build_report, summarize

Progress = Callable[[int, int, str], None]


@dataclass
class QASetup:
    """What an evaluation asks: the systems (names as ``vxmem compare`` takes them), memories per
    question ``k``, the answer model, the judge, the cache and the two pinned prompts; ``workers``
    questions are asked at once (the endpoint's replies are independent; the report keeps the
    questions' order)."""

    answerer: OpenAICompatibleChat
    judge: OpenAICompatibleChat
    systems: Sequence[str] = ("vxmem",)
    k: int = 10
    cache: AnswerCache = field(default_factory=lambda: AnswerCache(None))
    answer_prompt: PinnedPrompt = field(default_factory=lambda: pinned("answer"))
    judge_prompt: PinnedPrompt = field(default_factory=lambda: pinned("judge"))
    workers: int = 1


@dataclass
class QAResult:
    """``per_question``: one row per system and question; ``summary``: accuracy with its bootstrap
    interval per system and category (and "all"), beside recall@k, tokens and latency;
    ``report``: everything, with the settings and the prompts' texts and hashes, as JSON-ready data."""

    per_question: pd.DataFrame
    summary: pd.DataFrame
    report: dict[str, Any]


def gold_answer(probe: Event) -> str | None:
    """The probe's gold answer as text, or None when it has none to grade against (or is adversarial)."""
    meta = probe.meta or {}
    gold = meta.get("answer")
    if gold is None or meta.get("adversarial") or not str(gold).strip():
        return None
    return str(gold)


def answerable(convs: Sequence[Conversation]) -> int:
    """How many probes of ``convs`` have a gold answer."""
    return sum(1 for c in convs for ev in c.events if ev.type == "probe" and gold_answer(ev) is not None)


def said(conv: Conversation) -> dict[str, Recalled]:
    """Every memory of ``conv`` a system may return, by label: turns and facts, and corrections
    (under their feedback's label)."""
    out: dict[str, Recalled] = {}
    for ev in conv.events:
        if ev.type in ("turn", "fact") and ev.text is not None:
            out[str(ev.label)] = Recalled(str(ev.text), ev.time)
        elif ev.type == "feedback" and ev.correction is not None:
            out[str(ev.label)] = Recalled(str(ev.correction), ev.time)
    return out


def recalled(ranked: Sequence[str], memories: dict[str, Recalled]) -> list[Recalled]:
    """The memories behind a probe's ranked items (each ``"a"`` or ``"a,b"`` for a memory made
    from several turns), in rank order; a memory made from several is their texts joined."""
    out = []
    for item in ranked:
        parts = [memories[lab] for lab in str(item).split(",") if lab in memories]
        if parts:
            out.append(Recalled(" / ".join(p.text for p in parts), max(p.time or 0.0 for p in parts)))
    return out


def _questions(convs: Sequence[Conversation], per_probe: pd.DataFrame) -> list[dict[str, Any]]:
    """The harness's rows of the probes with a gold answer, each with what the model will see."""
    probes = {(c.name, str(ev.label)): ev for c in convs for ev in c.events if ev.type == "probe"}
    texts = {c.name: said(c) for c in convs}
    out = []
    for row in per_probe.to_dict("records"):
        ev = probes.get((row["conversation"], str(row["probe"])))
        gold = None if ev is None else gold_answer(ev)
        if ev is None or gold is None:
            continue
        out.append({**row, "gold": gold, "asked_at": ev.time,
                    "memories": recalled(row.get("ranked") or [], texts[row["conversation"]])})
    return out


def _ask(setup: QASetup, q: dict[str, Any]) -> dict[str, Any]:
    """One question answered and graded: the row the report reads."""
    said_ = answer(setup.answerer, setup.cache, setup.answer_prompt, q["query"], q["memories"], q["asked_at"])
    verdict = grade(setup.judge, setup.cache, setup.judge_prompt, q["query"], q["gold"], said_["text"])
    return {"system": q["system"], "conversation": q["conversation"], "probe": q["probe"],
            "category": q.get("category") or "(none)", "question": q["query"], "gold": q["gold"],
            "answer": said_["text"], "correct": float(verdict["correct"]), "memories": len(q["memories"]),
            "ranked": list(q.get("ranked") or []),
            "recall": q.get("recall"), "hit": q.get("hit"), "recall_ms": q.get("ms"),
            "answer_prompt_tokens": said_["prompt_tokens"], "answer_completion_tokens": said_["completion_tokens"],
            "answer_seconds": said_["seconds"], "judge_prompt_tokens": verdict["prompt_tokens"],
            "judge_completion_tokens": verdict["completion_tokens"], "judge_seconds": verdict["seconds"],
            "answer_cached": said_["cached"], "grade_cached": verdict["cached"]}


def _ask_all(setup: QASetup, questions: list[dict[str, Any]], progress: Progress | None) -> list[dict[str, Any]]:
    """Every question answered and graded, in order, ``setup.workers`` at a time; the first
    failure cancels what has not started (the questions already asked finish) and is raised."""
    rows: list[dict[str, Any]] = [{} for _ in questions]
    if setup.workers <= 1:  # one at a time, in order: a failure stops before the next question is asked
        for i, q in enumerate(questions):
            rows[i] = _ask(setup, q)
            if progress is not None:
                progress(i + 1, len(questions), "answering and grading")
        return rows
    pool = ThreadPoolExecutor(max_workers=setup.workers, thread_name_prefix="vxmem-qa")
    try:
        index: dict[Future[dict[str, Any]], int] = {pool.submit(_ask, setup, q): i for i, q in enumerate(questions)}
        for done, fut in enumerate(as_completed(index), 1):
            rows[index[fut]] = fut.result()
            if progress is not None:
                progress(done, len(questions), "answering and grading")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return rows


def run_qa(convs: Sequence[Conversation], setup: QASetup, *, progress: Progress | None = None,
           dataset: dict[str, Any] | None = None) -> QAResult:
    """Recall, answer and grade every answerable probe of ``convs`` with each of ``setup.systems``.

    ``progress(done, total, desc)`` hears each conversation replayed, then each question graded;
    ``dataset`` (its name, path, sha256...) goes into the report as given."""
    if not convs:
        raise ValueError("convs must hold at least one conversation")
    if not answerable(convs):
        raise ValueError("no probe has a gold answer (meta.answer) to grade: LoCoMo and LongMemEval files "
                         "have them; a probe of one's own needs one in its meta")
    res = compare(list(convs), list(setup.systems), k=setup.k, progress=progress)
    rows = _ask_all(setup, _questions(convs, res.per_probe), progress)
    per_question = pd.DataFrame(rows)
    summary = summarize(per_question)
    report = build_report(per_question, summary, setup, res.table, dataset=dataset)
    return QAResult(per_question=per_question, summary=summary, report=report)
