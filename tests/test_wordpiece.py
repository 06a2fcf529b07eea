"""vxmem's WordPiece tokenizer gives the ids and type ids ``tokenizers`` gives, for every model vxmem runs.

``tokenizers`` (the Rust library) is in the ``dev`` extra only, as the reference: on every text of
datasets/ and tests/data, on generated Unicode text, on texts and pairs long enough to be cut, and
on every code point, for each model's tokenizer.json and length. ``python tests/test_wordpiece.py``
writes vxmem/models/unicode_tables.py from it.
"""

import copy
import functools
import json
import random
import sys
import textwrap
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vxmem.models import unicode_tables
from vxmem.models.late import COLBERT_SMALL
from vxmem.models.packaged import BGE_SMALL, MS_MARCO_MINILM_L12
from vxmem.models.wordpiece import BertNormalizer, UnsupportedTokenizerError, WordPieceTokenizer, pre_tokenize

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parent.parent
# Each model's tokenizer.json and max_length, as vxmem loads it: all-MiniLM-L6-v2 reads bge-small's
# file, cut at 256 tokens (vxmem.models.embed.SemanticEmbedder); late interaction reads its own.
MODELS = {"bge-small": (BGE_SMALL, 512), "ms-marco-reranker": (MS_MARCO_MINILM_L12, 512),
          "all-minilm-l6": (BGE_SMALL, 256), "colbert": (COLBERT_SMALL, 512)}
# Strings the added-token matching, the template and the Unicode tables meet in real text.
AWKWARD = ["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[unused1]", "##ing", "ΟΔΟΣ", "İstanbul", "東京",
           "naïve café", "a\x0bb\x85c\u200bd\ufeff", "ﬁ", "\u0344", "Ǆ", "🙂👍🏽", "\U00011938", "\ua7cb", " \t\n"]


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _strings(value)


@functools.cache
def corpus() -> tuple[str, ...]:
    """Every string of datasets/ (conversations and the LoCoMo-like fixtures) and tests/data."""
    out: list[str] = []
    for path in sorted([*(ROOT / "datasets").rglob("*.json*"), *(ROOT / "tests" / "data").glob("*.json")]):
        lines = path.read_text(encoding="utf-8").splitlines() if path.suffix == ".jsonl" else [path.read_text()]
        for line in filter(str.strip, lines):
            out.extend(_strings(json.loads(line)))
    return tuple(dict.fromkeys(out))


@functools.cache
def both(name: str):
    """(vxmem's tokenizer, tokenizers') for model ``name``, set up as vxmem sets it up."""
    model, max_length = MODELS[name]
    path = str(model.files()["tokenizer.json"])
    theirs = tokenizers.Tokenizer.from_file(path)
    theirs.no_padding()
    theirs.enable_truncation(max_length=max_length)
    return WordPieceTokenizer.from_file(path, max_length=max_length), theirs


def assert_same(ours, theirs, inputs) -> None:
    want = theirs.encode_batch(list(inputs))
    got = ours.encode_batch(list(inputs))
    bad = [(x, w.ids, g.ids) for x, w, g in zip(inputs, want, got) if (w.ids, w.type_ids) != (g.ids, g.type_ids)]
    assert not bad, f"{len(bad)} of {len(inputs)} differ, first: {bad[0]}"


def test_the_corpus_holds_the_datasets_and_the_locomo_fixtures():
    texts = corpus()
    assert len(texts) > 3000 and any("Caroline" in t for t in texts)  # LoCoMo's speakers
    assert any(not t.isascii() for t in texts)


@pytest.mark.parametrize("name", MODELS)
def test_every_dataset_text_gets_the_ids_tokenizers_gives(name):
    assert_same(*both(name), [*corpus(), *AWKWARD, ""])


@pytest.mark.parametrize("name", MODELS)
def test_pairs_of_dataset_texts_get_the_ids_and_type_ids_tokenizers_gives(name):
    texts = [*corpus(), *AWKWARD]
    rng = random.Random(7)
    assert_same(*both(name), [(rng.choice(texts), rng.choice(texts)) for _ in range(3000)])


@pytest.mark.parametrize("name", MODELS)
def test_long_texts_and_pairs_are_cut_where_tokenizers_cuts_them(name):
    ours, theirs = both(name)
    long = " ".join(corpus()[:400])
    assert len(ours.tokenize(long)) > 2000
    texts = [long, long[:3000], "x " * 2000, "word" * 80 + " " + long]
    # "a " is one token: lengths around each boundary of longest-first (one text alone cut, both to half).
    sizes = (0, 1, 2, 100, 126, 127, 128, 200, 252, 253, 254, 255, 256, 300, 507, 508, 509, 510, 511, 600)
    pairs = [("a " * n, "b " * m) for n in sizes for m in sizes]
    pairs += [(long, "short"), ("short", long), (long, long), (long, long[:1500]), (long[:1500], long)]
    assert_same(ours, theirs, texts + pairs)
    assert max(len(e.ids) for e in ours.encode_batch(texts + pairs)) == MODELS[name][1]


_text = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(AWKWARD), st.characters(exclude_categories=["Cs"])),
                 max_size=12).map("".join)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=300)
@given(a=_text, b=_text)
def test_generated_unicode_text_and_pairs_get_the_ids_tokenizers_gives(name, a, b):
    assert_same(*both(name), [a, b, (a, b), (b, a)])


def test_a_lone_surrogate_is_refused_as_tokenizers_refuses_it():
    ours, theirs = both("bge-small")
    with pytest.raises(TypeError):
        theirs.encode("caf\udce9")
    with pytest.raises(ValueError, match="surrogate at 3"):
        ours.encode("caf\udce9")


def _code_point_chunks(size: int = 4096):
    """Every code point but the surrogates, in strings of ``size``, each between two "a"s (a starter,
    so NFD reorders no mark across code points)."""
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(points), size):
        yield "a" + "a".join(points[i:i + size]) + "a"


@pytest.mark.parametrize("options", [{}, {"clean_text": True}, {"handle_chinese_chars": True},
                                     {"strip_accents": True}, {"lowercase": True}])
def test_every_code_point_normalizes_as_tokenizers_normalizes_it(options):
    """Each step of the BertNormalizer alone (and all of them, as vxmem's files set them)."""
    if options:
        options = {"clean_text": False, "handle_chinese_chars": False, "strip_accents": False, "lowercase": False,
                   **options}
    ours, theirs = BertNormalizer(**options), tokenizers.normalizers.BertNormalizer(**options)
    for chunk in _code_point_chunks():
        want = theirs.normalize_str(chunk)
        if ours(chunk) != want:
            bad = [c for c in chunk if ours(c) != theirs.normalize_str(c)]
            pytest.fail(f"{len(bad)} code points differ, first U+{ord(bad[0]):04X}")


def test_every_code_point_splits_as_the_bert_pre_tokenizer_splits_it():
    theirs = tokenizers.pre_tokenizers.BertPreTokenizer()
    for chunk in _code_point_chunks():
        assert pre_tokenize(chunk) == [w for w, _ in theirs.pre_tokenize_str(chunk)]


def _spec() -> dict:
    return json.loads(BGE_SMALL.files()["tokenizer.json"].read_text(encoding="utf-8"))


def test_a_bert_processing_file_gets_the_ids_tokenizers_gives():
    spec = _spec()
    spec["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
    theirs = tokenizers.Tokenizer.from_str(json.dumps(spec))
    theirs.enable_truncation(max_length=64)
    texts = list(corpus()[:300])
    assert_same(WordPieceTokenizer(spec, max_length=64), theirs, texts + list(zip(texts, reversed(texts))))


def _edit(path: str, value):
    def edit(spec: dict) -> dict:
        out = copy.deepcopy(spec)
        *parents, last = path.split(".")
        node = out
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
        return out
    return edit


@pytest.mark.parametrize("edit", [
    _edit("normalizer", {"type": "Lowercase"}),
    _edit("normalizer", None),
    _edit("normalizer.strip_accents_first", True),
    _edit("pre_tokenizer", {"type": "Whitespace"}),
    _edit("model.type", "BPE"),
    _edit("post_processor", {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]}),
    _edit("post_processor", None),
    _edit("post_processor.single.1", {"Sequence": {"id": "B", "type_id": 0}}),
    _edit("added_tokens.0.normalized", True),
    _edit("added_tokens.1.lstrip", True),
], ids=["normalizer", "no-normalizer", "normalizer-option", "pre-tokenizer", "model", "post-processor",
        "no-post-processor", "template", "normalized-added-token", "stripping-added-token"])
def test_a_tokenizer_file_of_another_kind_is_refused_not_tokenized_differently(edit):
    with pytest.raises(UnsupportedTokenizerError, match="does not implement"):
        WordPieceTokenizer(edit(_spec()))


def test_a_max_length_with_no_room_for_a_text_is_refused():
    with pytest.raises(ValueError, match="max_length"):
        WordPieceTokenizer(_spec(), max_length=3)
    theirs = tokenizers.Tokenizer.from_str(json.dumps(_spec()))
    theirs.enable_truncation(max_length=4)  # room for one token of a pair, which goes to the second text
    assert_same(WordPieceTokenizer(_spec(), max_length=4), theirs, [("hello", "world"), "hello world"])


def _ranges(points) -> str:
    runs: list[list[int]] = []
    for c in sorted(points):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return " ".join(f"{a:X}" if a == b else f"{a:X}-{b:X}" for a, b in runs)


def write_tables(path: Path) -> None:
    """Write vxmem/models/unicode_tables.py: every code point through tokenizers' BertNormalizer
    (each step alone) and BertPreTokenizer."""
    norm = tokenizers.normalizers.BertNormalizer
    clean = norm(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    strip = norm(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    lower = norm(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=True)
    split = tokenizers.pre_tokenizers.BertPreTokenizer()
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    tables = {
        "REMOVED": _ranges(ord(c) for c in points if clean.normalize_str(c) == ""),
        "NONSPACING_MARKS": _ranges(ord(c) for c in points if strip.normalize_str(c) == ""),
        "PUNCTUATION": _ranges(ord(c) for c in points if len(split.pre_tokenize_str(f"a{c}a")) == 3),
        "NOT_DECOMPOSED": _ranges(ord(c) for c in points
                                  if unicodedata.normalize("NFD", c) != c and strip.normalize_str(c) == c),
        "LOWERCASE": " ".join(f"{ord(c):X}:{','.join(f'{ord(x):X}' for x in lower.normalize_str(c))}"
                              for c in points if lower.normalize_str(c) != c.lower()),
    }
    body = [unicode_tables.__doc__ and f'"""{unicode_tables.__doc__}"""\n']
    for name, ranges in tables.items():
        body.append(f"\n{COMMENTS[name]}\n{name} = (\n")
        body.extend(f'    "{line} "\n' for line in textwrap.wrap(ranges, 104))
        body.append(")\n")
    path.write_text("".join(filter(None, body)), encoding="utf-8")


COMMENTS = {
    "REMOVED": "# Removed by clean_text: Cc (but tab, newline, carriage return), Cf, Co, and U+FFFD.",
    "NONSPACING_MARKS": "# Dropped by strip_accents after NFD: the nonspacing marks (Mn).",
    "PUNCTUATION": "# Split off by the pre-tokeniser, each its own word (ASCII punctuation, which includes symbols, "
                   "and P*).",
    "NOT_DECOMPOSED": "# Left whole by strip_accents, though Python's unicodedata has a canonical decomposition "
                      "for them\n# (newer than the crate's tables; no vocabulary vxmem reads has them or their parts).",
    "LOWERCASE": "# Lowercase mappings where the crate (Unicode 16) and Python 3.11 (Unicode 14) differ: CODE:LOWER.",
}

if __name__ == "__main__":
    write_tables(ROOT / "vxmem" / "models" / "unicode_tables.py")
    sys.exit(0)
