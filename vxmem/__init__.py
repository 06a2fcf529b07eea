"""vxmem: conversation memory that ranks by relevance blended with recency and feedback.

    from vxmem import Vectrix
    db = Vectrix("chat.vxdb")
    db.remember("I prefer dark mode", session="alice")
    db.recall("which theme?", session="alice")

The names below are handed on lazily (PEP 562), so importing one layer, say
``vxmem.store``, loads that layer and what it stands on, never the layers above it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# onnxruntime (the default models' runtime) must load before usearch's extension, or the interpreter
# crashes: vxmem imports it just before it first imports usearch (vxmem.store.vector.hnsw), and the models
# refuse with a clear ImportError where usearch came first. Not at import: a process that loaded
# onnxruntime hangs in a forked child's exit.
from .core.version import __version__ as __version__

__all__ = [
    "Vectrix", "AsyncVectrix", "Client", "AsyncClient", "ConversationMemory", "RecallOptions", "RecallRequest",
    "ANY_SESSION", "MEMORY_SETTING", "Blend", "Result", "Results", "ContextBlock",
    "ConsolidationReport",
    "HistoryEntry", "feedback_score", "HashingEmbedder", "SemanticEmbedder", "OnnxEmbedder", "OnnxCrossEncoder",
    "count_tokens",
    "VectrixError", "DatabaseLockedError", "InvalidDatabaseError", "ReadOnlyError", "ForkedHandleError",
    "ConflictError", "DiskFullError", "ExportFileError",
    "K_KIND", "K_SESSION", "K_ROLE", "K_TURN", "K_TS", "K_FEEDBACK", "K_SUPERSEDED_BY", "K_SUPERSEDES",
    "K_SUPERSEDED_AT", "K_SCORING", "K_EXPIRES", "K_CONSOLIDATED_FROM", "KIND_TURN", "KIND_FACT", "KIND_PINNED",
    "KINDS", "OUTCOMES",
]
# Where each name lives; the other constants (upper-case names) all live in vxmem.core.keys.
_HOME = {
    "Vectrix": "vectrix", "AsyncVectrix": "aio", "Client": "client", "AsyncClient": "client",
    "ConflictError": "core.errors",
    "ConversationMemory": "memory", "HistoryEntry": "memory", "feedback_score": "memory",
    "ContextBlock": "memory", "ConsolidationReport": "memory", "Result": "store", "Results": "store",
    "VectrixError": "core.errors", "DatabaseLockedError": "core.errors", "InvalidDatabaseError": "core.errors",
    "ReadOnlyError": "core.errors", "ForkedHandleError": "core.errors",
    "DiskFullError": "core.errors", "ExportFileError": "core.errors", "HashingEmbedder": "models.embed",
    "SemanticEmbedder": "models.embed", "count_tokens": "core.tokens", "OnnxEmbedder": "models.onnx",
    "OnnxCrossEncoder": "models.rerank", "RecallRequest": "memory.request", "Blend": "ranking.blend",
    "RecallOptions": "memory.request", "ANY_SESSION": "core.sentinels", "MEMORY_SETTING": "core.sentinels",
}
_HOME.update({name: "core.keys" for name in __all__ if name.isupper() and name not in _HOME})


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'vxmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and editors see
    from .aio import AsyncVectrix
    from .client import AsyncClient, Client
    from .core.errors import (
        ConflictError,
        DatabaseLockedError,
        DiskFullError,
        ExportFileError,
        ForkedHandleError,
        InvalidDatabaseError,
        ReadOnlyError,
        VectrixError,
    )
    from .core.keys import (
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
        KIND_FACT,
        KIND_PINNED,
        KIND_TURN,
        KINDS,
        OUTCOMES,
    )
    from .core.sentinels import ANY_SESSION, MEMORY_SETTING
    from .core.tokens import count_tokens
    from .memory.consolidation import ConsolidationReport
    from .memory.context import ContextBlock
    from .memory.conversation import ConversationMemory
    from .memory.request import RecallOptions, RecallRequest
    from .memory.supersession import HistoryEntry
    from .models.embed import HashingEmbedder, SemanticEmbedder
    from .models.onnx import OnnxEmbedder
    from .models.rerank import OnnxCrossEncoder
    from .ranking.blend import Blend
    from .ranking.scoring import feedback_score
    from .store.results import Result, Results
    from .vectrix import Vectrix
