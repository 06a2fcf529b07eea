"""Conversations on a timeline: the workbench's data model, its JSONL format and importers.

- :mod:`~vxmem.workbench.datasets.model`: :class:`Event`, :class:`Conversation` and their validation.
- :mod:`~vxmem.workbench.datasets.jsonl`: the conversation's own JSON Lines file.
- :mod:`~vxmem.workbench.datasets.locomo`, :mod:`~vxmem.workbench.datasets.longmemeval`: real benchmark files
  read into the same model (:mod:`~vxmem.workbench.datasets.sources` holds what importers share).
- :mod:`~vxmem.workbench.datasets.formats`: :func:`load` reads any of them, guessing which, and the
  chat logs of :mod:`vxmem.workbench.datasets.chatlogs` (OpenAI / ChatML JSONL, a ChatGPT export, CSV).
- :mod:`~vxmem.workbench.datasets.probes`: probes written into a conversation (a chat log comes without).

Every name but the chat logs' and the probes' is importable from ``vxmem.workbench.datasets`` itself.
"""

from .formats import CHAT_FORMATS, FILE_FORMATS, FORMATS, FileFormat, guess_format, load
from .jsonl import dumps_jsonl, load_jsonl, loads_jsonl, save_jsonl
from .locomo import load_locomo, parse_locomo_date
from .longmemeval import load_longmemeval, parse_longmemeval_date
from .model import (
    EVENT_TYPES,
    FORMAT,
    HEADER_KEYS,
    MEMORY_EVENTS,
    Conversation,
    DatasetError,
    Event,
    check_events,
    format_time,
)

__all__ = [
    "Conversation", "Event", "DatasetError", "check_events", "format_time",
    "FORMAT", "EVENT_TYPES", "MEMORY_EVENTS", "HEADER_KEYS",
    "load_jsonl", "loads_jsonl", "save_jsonl", "dumps_jsonl",
    "load_locomo", "parse_locomo_date", "load_longmemeval", "parse_longmemeval_date",
    "load", "guess_format", "FORMATS", "FILE_FORMATS", "CHAT_FORMATS", "FileFormat",
]
