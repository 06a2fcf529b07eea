"""Asking the model for an answer and the judge for a grade, each through the on-disk cache.

The answer model sees the pinned answer prompt filled with the question and the recalled
memories, nothing else; the judge sees the pinned judge prompt with the question, the gold
answer and the model's answer, and replies ``{"correct": true|false}`` (checked against
:data:`GRADE_SCHEMA`). A reply already in the cache is read back with the tokens and seconds
it cost the first time, so a rerun reports the same figures and makes no request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...llm import LLMError, OpenAICompatibleChat, check_answer
from .cache import AnswerCache, content_key
from .prompt import PinnedPrompt, Recalled, answer_messages, judge_messages

GRADE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["correct"],
    "properties": {"correct": {"type": "boolean"}}}


def cached_completion(chat: OpenAICompatibleChat, cache: AnswerCache, messages: list[dict[str, str]],
                      schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The endpoint's reply to ``messages`` (text, prompt and completion tokens, seconds) and
    ``cached``: whether it came from ``cache``. A new reply is stored before it is returned."""
    key = content_key(model=chat.model, messages=messages, schema=schema, temperature=chat.temperature)
    entry = cache.get(key)
    if entry is not None:
        return {**entry, "cached": True}
    reply = chat.complete(messages, schema)
    if reply is None:  # on_error="keep": the failure is on chat.failures; nothing is cached
        raise LLMError(chat.failures[-1].message if chat.failures else f"{chat.task} failed")
    entry = {"model": chat.model, "text": reply.text, "prompt_tokens": reply.prompt_tokens,
             "completion_tokens": reply.completion_tokens, "seconds": reply.seconds}
    cache.put(key, entry)
    return {**entry, "cached": False}


def answer(chat: OpenAICompatibleChat, cache: AnswerCache, prompt: PinnedPrompt, question: str,
           memories: Sequence[Recalled], asked_at: float | None) -> dict[str, Any]:
    """The model's answer to ``question`` from ``memories`` alone."""
    return cached_completion(chat, cache, answer_messages(prompt, question, memories, asked_at))


def grade(chat: OpenAICompatibleChat, cache: AnswerCache, prompt: PinnedPrompt, question: str, gold: str,
          candidate: str) -> dict[str, Any]:
    """The judge's verdict on ``candidate`` against ``gold``: the reply with ``correct`` (bool)."""
    reply = cached_completion(chat, cache, judge_messages(prompt, question, gold, candidate), GRADE_SCHEMA)
    verdict = check_answer(reply["text"], GRADE_SCHEMA)
    return {**reply, "correct": bool(verdict["correct"])}
