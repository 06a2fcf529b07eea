"""Contradiction judge and summarizer over any chat-completions endpoint (the ``llm`` extra).

vxmem bundles no model: the judge and the summarizer are callables the caller brings. These two
adapters are such callables for an endpoint the caller names: OpenAI, a local vLLM or llama.cpp
server, Ollama, anything that speaks the chat-completions protocol. They use the ``openai`` SDK
with ``base_url``, ask for JSON that matches a schema, check the answer against that schema,
give each request a timeout and retry a bounded number of times.

A failure never changes the memory. By default (``on_error="raise"``) it raises
:class:`LLMError`, naming the endpoint and every attempt: ``remember()`` then stores nothing,
and ``consolidate()`` stops with the report of what was done so far on the error's
``.report`` (the failed batch's turns untouched). With ``on_error="keep"`` the judge says no
fact is contradicted (the new fact is stored, nothing is superseded) and the summarizer finds
no fact (``ConsolidationReport.turns_kept`` lists the turns, nothing is stored or deleted); each
failure is appended to the adapter's ``failures`` and logged as a warning, never silent.

    pip install "vxmem[llm]"
    from vxmem import Vectrix
    from vxmem.llm import OpenAICompatibleJudge, OpenAICompatibleSummarizer
    db = Vectrix("chat.vxdb", judge=OpenAICompatibleJudge("qwen2.5:7b", base_url="http://localhost:11434/v1"))
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .core.checks import check_choice, check_int, check_positive, check_weight
from .core.errors import VectrixError

__all__ = ["Completion", "LLMError", "LLMFailure", "OpenAICompatibleChat", "OpenAICompatibleJudge",
           "OpenAICompatibleSummarizer", "ON_ERROR", "RESPONSE_FORMATS"]

log = logging.getLogger(__name__)

ON_ERROR = ("raise", "keep")
# json_schema: the server constrains the answer to the schema (OpenAI, vLLM, llama.cpp, Ollama);
# json_object: JSON of any shape (older servers); None: the prompt alone asks for JSON.
RESPONSE_FORMATS = ("json_schema", "json_object", None)
INSTALL_HINT = 'the LLM adapters need the llm extra: pip install "vxmem[llm]"'


class LLMError(VectrixError):
    """The endpoint failed or answered outside the schema on every attempt; nothing was changed.

    ``attempts`` holds one line per attempt, oldest first."""

    def __init__(self, message: str, attempts: Sequence[str] = ()):
        super().__init__(message)
        self.attempts = list(attempts)


@dataclass
class LLMFailure:
    """One call that failed under ``on_error="keep"``: what was asked and why every attempt failed."""

    task: str
    message: str
    attempts: list[str] = field(default_factory=list)


class _ChatJSON:
    """One chat-completions endpoint asked for JSON that matches a schema, with a timeout and
    bounded retries. The judge and the summarizer are this plus a prompt and a schema."""

    task = "chat"

    def __init__(self, model: str, *, base_url: str, api_key: str | None = None, timeout: float = 30.0,
                 retries: int = 2, backoff: float = 0.5, temperature: float = 0.0,
                 response_format: str | None = "json_schema", on_error: str = "raise", client: Any = None):
        if not isinstance(model, str) or not model.strip():
            raise TypeError("model must be the endpoint's model name, a non-empty str")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be the endpoint's http(s) URL, e.g. http://localhost:8000/v1; "
                             f"got {base_url!r}")
        self.model = model
        self.base_url = base_url
        self.timeout = check_positive(timeout, "timeout")
        self.retries = check_int(retries, "retries", minimum=0, below=11)
        self.backoff = check_weight(backoff, "backoff")
        self.temperature = check_weight(temperature, "temperature")
        if response_format is not None:
            check_choice(response_format, "response_format", RESPONSE_FORMATS[:2])
        self.response_format = response_format
        self.on_error = check_choice(on_error, "on_error", ON_ERROR)
        self.failures: list[LLMFailure] = []
        self.client = client if client is not None else _client(base_url, api_key, self.timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def ask(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> dict[str, Any] | None:
        """The endpoint's answer to ``messages``, parsed and checked against ``schema``; None
        when every attempt failed and ``on_error="keep"`` (the failure is recorded)."""
        return self._retried(lambda: check_answer(self._complete(messages, schema), schema))

    def _retried(self, call: Callable[[], Any]) -> Any:
        """``call()``, retried on any failure; after the last, raise or record (``on_error``)."""
        attempts: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt and self.backoff:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return call()
            except Exception as exc:  # the SDK's errors, a timeout, a malformed answer: retried alike
                attempts.append(f"attempt {attempt + 1}: {_describe(exc)}")
        message = (f"{self.task} via {self.model!r} at {self.base_url} failed {len(attempts)} time(s); "
                   f"nothing was changed. Last: {attempts[-1].split(': ', 1)[1]}")
        if self.on_error == "raise":
            raise LLMError(message, attempts)
        self.failures.append(LLMFailure(self.task, message, attempts))
        log.warning("%s", message)
        return None

    def _complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> str:
        return _content(self._response(messages, schema))

    def _response(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> Any:
        """The SDK's response to ``messages``; JSON that matches ``schema`` is asked for unless it is None."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                  "timeout": self.timeout}
        if schema is not None and self.response_format == "json_schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": self.task, "schema": schema, "strict": True}}
        elif schema is not None and self.response_format == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return self.client.chat.completions.create(**kwargs)


def _content(response: Any) -> str:
    """The text of a chat-completions response's first choice; ``ValueError`` if it has none."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise ValueError("the response has no choices")
    content = choices[0].message.content
    if not isinstance(content, str):
        raise ValueError("the response's message has no text content")
    return content


def _client(base_url: str, api_key: str | None, timeout: float) -> Any:
    """An ``openai.OpenAI`` client for ``base_url`` that never retries on its own (the adapter does)."""
    try:
        import openai
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    # A local server needs no key, but the SDK insists on one: any placeholder does.
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or "not-needed"
    return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)


def _describe(exc: BaseException) -> str:
    """One line for an attempt's failure: the error's class and its first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def check_answer(content: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``content`` parsed as JSON and checked against ``schema``; ``ValueError`` says what is wrong.

    Servers that cannot constrain their output sometimes wrap the JSON in a Markdown fence
    (```` ```json ````, in any case, or none): that fence is taken off, nothing else is forgiven;
    text that is not valid Unicode (a ``\ud800`` escape alone) is refused like malformed JSON."""
    text = content.strip()
    fenced = re.fullmatch(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?[ \t]*```", text, flags=re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    try:
        answer = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not JSON ({exc.msg} at position {exc.pos}): {content[:80]!r}") from None
    try:
        json.dumps(answer, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the answer holds text that is not valid Unicode (a lone surrogate)") from None
    try:
        import jsonschema
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    try:
        jsonschema.validate(answer, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the answer"
        raise ValueError(f"the answer does not match the schema at {where}: {exc.message}") from None
    return dict(answer)


# ---------------------------------------------------------------------------- the judge

JUDGE_SYSTEM = (
    "You maintain a user's long-term memory. Given a new statement and numbered facts stored earlier, decide for "
    "each stored fact whether the new statement contradicts it: both cannot be true now about the same subject, "
    "so the new statement replaces it (\"lives in Lisbon\" is contradicted by \"has moved to Porto\"). A fact "
    "that is merely related, more general or about something else is not contradicted. Answer with JSON only: "
    "{\"contradicted\": [one true or false per stored fact, in order]}.")


def judge_schema(n: int) -> dict[str, Any]:
    """The judge's answer for ``n`` candidates: exactly ``n`` booleans, in order."""
    return {"type": "object", "additionalProperties": False, "required": ["contradicted"],
            "properties": {"contradicted": {"type": "array", "items": {"type": "boolean"},
                                            "minItems": n, "maxItems": n}}}


class OpenAICompatibleJudge(_ChatJSON):
    """Contradiction judge for ``ConversationMemory(judge=...)`` over a chat-completions endpoint.

    Called as ``judge(new_text, [nearest stored fact texts])``, it returns one bool per stored
    fact, True where the new one contradicts it. ``model`` and ``base_url`` name the endpoint
    (``http://localhost:8000/v1`` for vLLM, ``http://localhost:11434/v1`` for Ollama);
    ``api_key`` defaults to ``$OPENAI_API_KEY`` (a local server needs none). Each request waits
    ``timeout`` seconds and is retried ``retries`` times (after ``backoff`` seconds, doubling).
    ``response_format``: ``"json_schema"`` (default), ``"json_object"`` or None for servers
    that support less. ``on_error``: ``"raise"`` an :class:`LLMError` (``remember()`` then
    stores nothing) or ``"keep"`` (no fact is contradicted; the failure goes to ``failures``).
    ``client``: an ``openai.OpenAI`` of your own, to share a connection pool.
    """

    task = "contradiction_judge"

    def __call__(self, new_text: str, old_texts: list[str]) -> list[bool]:
        if not old_texts:
            return []
        facts = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(old_texts))
        messages = [{"role": "system", "content": JUDGE_SYSTEM},
                    {"role": "user", "content": f"New statement: {new_text}\n\nStored facts:\n{facts}\n\n"
                                                f"Answer with exactly {len(old_texts)} booleans."}]
        answer = self.ask(messages, judge_schema(len(old_texts)))
        return [False] * len(old_texts) if answer is None else [bool(v) for v in answer["contradicted"]]


# ---------------------------------------------------------------------------- the summarizer

SUMMARIZER_SYSTEM = (
    "You maintain a user's long-term memory. Given turns of a conversation, oldest first, write the lasting facts "
    "worth keeping (preferences, names, where the user lives or works, plans, allergies), each one complete on its "
    "own and in the third person (\"The user prefers PDF reports\", not \"they said PDF\"). Leave out questions, "
    "small talk and anything temporary. No fact is a fine answer. Answer with JSON only: "
    "{\"facts\": [\"...\", ...]}.")

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["facts"],
    "properties": {"facts": {"type": "array", "items": {"type": "string", "minLength": 1}}}}


class OpenAICompatibleSummarizer(_ChatJSON):
    """Summarizer for ``consolidate(summarize=...)`` over a chat-completions endpoint.

    Called with one batch of turns (``{"role", "text", "ts"}`` dicts, oldest first), it returns
    the facts worth keeping as standalone sentences. The endpoint's settings are those of
    :class:`OpenAICompatibleJudge`. A failure raises :class:`LLMError` (``consolidate()`` stops;
    the batch's turns stay as they were) or, with ``on_error="keep"``, finds no fact, so the
    batch's turns stay and are listed in ``ConsolidationReport.turns_kept``.
    """

    task = "summarizer"

    def __call__(self, turns: list[dict[str, Any]]) -> list[str]:
        lines = []
        for t in turns:
            ts = t.get("ts")
            when = ts.isoformat(timespec="minutes") if isinstance(ts, datetime) else str(ts or "")
            lines.append(f"[{when}] {t.get('role', 'user')}: {t['text']}")
        messages = [{"role": "system", "content": SUMMARIZER_SYSTEM},
                    {"role": "user", "content": "Turns:\n" + "\n".join(lines)}]
        answer = self.ask(messages, SUMMARY_SCHEMA)
        return [] if answer is None else [str(f) for f in answer["facts"]]


# ---------------------------------------------------------------------------- plain answers


@dataclass(frozen=True)
class Completion:
    """One answer of the endpoint: its text, the tokens the endpoint says it read and wrote (None
    where it does not say) and the seconds the request took."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float


def _tokens(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None) if usage is not None else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


class OpenAICompatibleChat(_ChatJSON):
    """Any chat-completions endpoint asked one thing at a time, for the workbench's answer-level
    evaluation: :meth:`complete` returns the :class:`Completion` (text, token usage, seconds).

    The endpoint's settings are those of :class:`OpenAICompatibleJudge`; ``task`` names the job
    in error messages ("answer", "grading").
    """

    def __init__(self, model: str, *, base_url: str, task: str = "answer", **settings: Any):
        super().__init__(model, base_url=base_url, **settings)
        self.task = task

    def complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> Completion | None:
        """The endpoint's answer to ``messages``; with ``schema``, JSON that matches it is asked for
        and checked. None when every attempt failed and ``on_error="keep"``."""

        def call() -> Completion:
            t0 = time.perf_counter()
            response = self._response(messages, schema)
            text = _content(response)
            if schema is not None:
                check_answer(text, schema)
            usage = getattr(response, "usage", None)
            return Completion(text, _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens"),
                              time.perf_counter() - t0)

        answer: Completion | None = self._retried(call)
        return answer
