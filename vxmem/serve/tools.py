"""The MCP tools as a model reads them: few verbs, small arguments in plain words, hints of what
each changes, and compact answers.

A model pays for every character of the tools' schemas in each request, and for every character
of their answers; so a tool takes what a model can know (what to store or look for, the
conversation, how many) and leaves the blend, the ranking's settings and the time to the
server's configuration (a model asked for ``now`` may fill it with a guessed date). A tool's
arguments become the REST request of its verb (:mod:`vxmem.serve.schemas`), which checks
them as the REST API does; its answer keeps, of each memory, the id, the text, the time and
the score. The REST API keeps every option.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictBool

from . import schemas as m

# What a model may name; the REST models check each value again.
Said = Annotated[str, Field(min_length=1)]
Session = Annotated[str | None, Field(min_length=1, max_length=256)]


class RememberArgs(m.Strict):
    text: Said = Field(description="What to keep: something the user said, or a fact, in plain words.")
    session: Session = Field(None, description="The conversation it belongs to (default: the server's).")
    kind: m.Kind = Field("turn", description="turn: said in the conversation; fact: true beyond it; "
                                             "pinned: a fact shown in every context.")
    role: Annotated[str, Field(min_length=1, max_length=64)] = Field(
        "user", description="Who said it: user or assistant.")


class RecallArgs(m.Strict):
    query: Said = Field(description="What to look for, in words.")
    session: Session = Field(None, description="Search only this conversation (default: every conversation, "
                                               "unless the server names one).")
    limit: m.Count = Field(10, ge=1, le=m.MAX_LIMIT, description="How many memories at most.")
    kinds: list[m.Kind] | None = Field(None, min_length=1, description="Only these kinds: turn, fact, pinned "
                                                                        "(default: all three).")


class ContextArgs(m.Strict):
    query: Said = Field(description="What the next reply is about.")
    session: Session = Field(None, description="The conversation whose recent turns to include (default: the "
                                               "server's; without one, no recent turns).")
    token_budget: m.Count = Field(1500, ge=1, le=m.MAX_TOKEN_BUDGET,
                                  description="The most tokens the block may take.")


class FeedbackArgs(m.Strict):
    id: Said = Field(description="The id of a memory that recall or context returned.")
    outcome: m.Outcome = Field(description="useful: it helped; dead_end: it did not; corrected: it was wrong.")
    correction: Said | None = Field(None, description="With corrected: the right fact, stored in its place.")


class ForgetArgs(m.Strict):
    session: Session = Field(None, description="Delete this conversation's memories.")
    ids: list[Said] | None = Field(None, min_length=1, max_length=m.MAX_BATCH,
                                   description="Delete these memories, by id.")
    kinds: list[m.Kind] | None = Field(None, min_length=1, description="Which kinds go (default: turns; with "
                                                                        "ids, every kind).")
    older_than: Annotated[float | None, m.no_bool("a number of days")] = Field(
        None, gt=0, description="Only memories older than this many days.")
    all: StrictBool = Field(False, description="Must be true to delete without a session, ids or older_than: "
                                               "then every conversation's memories of those kinds go.")


# ---------------------------------------------------------------------------- answers


class Recalled(BaseModel):
    id: str
    text: str
    time: str | None = Field(description="when it was said, UTC")
    score: float


class RecallAnswer(BaseModel):
    results: list[Recalled]


class ContextAnswer(BaseModel):
    text: str = Field(description="the block to read before answering")
    ids: list[str] = Field(description="the recalled memories in it, for feedback")


def when(created: float | None) -> str | None:
    """A memory's time as a model reads it: ISO-8601 to the second, in UTC."""
    return None if created is None else datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def recalled(found: m.RecallOut) -> RecallAnswer:
    return RecallAnswer(results=[Recalled(id=r.id, text=r.text, time=when(r.created), score=round(r.score, 3))
                                 for r in found.results])


def context_block(block: m.ContextOut) -> ContextAnswer:
    return ContextAnswer(text=block.text, ids=[r.id for r in block.recalled])


def same(answer: BaseModel) -> BaseModel:
    return answer


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the model sends (``args``), the REST request it becomes (``body``) and
    the service's ``verb`` that runs it, the answer (``out``, made by ``shorten`` from the
    verb's) and what the tool changes (``hints``: read_only, destructive, idempotent)."""

    description: str
    args: type[BaseModel]
    body: type[BaseModel]
    verb: str
    out: type[BaseModel]
    shorten: Callable[[Any], BaseModel]
    hints: dict[str, bool]


READS = {"read_only": True, "destructive": False, "idempotent": True}
TOOLS: dict[str, ToolSpec] = {
    "remember": ToolSpec("Store something worth remembering: what the user said, or a fact. Returns its id.",
                         RememberArgs, m.RememberBody, "remember", m.RememberOut, same,
                         # a second call stores a second memory; nothing stored is changed
                         {"read_only": False, "destructive": False, "idempotent": False}),
    "recall": ToolSpec("Find the stored memories that best match a query, best first (recent and useful ones "
                       "rank higher). Returns each one's id, text, time and score.",
                       RecallArgs, m.RecallBody, "recall", RecallAnswer, recalled, READS),
    "context": ToolSpec("A block to read before answering: pinned facts, the conversation's recent turns and "
                        "the memories that match the query, within a token budget.",
                        ContextArgs, m.ContextBody, "context", ContextAnswer, context_block, READS),
    "feedback": ToolSpec("Say what a recalled memory was worth, so that ranking learns; corrected, with the "
                         "right fact, replaces it (the old one is kept in its history).",
                         FeedbackArgs, m.FeedbackBody, "feedback", m.FeedbackOut, same,
                         # grades add up and a correction hides nothing it does not replace
                         {"read_only": False, "destructive": False, "idempotent": False}),
    "forget": ToolSpec("Delete memories for good: a conversation's, some by id, or those older than some days. "
                       "Refused without one of these unless all is true. Returns how many went.",
                       ForgetArgs, m.ForgetBody, "forget", m.CountOut, same,
                       # deleting the same selection again deletes nothing more
                       {"read_only": False, "destructive": True, "idempotent": True}),
}


def slim(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as a model needs it: no titles, and an optional argument as its one type (a
    null given is taken as the argument left out)."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k != "title"}
    if "properties" in out:
        out["properties"] = {name: slim(prop) for name, prop in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = slim(out[key])
    if "$defs" in out:
        out["$defs"] = {name: slim(d) for name, d in out["$defs"].items()}
    options = out.get("anyOf")
    # Only where null means "left out" (a default of null): a value that may be null stays so.
    if isinstance(options, list) and {"type": "null"} in options and out.get("default", ...) is None:
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            del out["anyOf"], out["default"]
            out = {**slim(rest[0]), **out}
    return out
