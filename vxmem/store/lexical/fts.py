"""FTS5's side of lexical search: the tokenizer, a query's words, and the MATCH expressions.

The FTS5 table ``vx_fts`` (see :mod:`vxmem.store.sqlite.schema`) indexes each document's text
plus a "scope" column holding one token per session (:func:`scope_token`), so a session's
FTS5 search is an index intersection in C. A user's question is only ever words to it
(:func:`fts_query`), never FTS5 syntax.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from ...core.keys import K_KIND, K_SESSION, K_USER
from ..mirror.columns import session_key
from ..mirror.mirror import ANY_SESSION, SessionArg

TOKENIZE = "porter unicode61 remove_diacritics 2"
BM25_SQL = "-bm25(vx_fts, 1.0, 0.0)"  # rank = BM25 of the text column alone; the scope column only filters
# Dropped from lexical queries (when something else is left): they match nearly every
# document and BM25 gives them almost no weight anyway.
_STOPWORDS = frozenset("""a an and are as at be but by do does did for from had has have he her him his how i
if in into is it its me my of on or our she so than that the their them then there these they this to was
we were what when where which who whom why will with you your""".split())
_TERM = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """The query's words as the lexical search uses them: lower-cased, stopwords dropped
    (unless nothing else is left), each once."""
    terms = [t.lower() for t in _TERM.findall(text)]
    keep = [t for t in terms if t not in _STOPWORDS] or terms
    return list(dict.fromkeys(keep))


def fts_query(text: str) -> str | None:
    """An FTS5 expression that treats ``text`` as words, never as syntax.

    Every word becomes a quoted string and the words are OR-ed, so quotes, ``*``,
    ``NEAR``, ``-``, ``:`` and parentheses in a user's question are just text. None when
    the text has no words at all.
    """
    words = query_words(text)
    if not words:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in words)


def scope_token(meta: Mapping[str, Any]) -> str:
    """The FTS token standing for a document's session, its user's (see
    :func:`~vxmem.store.mirror.columns.session_key`; '' for a plain document)."""
    if K_SESSION not in meta and K_KIND not in meta:
        return ""
    return session_token(meta.get(K_SESSION), meta.get(K_USER))


def _token_of(key: str) -> str:
    return "vxs" + hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


_key_token = functools.lru_cache(maxsize=4096)(_token_of)  # a batch of FTS5 rows is mostly a few sessions


def session_token(session: Any, user: Any = None) -> str:
    """The FTS token of ``session`` (of ``user``'s, when given or a ``UserSession``)."""
    return _key_token(session_key(session, user))


def fts_match(query: str, session: SessionArg = ANY_SESSION) -> str | None:
    """The MATCH expression of ``query`` (within one session's scope unless ``ANY_SESSION``)."""
    terms = fts_query(query)
    if terms is None:
        return None
    if session is ANY_SESSION:
        return f"text : ({terms})"
    return f'scope : "{session_token(session)}" AND text : ({terms})'
