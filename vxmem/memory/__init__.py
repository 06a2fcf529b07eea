"""Conversation memory on top of a collection: remember, recall, feedback, forget, expire,
consolidate and context.

The reserved metadata keys, kinds and outcomes are attributes of this package, as the spec
documents them.
"""

from ..core.keys import (
    K_CONSOLIDATED_FROM,
    K_EXPIRES,
    K_FEEDBACK,
    K_KIND,
    K_ROLE,
    K_SCORING,
    K_SESSION,
    K_SUPERSEDED_AT,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    K_TS,
    K_TURN,
    K_USER,
    KIND_FACT,
    KIND_PINNED,
    KIND_TURN,
    KINDS,
    OUTCOMES,
)
from ..ranking.scoring import feedback_score
from .consolidation import ConsolidationReport
from .context import ContextBlock
from .conversation import ConversationMemory
from .supersession import HistoryEntry

__all__ = [
    "ConversationMemory", "ContextBlock", "ConsolidationReport", "HistoryEntry", "feedback_score",
    "K_KIND", "K_SESSION", "K_USER", "K_ROLE", "K_TURN", "K_TS", "K_FEEDBACK", "K_SUPERSEDED_BY", "K_SUPERSEDES",
    "K_SUPERSEDED_AT", "K_SCORING", "K_EXPIRES", "K_CONSOLIDATED_FROM", "KIND_TURN", "KIND_FACT", "KIND_PINNED",
    "KINDS", "OUTCOMES",
]
