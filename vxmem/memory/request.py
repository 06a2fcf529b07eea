"""recall()'s options declared once (:class:`RecallOptions`), and one recall as one checked value
(:class:`RecallRequest`).

:class:`RecallOptions` is the one place an option of ``recall()`` is spelled: its name, type,
default and meaning. ``ConversationMemory.recall``, ``Vectrix.recall`` and
``AsyncVectrix.recall`` take their signature and the list of their parameters from it
(:func:`vxmem.core.options.takes`), ``context()`` the options it passes on, and the servers'
recall schema its fields. ``recall()`` makes a :class:`RecallRequest` from its arguments and
hands it on; the context block, the workbench's replay and the servers make their own.
Everything after the request reads its fields, already in canonical form, and never checks
them again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
from ..core.clock import TimeLike, to_epoch
from ..core.keys import KINDS
from ..core.options import option
from ..core.sentinels import ANY_SESSION, MEMORY_SETTING, AnySession, MemorySetting
from ..ranking import scoring
from ..ranking.blend import Blend
from ..store.seam import FilterValues, check_ids, check_mode
from .arguments import check_memory_filter, check_min_relevance, check_user
from .stages import check_preset


@dataclass(frozen=True, slots=True)
class RecallOptions:
    """``recall()``'s options after the query, in the spec's order: each one's type, default and
    meaning. :data:`~vxmem.core.sentinels.MEMORY_SETTING` is the memory's own setting; an option
    added here reaches every ``recall()``, ``context()`` and the servers' schemas. Plain values:
    :class:`RecallRequest` checks them."""

    session: str | AnySession | None = option(
        None, "whose memories: a session's name, or None or ANY_SESSION for every session.")
    limit: int = option(10, "how many results at most.")
    token_budget: int | None = option(None, "the most tokens the results may hold (the top one always ships).")
    score_gap: float | None = option(None, "cut at the first result scoring this much below the one before it.")
    kinds: Sequence[str] = option(KINDS, "which kinds are eligible.")
    include_superseded: bool = option(False, "let corrected and contradicted memories back in.")
    mode: str | None = option(
        None, '``"hybrid"`` (the default, None) fuses the cosine and BM25 with ``hybrid_weight``; '
              '``"dense"`` is the cosine alone, ``"lexical"`` BM25 alone.')
    now: TimeLike = option(
        None, "the moment of the recall (default: now): ages count to it and the collection is read as it "
              "stood then (later memories, supersessions, expiries and feedback are not there yet).")
    exclude_ids: Sequence[str] = option((), "memories to leave out.")
    hybrid_weight: float | MemorySetting | None = option(
        MEMORY_SETTING, "the dense share of hybrid relevance (MEMORY_SETTING or None: the memory's).")
    min_relevance: float | MemorySetting | None = option(
        MEMORY_SETTING, "leave out candidates whose raw relevance (the reranker's logit when reranked, else the "
                        "cosine, or BM25 in lexical mode) is below this; None: no floor, whatever the memory's; "
                        "MEMORY_SETTING: the memory's. ``low_relevance()`` gives a hint.")
    rerank: bool | MemorySetting | None = option(
        MEMORY_SETTING, "rerank with the memory's reranker (MEMORY_SETTING or None: the memory's setting).")
    filter: dict[str, Any] | None = option(
        None, 'only memories whose own metadata match it (``{"topic": "billing"}``, '
              '``{"topic": ["billing", "refunds"]}``); exact: the pool is drawn from them alone.')
    user: str | None = option(None, "only this user's memories, from every session unless ``session`` narrows it.")
    recency_from: str | MemorySetting | None = option(
        MEMORY_SETTING, '``"created"`` or ``"accessed"`` for this recall (MEMORY_SETTING or None: the memory\'s); '
                        "recording accesses follows the memory's own setting alone.")
    preset: str | MemorySetting | None = option(
        MEMORY_SETTING, '``"fast"``, ``"default"`` or ``"accurate"`` for this recall (MEMORY_SETTING or None: the '
                        "memory's).")


# The options whose MEMORY_SETTING a request keeps as None, the memory's setting (None has no
# other meaning for them); min_relevance keeps MEMORY_SETTING, its None being "no floor".
MEMORY_OR_NONE = ("rerank", "recency_from", "preset")


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What one recall asks: the query, whose memories, as of when, how much comes back.

    The fields are :meth:`ConversationMemory.recall <vxmem.memory.ConversationMemory.recall>`'s
    arguments (:class:`RecallOptions`); ``now`` is epoch seconds (made from any time ``recall()``
    takes; None: the clock when the request is made) and ``blend`` the ranking this recall
    uses instead of the memory's (None: the memory's). ``session`` None is every session
    (ANY_SESSION is made None). ``rerank``, ``recency_from`` and ``preset`` None (or
    MEMORY_SETTING, made None) mean the memory's own settings; ``min_relevance``
    MEMORY_SETTING (the default) means the memory's floor, None no floor.
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
    min_relevance: float | MemorySetting | None = MEMORY_SETTING
    recency_from: str | None = None
    blend: Blend | None = None
    preset: str | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__  # a frozen dataclass sets its canonical forms once, here
        if not check_text(self.query, "query").strip():
            raise ValueError("query must not be empty or only whitespace")  # as remember() refuses a blank text
        put(self, "session", None if self.session is ANY_SESSION else check_session(self.session))
        for name in MEMORY_OR_NONE:
            if getattr(self, name) is MEMORY_SETTING:
                put(self, name, None)
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
        if self.min_relevance is not MEMORY_SETTING:
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
