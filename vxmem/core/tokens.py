"""Token counting with no download.

The default counter approximates a BPE tokenizer: every word costs one token per four
characters (at least one), every punctuation mark or symbol costs one. It is additive
over lines, which lets ``context()`` account exactly for the text it renders. Any
callable ``str -> int`` (tiktoken's ``len(enc.encode(s))``, say) can replace it.

A database stores each text's count beside it, with the name of the counter that made
it, so an open does not recount every text: a counter is known by its ``name`` attribute
(a non-empty str, as embedders are; the default's is :data:`DEFAULT_COUNTER_NAME`). A
counter without one is counted afresh at every open.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Change the version whenever count_tokens counts differently: stored counts then no longer apply.
DEFAULT_COUNTER_NAME = "vxmem-approx-bpe-1"
_PIECE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def count_tokens(text: str) -> int:
    """Approximate BPE token count of ``text`` (about 1.3 tokens per English word)."""
    n = 0
    for piece in _PIECE.findall(text):
        n += (len(piece) + 3) // 4
    return n


def check_token_counter(counter: Any) -> Callable[[str], int]:
    """Return ``counter`` (or the default) after checking it is a callable."""
    if counter is None:
        return count_tokens
    if not callable(counter):
        raise TypeError(f"token_counter must be a callable str -> int, not {type(counter).__name__}")
    return counter


def token_counter_name(counter: Any) -> str | None:
    """The name counts made by ``counter`` are stored under, or None (they are never reused).

    The default counter's is :data:`DEFAULT_COUNTER_NAME`; any other callable names itself
    with a ``name`` attribute (a non-empty str), which must change whenever its counts do.
    """
    if counter is count_tokens:
        return DEFAULT_COUNTER_NAME
    name = getattr(counter, "name", None)
    return name if isinstance(name, str) and name else None
