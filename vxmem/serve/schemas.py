"""The servers' request and response models (pydantic), made from the library's own names.

Defaults come from the library (recall's options declared once in
:class:`~vxmem.memory.request.RecallOptions`, with their meanings as descriptions;
``remember()``'s defaults, ``context()``'s signature), choices from its constants (kinds,
outcomes, search modes) and
the blend's bounds from :data:`~vxmem.ranking.blend.BLEND_BOUNDS`, so a schema says what the
library accepts. The library checks every value again; these models add what a server must
also refuse: sizes above the caps (``limit``, ``token_budget``, batches), unknown fields, and
``true`` or ``false`` for a number or a time (:func:`no_bool`; pydantic's lax mode reads
``true`` as 1), and anything but ``true`` or ``false`` for a flag (``StrictBool``: lax mode
reads ``"yes"``, ``"off"`` or 1 as one).
The REST API takes them whole; each MCP tool's few arguments
(:mod:`vxmem.serve.tools`) become one of them, so both check values alike.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, create_model
from pydantic_core import PydanticCustomError

from ..core.options import docs_of
from ..core.sentinels import MEMORY_SETTING
from ..memory.conversation import ConversationMemory
from ..memory.draft import REMEMBER_DEFAULTS
from ..memory.request import RecallOptions as Declared
from ..ranking.blend import BLEND_BOUNDS, BLEND_FIELDS
from .scope import USER_PATTERN

# The caps: a request above one is refused (422) before anything runs.
MAX_LIMIT = 100  # results of one recall or context
MAX_TOKEN_BUDGET = 100_000
MAX_RECENT_TURNS = 200
MAX_TURNS = 1000  # turns of one /turns call
MAX_BATCH = 1000  # memories of one remember_many, ids of one forget or exclude_ids

Kind = Literal["turn", "fact", "pinned"]
Outcome = Literal["useful", "dead_end", "corrected"]
Mode = Literal["dense", "lexical", "hybrid"]
RecencyFrom = Literal["created", "accessed"]
Preset = Literal["fast", "default", "accurate"]

_RECALL: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(Declared)}
_RECALL_DOCS = docs_of(Declared)
M = TypeVar("M", bound=BaseModel)
_CONTEXT: dict[str, Any] = {n: p.default for n, p in inspect.signature(ConversationMemory.context).parameters.items()}


def no_bool(what: str) -> BeforeValidator:
    """A check that refuses ``true`` and ``false`` where ``what`` is wanted: pydantic's lax mode
    would read ``true`` as 1 (a time of 1970, a limit of one)."""

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError("bool_not_number", "Input should be {what}, not true or false", {"what": what})
        return value

    return BeforeValidator(check)


# Every number or time of a request is one of these, never a boolean. The check wraps the whole
# type, None included, so that a field's bounds stay in its JSON schema.
Number = Annotated[float | None, no_bool("a number")]
Count = Annotated[int, no_bool("an integer")]
MaybeCount = Annotated[int | None, no_bool("an integer")]
Time = Annotated[float | str | None, no_bool("epoch seconds or an ISO-8601 time"),
                 Field(description="epoch seconds or an ISO-8601 time (default: now)")]
Age = Annotated[float | str | None, no_bool("days or an ISO-8601 time"), Field(description="days, or an ISO-8601 time")]
User = Annotated[str | None, Field(pattern=USER_PATTERN, description="whose memories (default: the server's user)")]
# A name of only spaces is refused, as `vxmem serve --session` refuses it: never what was meant.
Session = Annotated[str | None, Field(min_length=1, max_length=256, pattern=r"\S", description="the conversation")]
Id = Annotated[str, Field(min_length=1, max_length=256, pattern=r"\S", description="a memory's id")]
Text = Annotated[str, Field(min_length=1, description="what was said, or the fact")]
Filter = Annotated[dict[str, Any] | None, Field(description="only memories whose own metadata match it")]


class Strict(BaseModel):
    """A request body: unknown fields are refused, not ignored."""

    model_config = ConfigDict(extra="forbid")


def _bounded(name: str) -> Any:
    """The field of blend parameter ``name``: optional, within the blend's own bounds."""
    low, low_open, high, high_open = BLEND_BOUNDS[name]
    return Field(None, description=f"this request's {name} (default: the server's)",
                 gt=low if low_open else None, ge=None if low_open else low,
                 lt=high if high_open and not math.isinf(high) else None,
                 le=high if not high_open and not math.isinf(high) else None)


def declared(name: str, **server: Any) -> Any:
    """The field of recall's option ``name``: its declared default and meaning, with what a
    server adds (caps, its own description). ``MEMORY_SETTING`` is null here: JSON has no such
    value, and null (or leaving the field out) means the server's setting."""
    default = _RECALL[name]
    server.setdefault("description", _RECALL_DOCS[name])
    if default is MEMORY_SETTING:
        default = None
        own = re.sub(r"\s*\([^()]*MEMORY_SETTING[^()]*\)", "", server["description"]).rstrip(".")
        server["description"] = f"{own} (null: the server's setting)"
    return Field(list(default) if isinstance(default, tuple) else default, **server)


def with_every_option(*besides: str) -> Callable[[type[M]], type[M]]:
    """A class decorator: the model with a field for every option of
    :class:`~vxmem.memory.request.RecallOptions` it does not spell itself, nor leaves to its
    subclasses (``besides``), of the option's declared type and default; so an option added
    there reaches the REST schemas. The model itself when it spells them all."""

    def complete(model: type[M]) -> type[M]:
        hints = typing.get_type_hints(Declared)
        missing: dict[str, Any] = {n: (hints[n], declared(n)) for n in _RECALL
                                   if n not in model.model_fields and n not in besides}
        return create_model(model.__name__, __base__=model, __module__=__name__, **missing) if missing else model

    return complete


@with_every_option("limit", "token_budget")  # each body has its own, capped
class RecallOptions(Strict):
    """What a recall (and a context block's recalled section) may set besides its size, and its
    blend: a blend parameter left out is the server's. The options are recall()'s; those spelled
    here carry a server's limits."""

    query: Annotated[str, Field(min_length=1, description="the text to match")]
    session: Session = None
    user: User = None
    kinds: list[Kind] = declared("kinds", min_length=1)
    include_superseded: StrictBool = declared("include_superseded")
    exclude_ids: list[Id] = declared("exclude_ids", max_length=MAX_BATCH)
    score_gap: Number = declared("score_gap", ge=0)
    mode: Mode | None = declared("mode")
    rerank: StrictBool | None = declared("rerank")
    min_relevance: Number = declared("min_relevance", description="leave out candidates whose raw relevance "
                                     "(the reranker's logit when reranked, else the cosine, or BM25 in lexical "
                                     "mode) is below this")
    recency_from: RecencyFrom | None = declared("recency_from")
    preset: Preset | None = declared("preset", description="the second stage: fast (none), default "
                                                           "(late interaction) or accurate (late interaction, "
                                                           "then a cross-encoder)")
    filter: Filter = None
    now: Time = None
    half_life_days: Number = _bounded("half_life_days")
    recency_weight: Number = _bounded("recency_weight")
    feedback_weight: Number = _bounded("feedback_weight")
    feedback_half_life_days: Number = _bounded("feedback_half_life_days")
    hybrid_weight: Number = _bounded("hybrid_weight")

    def blend_given(self) -> dict[str, float]:
        """The blend parameters this request sets."""
        return {k: getattr(self, k) for k in BLEND_FIELDS if getattr(self, k) is not None}


class RecallBody(RecallOptions):
    limit: Count = declared("limit", ge=1, le=MAX_LIMIT)
    token_budget: MaybeCount = declared("token_budget", ge=1, le=MAX_TOKEN_BUDGET)


class ContextBody(RecallOptions):
    token_budget: Count = Field(_CONTEXT["token_budget"], ge=1, le=MAX_TOKEN_BUDGET)
    recent_turns: Count = Field(_CONTEXT["recent_turns"], ge=0, le=MAX_RECENT_TURNS)
    limit: Count = Field(_CONTEXT["limit"], ge=1, le=MAX_LIMIT)


class MemoryItem(Strict):
    """One memory to store (``remember()``'s arguments)."""

    text: Text
    session: Session = REMEMBER_DEFAULTS["session"]
    role: Annotated[str, Field(min_length=1, max_length=64)] = REMEMBER_DEFAULTS["role"]
    turn: MaybeCount = Field(REMEMBER_DEFAULTS["turn"], ge=0)
    timestamp: Time = REMEMBER_DEFAULTS["timestamp"]
    pinned: StrictBool = REMEMBER_DEFAULTS["pinned"]
    kind: Kind | None = REMEMBER_DEFAULTS["kind"]
    metadata: dict[str, Any] | None = REMEMBER_DEFAULTS["metadata"]
    id: Id | None = REMEMBER_DEFAULTS["id"]
    ttl_days: Number = Field(REMEMBER_DEFAULTS["ttl_days"], gt=0)


class RememberBody(MemoryItem):
    user: User = None


class RememberManyBody(Strict):
    memories: list[Text | MemoryItem] = Field(min_length=1, max_length=MAX_BATCH)
    session: Session = None
    role: Annotated[str, Field(min_length=1, max_length=64)] = REMEMBER_DEFAULTS["role"]
    timestamp: Time = None
    user: User = None


class FeedbackBody(Strict):
    id: Id
    outcome: Outcome
    correction: Annotated[str | None, Field(min_length=1, description="the corrected fact")] = None
    timestamp: Time = None
    user: User = None


class ForgetBody(Strict):
    session: Session = None
    kinds: list[Kind] | None = Field(None, min_length=1, description="default: turns (every kind with ids)")
    older_than: Age = None
    ids: list[Id] | None = Field(None, max_length=MAX_BATCH)
    superseded: StrictBool = False
    filter: Filter = None
    now: Time = None
    user: User = None
    all: StrictBool = Field(False, description="true lets a forget name no scope (no session, ids, older_than, "
                                               "superseded or filter): every session's memories of the kinds go")

    def scoped(self) -> bool:
        """Whether the request narrows what goes to less than every session of the user."""
        return any((self.session is not None, self.ids is not None, self.older_than is not None, self.superseded,
                    self.filter is not None))


class HistoryBody(Strict):
    id: Id
    now: Time = None
    user: User = None


class TurnsBody(Strict):
    session: Session = None
    limit: Count = Field(MAX_LIMIT, ge=1, le=MAX_TURNS, description="the last this many turns")
    now: Time = None
    user: User = None


class ExpireBody(Strict):
    now: Time = None
    user: User = None


# ---------------------------------------------------------------------------- responses


class MemoryOut(BaseModel):
    """One memory as a response shows it: its own metadata without the reserved keys."""

    id: str
    text: str
    kind: str | None = None
    session: str | None = None
    role: str | None = None
    turn: int | None = None
    created: float | None = Field(None, description="epoch seconds")
    created_at: str | None = Field(None, description="ISO-8601, UTC")
    superseded_by: str | None = None
    metadata: dict[str, Any] = {}


class ScoredOut(MemoryOut):
    score: float
    breakdown: dict[str, Any] = Field({}, description="the score's parts: relevance, recency, feedback...")


class RecallOut(BaseModel):
    results: list[ScoredOut]
    truncated: bool
    cut_count: int
    token_estimate: int
    token_budget: int | None
    blend: dict[str, float]


class ContextOut(BaseModel):
    text: str
    pinned: list[MemoryOut]
    recent: list[MemoryOut]
    recalled: list[ScoredOut]
    token_budget: int
    tokens_used: int
    tokens_by_section: dict[str, int]
    over_budget: bool
    cut_recent: int
    cut_recalled: int
    note: str


class HistoryItem(BaseModel):
    id: str
    text: str
    kind: str
    created: float
    created_at: str
    live: bool
    superseded_by: str | None
    superseded_at: str | None
    supersedes: list[str]


class RememberOut(BaseModel):
    id: str


class RememberManyOut(BaseModel):
    ids: list[str]


class FeedbackOut(BaseModel):
    id: str | None = Field(description="the correction's new memory, if one was stored")


class CountOut(BaseModel):
    deleted: int


class HistoryOut(BaseModel):
    entries: list[HistoryItem]


class TurnsOut(BaseModel):
    turns: list[MemoryOut]


class ErrorOut(BaseModel):
    error: str = Field(description="the kind of error: invalid, not_found, conflict, too_large, unauthorized...")
    message: str = Field(description="one line that says what was wrong")

