"""vxmem: conversation memory that ranks by relevance blended with recency and feedback.

    from vxmem import Vectrix
    db = Vectrix("chat.vxdb")
    db.remember("I prefer dark mode", session="alice")
    db.recall("which theme?", session="alice")
"""

from .embed import HashingEmbedder, SemanticEmbedder
from .memory import (
    K_CONSOLIDATED_FROM, K_EXPIRES, K_FEEDBACK, K_KIND, K_ROLE, K_SCORING, K_SESSION, K_SUPERSEDED_AT,
    K_SUPERSEDED_BY, K_SUPERSEDES, K_TS, K_TURN, KIND_FACT, KIND_PINNED, KIND_TURN, KINDS, OUTCOMES,
    ConsolidationReport, ContextBlock, ConversationMemory, HistoryEntry, feedback_score,
)
from .store import (
    DatabaseLockedError, InvalidDatabaseError, ReadOnlyError, Result, Results, Vectrix, VectrixError,
)
from .tokens import count_tokens

__version__ = "0.1.0"

__all__ = [
    "Vectrix", "ConversationMemory", "Result", "Results", "ContextBlock", "ConsolidationReport",
    "HistoryEntry", "feedback_score", "HashingEmbedder", "SemanticEmbedder", "count_tokens",
    "VectrixError", "DatabaseLockedError", "InvalidDatabaseError", "ReadOnlyError",
    "K_KIND", "K_SESSION", "K_ROLE", "K_TURN", "K_TS", "K_FEEDBACK", "K_SUPERSEDED_BY",
    "K_SUPERSEDES", "K_SUPERSEDED_AT", "K_SCORING", "K_EXPIRES", "K_CONSOLIDATED_FROM",
    "KIND_TURN", "KIND_FACT", "KIND_PINNED", "KINDS", "OUTCOMES",
]
