"""Every file format the workbench reads, and :func:`load`, which reads any of them.

A format is one entry of :data:`FILE_FORMATS`: its name, what a person calls it, the
file suffix it comes with, its loader and the text near the top of a file that gives
it away. An importer for another format (a chat log, say) is one more module beside
:mod:`~vxmem.workbench.datasets.locomo` and one more entry here; ``load()``, the CLI's
``--format`` and the workbench's upload box then know it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import locomo, longmemeval
from .jsonl import load_jsonl
from .model import FORMAT as JSONL_FORMAT
from .model import FORMAT_HINT, Conversation, DatasetError

_HEAD_CHARS = 4096  # how much of a file the guess reads


@dataclass(frozen=True)
class FileFormat:
    """One readable file format: ``load(path)`` returns its conversations."""

    name: str
    label: str
    suffix: str
    load: Callable[[str], list[Conversation]]
    markers: tuple[str, ...] = ()


def _chat_loader(fmt: str) -> Callable[[str], list[Conversation]]:
    """A chat-log format's loader (:mod:`vxmem.workbench.datasets.chatlogs`, imported when a file is read: it
    builds on this package)."""

    def load_chat(path: str) -> list[Conversation]:
        from .chatlogs import load_chatlog

        return [load_chatlog(path, fmt)]

    return load_chat


# The guess tries the markers in this order: the benchmarks' before the chat logs', whose
# '"role"' also appears inside a LongMemEval haystack, and a ChatGPT export's before OpenAI's.
FILE_FORMATS: dict[str, FileFormat] = {f.name: f for f in (
    FileFormat("jsonl", "vxmem JSONL", ".jsonl", lambda path: [load_jsonl(path)]),
    FileFormat("locomo", "LoCoMo JSON", ".json", locomo.load_locomo, locomo.MARKERS),
    FileFormat("longmemeval", "LongMemEval JSON", ".json", longmemeval.load_longmemeval, longmemeval.MARKERS),
    FileFormat("chatgpt", "ChatGPT export (conversations.json)", ".json", _chat_loader("chatgpt"),
               ('"mapping"', '"current_node"')),
    FileFormat("openai", "OpenAI / ChatML messages JSONL", ".jsonl", _chat_loader("openai"),
               ('"messages"', '"role"')),
    FileFormat("csv", "chat CSV (session, role, text, timestamp)", ".csv", _chat_loader("csv")),
)}
FORMATS = tuple(FILE_FORMATS)
CHAT_FORMATS = ("openai", "chatgpt", "csv")  # chat logs: turns only, probes written afterwards


def _one_of(names: tuple[str, ...]) -> str:
    """``"a, b or c"``."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)


def load(path, format: str | None = None, categories: Any = None) -> list[Conversation]:
    """Load any supported file as a list of conversations (JSONL gives a list of one).

    ``format`` is one of :data:`FORMATS` (``"jsonl"``, ``"locomo"``, ``"longmemeval"``, and
    the chat logs ``"openai"``, ``"chatgpt"``, ``"csv"``); by default it is guessed from the
    extension and the keys near the top of the file. ``categories`` chooses LoCoMo's
    questions (see :func:`~vxmem.workbench.datasets.locomo.load_locomo`; None: adversarial ones left
    out); any other format refuses it.
    """
    spath = os.fspath(path)
    if format is None:
        format = guess_format(spath)
    if format not in FILE_FORMATS:
        raise DatasetError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}", path=spath)
    if categories is not None:
        if format != "locomo":
            raise ValueError(f"categories chooses LoCoMo questions; {spath} is {FILE_FORMATS[format].label}")
        return locomo.load_locomo(spath, categories=categories)
    return FILE_FORMATS[format].load(spath)


def guess_format(path: str) -> str:
    """The format of the file at ``path``, by its suffix and the keys near its top."""
    low = path.lower()
    if low.endswith(".csv"):
        return "csv"
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(_HEAD_CHARS)
    except OSError as exc:
        raise DatasetError(f"cannot read file: {exc.strerror or exc}", path=path) from None
    except UnicodeDecodeError:
        raise DatasetError("not UTF-8 text (a binary file?); expected " + _one_of(FORMATS), path=path) from None
    if JSONL_FORMAT in head.split("\n", 1)[0]:  # a vxmem conversation names its format on line 1
        return "jsonl"
    for fmt in FILE_FORMATS.values():
        if any(marker in head for marker in fmt.markers):
            return fmt.name
    if low.endswith(".jsonl") or head.lstrip().startswith("{"):
        return "jsonl"
    raise DatasetError(f"cannot tell the format; {FORMAT_HINT} ({_one_of(FORMATS)})", path=path)
