"""One recall as one typed value: :class:`RecallRequest`, checked once when it is made.

``recall()`` makes one from its arguments and hands it on; the context block, the
workbench's replay and the servers make their own. Everything after the request reads its
fields, already in canonical form, and never checks them again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..core.checks import (
    check_bool,
    check_choice,
    check_kinds,
    check_limit,
    check_session,
    check_text,
    check_weight,
)
from ..core.clock import to_epoch
from ..core.keys import KINDS
from ..ranking import scoring
from ..ranking.blend import Blend
from ..store.seam import FilterValues, check_ids, check_mode
from .arguments import check_memory_filter, check_min_relevance, check_user
from .stages import check_preset


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What one recall asks: the query, whose memories, as of when, how much comes back.

    The fields are :meth:`ConversationMemory.recall <vxmem.memory.ConversationMemory.recall>`'s
    arguments, documented there; ``now`` is epoch seconds (made from any time ``recall()``
    takes; None: the clock when the request is made) and ``blend`` the ranking this recall
    uses instead of the memory's (None: the memory's). ``mode``, ``rerank``,
    ``min_relevance``, ``recency_from`` and ``preset`` left None mean the memory's own settings.
    """

    query: str
    session: str | None = None
    user: str | None = None
    filter: FilterValues | None = None
    kinds: tuple[str, ...] = KINDS
    include_superseded: bool = False
    exclude_ids: tuple[str, ...] = ()
    limit: int = 10
    token_budget: int | None = None
    score_gap: float | None = None
    now: float | None = None
    mode: str | None = None
    rerank: bool | None = None
    min_relevance: float | None = None
    recency_from: str | None = None
    blend: Blend | None = None
    preset: str | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__  # a frozen dataclass sets its canonical forms once, here
        if not check_text(self.query, "query").strip():
            raise ValueError("query must not be empty or only whitespace")  # as remember() refuses a blank text
        put(self, "session", check_session(self.session))
        put(self, "user", check_user(self.user))
        put(self, "filter", check_memory_filter(self.filter))
        put(self, "kinds", check_kinds(self.kinds))
        check_bool(self.include_superseded, "include_superseded")
        put(self, "exclude_ids", tuple(check_ids(self.exclude_ids, "exclude_ids")))
        put(self, "limit", check_limit(self.limit))
        if self.token_budget is not None:
            put(self, "token_budget", check_limit(self.token_budget, "token_budget"))
        if self.score_gap is not None:
            put(self, "score_gap", check_weight(self.score_gap, "score_gap"))
        put(self, "now", to_epoch(self.now))
        if self.mode is not None:
            put(self, "mode", check_mode(self.mode))
        if self.rerank is not None:
            check_bool(self.rerank, "rerank")
        put(self, "min_relevance", check_min_relevance(self.min_relevance))
        if self.recency_from is not None:
            check_choice(self.recency_from, "recency_from", scoring.RECENCY_FROM)
        if self.preset is not None:
            check_preset(self.preset)
        if self.blend is not None and not isinstance(self.blend, Blend):
            raise TypeError(f"blend must be a Blend or None, not {type(self.blend).__name__}")

    @property
    def search_mode(self) -> str:
        """The search mode this request runs: its own, else the default (hybrid)."""
        return scoring.DEFAULT_MODE if self.mode is None else self.mode

    def replace(self, **changes: Any) -> RecallRequest:
        """This request with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)
