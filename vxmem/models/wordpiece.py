"""BERT WordPiece tokenizers read from their ``tokenizer.json``, in pure Python: the ids ``tokenizers`` gives.

vxmem's models come with a ``tokenizer.json`` that names a BertNormalizer, the BertPreTokenizer,
a WordPiece vocabulary and a ``[CLS] A [SEP] B [SEP]`` template. :class:`WordPieceTokenizer`
implements exactly those components, in the order and with the Unicode tables of the Rust
``tokenizers`` library (:mod:`vxmem.models.unicode_tables`), so a text gets the same ids and type
ids, and a model the same input, to the token. A file that uses any other component, or an
option this module does not implement, is refused with :class:`UnsupportedTokenizerError`
rather than tokenized differently.

Like ``tokenizers`` with ``no_padding()`` and ``enable_truncation(max_length)``: no padding,
and an input longer than ``max_length`` tokens (specials included) is cut on the right; a
pair is cut longest first (the longer text alone while that suffices, else both to half).
"""

from __future__ import annotations

import json
import os
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from . import unicode_tables

__all__ = ["Encoding", "WordPieceTokenizer", "UnsupportedTokenizerError", "BertNormalizer", "pre_tokenize"]

# tokenizers' handle_chinese_chars: the CJK ideograph blocks it pads with spaces, as it lists them (it
# skips 2B820-2B91F).
CJK = "3400-4DBF 4E00-9FFF F900-FAFF 20000-2A6DF 2A700-2B73F 2B740-2B81F 2B920-2CEAF 2F800-2FA1F"
# Rust's char::is_whitespace (the White_Space property): what the pre-tokeniser splits on.
WHITESPACE = "9-D 20 85 A0 1680 2000-200A 2028-2029 202F 205F 3000"
WORD_CACHE = 200_000  # distinct words a tokenizer remembers the pieces of (cleared when full)


class UnsupportedTokenizerError(ValueError):
    """A ``tokenizer.json`` names a component or an option :class:`WordPieceTokenizer` does not implement."""


class Encoding(NamedTuple):
    """A tokenized input: its token ids and their type ids (0 for the first text, 1 for the second)."""

    ids: list[int]
    type_ids: list[int]


def char_class(ranges: str) -> str:
    """A regex character class body for hex ranges written ``FIRST-LAST`` or ``CODE``, space separated."""
    out = []
    for item in ranges.split():
        first, _, last = item.partition("-")
        out.append(re.escape(chr(int(first, 16))) + ("-" + re.escape(chr(int(last, 16))) if last else ""))
    return "".join(out)


_REMOVED = re.compile(f"[{char_class(''.join(unicode_tables.REMOVED))}]+")
_SPACES = re.compile(f"[{char_class(WHITESPACE)}]")
_CJK = re.compile(f"[{char_class(CJK)}]")
_MARKS = re.compile(f"[{char_class(''.join(unicode_tables.NONSPACING_MARKS))}]+")
# Characters this Python's unicodedata decomposes and the crate's older tables do not.
_KEEP = (re.compile(f"([{char_class(''.join(unicode_tables.NOT_DECOMPOSED))}])")
         if "".join(unicode_tables.NOT_DECOMPOSED).strip() else None)
_LOWER = {int(code, 16): "".join(chr(int(c, 16)) for c in low.split(","))
          for code, _, low in (item.partition(":") for item in "".join(unicode_tables.LOWERCASE).split())}
_PUNCT = char_class("".join(unicode_tables.PUNCTUATION))
# The BertPreTokenizer: whitespace separates words and is dropped; each punctuation character is a word.
_WORDS = re.compile(f"[^{char_class(WHITESPACE)}{_PUNCT}]+|[{_PUNCT}]")


def pre_tokenize(text: str) -> list[str]:
    """tokenizers' BertPreTokenizer: the words of ``text``, split at whitespace (dropped) and
    around each punctuation character (a word of its own)."""
    return _WORDS.findall(text)


def nfd(text: str) -> str:
    """``text`` in Unicode's NFD, as the crate decomposes it."""
    if _KEEP is None or _KEEP.search(text) is None:
        return unicodedata.normalize("NFD", text)
    # Those characters are starters: no mark reorders across them, so the text decomposes in parts.
    return "".join(p if i % 2 else unicodedata.normalize("NFD", p) for i, p in enumerate(_KEEP.split(text)))


class BertNormalizer:
    """tokenizers' BertNormalizer: drop control characters and turn whitespace into spaces
    (``clean_text``), space out CJK ideographs, strip accents (NFD, then drop nonspacing marks;
    None: as ``lowercase``), lowercase one character at a time (so no final sigma), in that order."""

    def __init__(self, clean_text: bool = True, handle_chinese_chars: bool = True, strip_accents: bool | None = None,
                 lowercase: bool = True):
        self.clean_text = bool(clean_text)
        self.handle_chinese_chars = bool(handle_chinese_chars)
        self.strip_accents = bool(lowercase if strip_accents is None else strip_accents)
        self.lowercase = bool(lowercase)

    def __call__(self, text: str) -> str:
        if self.clean_text:
            text = _SPACES.sub(" ", _REMOVED.sub("", text))
        if text.isascii():  # no ideograph, no accent, no special case to lower: the common case, kept quick
            return text.lower() if self.lowercase else text
        if self.handle_chinese_chars:
            text = _CJK.sub(r" \g<0> ", text)
        if self.strip_accents:
            text = _MARKS.sub("", nfd(text))
        if self.lowercase:
            # Python lowers a final capital sigma to "ς"; the crate, character by character, to "σ".
            text = text.replace("\u03a3", "\u03c3").lower().translate(_LOWER)
        return text


def _refuse(what: str, value: Any) -> UnsupportedTokenizerError:
    return UnsupportedTokenizerError(f"tokenizer.json: vxmem's tokenizer does not implement {what} {value!r}; "
                                     "it reads BERT WordPiece tokenizers only")


def _normalizer(spec: Any) -> BertNormalizer:
    if not isinstance(spec, Mapping) or spec.get("type") != "BertNormalizer":
        raise _refuse("the normalizer", spec if not isinstance(spec, Mapping) else spec.get("type"))
    extra = set(spec) - {"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"}
    if extra:
        raise _refuse("the BertNormalizer options", sorted(extra))
    return BertNormalizer(spec.get("clean_text", True), spec.get("handle_chinese_chars", True),
                          spec.get("strip_accents"), spec.get("lowercase", True))


def _template(post: Any) -> tuple[list[tuple[Any, int]], list[tuple[Any, int]]]:
    """The single and pair templates: a list of (``"A"``, ``"B"`` or a list of special ids, type id)."""
    kind = post.get("type") if isinstance(post, Mapping) else post
    if kind == "BertProcessing":
        (_, sep), (_, cls) = post["sep"], post["cls"]
        return [([cls], 0), ("A", 0), ([sep], 0)], [([cls], 0), ("A", 0), ([sep], 0), ("B", 1), ([sep], 1)]
    if kind != "TemplateProcessing":
        raise _refuse("the post-processor", kind)
    specials = {name: list(tok["ids"]) for name, tok in post.get("special_tokens", {}).items()}

    def pieces(items: list[Mapping[str, Any]], names: list[str]) -> list[tuple[Any, int]]:
        out: list[tuple[Any, int]] = []
        for item in items:
            (kind, body), = item.items()
            if kind == "Sequence" and body["id"] in names:
                out.append((body["id"], int(body["type_id"])))
            elif kind == "SpecialToken" and body["id"] in specials:
                out.append((specials[body["id"]], int(body["type_id"])))
            else:
                raise _refuse("the template piece", item)
        if sorted(p for p, _ in out if isinstance(p, str)) != names:
            raise _refuse("a template without each sequence once", items)
        return out

    return pieces(post["single"], ["A"]), pieces(post["pair"], ["A", "B"])


def _added_tokens(spec: Any) -> dict[str, int]:
    """Added tokens, matched in the raw text before anything else: only the plain kind (not normalised,
    no stripping, matched inside words too), which is what BERT's special tokens are."""
    out = {}
    for tok in spec or []:
        if tok.get("normalized") or tok.get("lstrip") or tok.get("rstrip") or tok.get("single_word"):
            raise _refuse("the added token options of", tok.get("content"))
        out[tok["content"]] = int(tok["id"])
    return out


def _truncated(a: list[int], b: list[int] | None, room: int) -> tuple[list[int], list[int] | None]:
    """``a`` (and ``b``) cut to ``room`` tokens in all, as tokenizers' longest-first strategy cuts them."""
    if b is None:
        return a[:room], None
    if len(a) + len(b) <= room:
        return a, b
    short, long = sorted((len(a), len(b)))
    long = short if short > room else max(short, room - short)
    if short + long > room:
        short, long = room // 2, room // 2 + room % 2
    na, nb = (long, short) if len(a) > len(b) else (short, long)
    return a[:na], b[:nb]


class WordPieceTokenizer:
    """A BERT WordPiece tokenizer from the parsed ``tokenizer.json`` ``spec`` (see :meth:`from_file`).

    ``max_length`` is the most tokens an input gets, specials included (None: no limit); the
    file's own truncation and padding settings are ignored, as vxmem replaced them in ``tokenizers``.
    Safe to share between threads.
    """

    def __init__(self, spec: Mapping[str, Any], max_length: int | None = None):
        self.normalizer = _normalizer(spec.get("normalizer"))
        if (spec.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
            raise _refuse("the pre-tokenizer", spec.get("pre_tokenizer"))
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise _refuse("the model", model.get("type"))
        self.vocab: dict[str, int] = dict(model["vocab"])
        self.unk_id = self.vocab[model.get("unk_token", "[UNK]")]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = int(model.get("max_input_chars_per_word", 100))
        self.single, self.pair = _template(spec.get("post_processor"))
        self.added = _added_tokens(spec.get("added_tokens"))
        # Leftmost match, the longest where several start at the same place (as tokenizers matches them).
        names = sorted(self.added, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, names)) + ")") if names else None
        self.specials = tuple(sum(len(p) for p, _ in t if not isinstance(p, str)) for t in (self.single, self.pair))
        if max_length is not None and max_length <= self.specials[1]:
            raise ValueError(f"max_length must leave room for a text after {self.specials[1]} special tokens, "
                             f"got {max_length}")
        self.max_length = max_length
        self._words: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_length: int | None = None) -> WordPieceTokenizer:
        """The tokenizer a ``tokenizer.json`` describes (refused unless it is a BERT WordPiece one)."""
        with open(os.fspath(path), encoding="utf-8") as f:
            return cls(json.load(f), max_length=max_length)

    def clear_cache(self) -> None:
        """Forget the pieces of every word seen, so the next texts are split from the vocabulary again."""
        with self._lock:
            self._words.clear()

    def word_ids(self, word: str) -> tuple[int, ...]:
        """WordPiece: the longest known start, then the longest known ``##`` continuation, and so on;
        a word with a part no piece matches (or longer than ``max_chars``) is one unknown token."""
        known = self._words.get(word)
        if known is None:
            known = (len(word) <= self.max_chars and self._pieces(word)) or (self.unk_id,)
            with self._lock:
                if len(self._words) >= WORD_CACHE:
                    self._words.clear()
                self._words[word] = known
        return known

    def _pieces(self, word: str) -> tuple[int, ...]:
        """The pieces of ``word``, or () if some part of it matches none."""
        vocab, n = self.vocab, len(word)
        pieces, start = [], 0
        while start < n:
            end, piece = n, None
            while end > start:
                piece = vocab.get(word[start:end] if start == 0 else self.prefix + word[start:end])
                if piece is not None:
                    break
                end -= 1
            if piece is None:
                return ()
            pieces.append(piece)
            start = end
        return tuple(pieces)

    def tokenize(self, text: str) -> list[int]:
        """The ids of ``text`` alone: no specials, not truncated."""
        if not isinstance(text, str):
            raise TypeError(f"a tokenizer reads str, not {type(text).__name__}")
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:  # as tokenizers, which takes only what UTF-8 can hold
                raise ValueError(f"a tokenizer reads Unicode text, got a lone surrogate at {exc.start}") from None
        parts = self._split.split(text) if self._split is not None else [text]
        ids: list[int] = []
        for i, part in enumerate(parts):
            if i % 2:  # an added token, matched as written
                ids.append(self.added[part])
            elif part:
                for word in pre_tokenize(self.normalizer(part)):
                    ids.extend(self.word_ids(word))
        return ids

    def encode(self, text: str, pair: str | None = None) -> Encoding:
        """``text`` (and ``pair``) as the model reads them: truncated, in the template, with type ids."""
        a, b = self.tokenize(text), None if pair is None else self.tokenize(pair)
        template = self.single if b is None else self.pair
        if self.max_length is not None:
            a, b = _truncated(a, b, self.max_length - self.specials[b is not None])
        ids: list[int] = []
        type_ids: list[int] = []
        for piece, type_id in template:
            part = a if piece == "A" else b if piece == "B" else piece
            assert part is not None
            ids.extend(part)
            type_ids.extend([type_id] * len(part))
        return Encoding(ids, type_ids)

    def encode_batch(self, inputs: Sequence[str | tuple[str, str]]) -> list[Encoding]:
        """:meth:`encode` each input: a text, or a (text, pair) tuple."""
        return [self.encode(x) if isinstance(x, str) else self.encode(*x) for x in inputs]
