"""Users' own chat logs (OpenAI / ChatML JSONL, a ChatGPT export, CSV) as conversations.

The reader lives in :mod:`vxmem.datasets.chatlogs`, beside the other formats; this module
keeps the names importable from ``vxmem.chatlogs``.
"""

from .datasets.chatlogs import (
    CHAT_FORMATS,
    CSV_COLUMNS,
    CSV_REQUIRED,
    SESSION_GAP,
    SKIPPED_ROLES,
    TURN_GAP,
    add_probe,
    detect_chat_format,
    load_chatlog,
    loads_chatlog,
)

__all__ = ["CHAT_FORMATS", "CSV_COLUMNS", "CSV_REQUIRED", "SESSION_GAP", "SKIPPED_ROLES", "TURN_GAP",
           "add_probe", "detect_chat_format", "load_chatlog", "loads_chatlog"]
