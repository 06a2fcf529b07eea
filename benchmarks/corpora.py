"""The texts, embedders and data sets the benchmarks share: one word list, seeded generators.

Every synthetic memory-like sentence is drawn from :data:`WORDS` (bench_memory's list, which
bench_peers had copied and then extended: figures measured before this module, bench_peers'
and the ``--scale`` rows', were on that longer list). The embedders here cost next to nothing,
so a benchmark that uses one times the memory layer and not a model.
"""

from __future__ import annotations

import glob
import json
import math
import os
import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT / "datasets"
SESSIONS = 50
DAY = 86400.0
T0 = 1_700_000_000.0
SPAN = 90 * DAY
DIM = 384

WORDS = (
    "dark light mode theme editor python rust meeting monday tuesday friday coffee tea flight "
    "berlin paris london tokyo hotel train invoice budget report deadline project alpha beta "
    "gamma release bug crash fix test deploy server database index query cache memory latency "
    "sister brother mother birthday gift cake recipe pasta pizza salad vegan allergy peanut "
    "doctor appointment dentist gym running swimming yoga marathon book novel author film "
    "music guitar piano concert ticket garden tomato rose dog cat vet walk weekend holiday "
    "beach mountain ski snow rain umbrella car bike bus commute office remote laptop phone "
    "password account email calendar reminder note idea plan goal habit sleep morning evening"
).split()
OPENERS = ("I prefer", "Remind me about", "We talked about", "Note that", "My", "Please remember the",
           "Yesterday I mentioned", "The plan for", "Don't forget", "I really like")


# ---------------------------------------------------------------------------- texts

def sentence(rng: np.random.Generator) -> str:
    """An opener and 8-19 words, with a full stop (bench_memory's memories)."""
    n = int(rng.integers(8, 20))
    words = rng.choice(len(WORDS), size=n)
    return f"{OPENERS[int(rng.integers(len(OPENERS)))]} " + " ".join(WORDS[w] for w in words) + "."


def query(rng: np.random.Generator) -> str:
    """``what about`` and 3-6 words."""
    words = rng.choice(len(WORDS), size=int(rng.integers(3, 7)))
    return "what about " + " ".join(WORDS[w] for w in words) + "?"


def short_sentence(rng: random.Random) -> str:
    """An opener and 5-12 words (bench_peers' memories and queries, and the ``--scale`` corpus)."""
    return f"{rng.choice(OPENERS)} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))


def bare_sentence(rng: random.Random, nonce: str = "") -> str:
    """6-14 words and no opener (bench_load's and bench_server's turns); ``nonce`` makes it unique."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + (f" [{nonce}]" if nonce else "")


# ---------------------------------------------------------------------------- embedders

class TrivialEmbedder:
    """crc32(text) picks two rows of a fixed table of random unit vectors: no model cost."""

    def __init__(self, dim: int = DIM, rows: int = 4096, seed: int = 7):
        t = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
        self.table = t / np.linalg.norm(t, axis=1, keepdims=True)
        self.rows = rows

    def __call__(self, texts: list[str]) -> np.ndarray:
        idx = np.fromiter((zlib.crc32(t.encode()) for t in texts), dtype=np.uint64, count=len(texts))
        return self.table[idx % self.rows] + self.table[(idx >> np.uint64(12)) % self.rows]


class WordsEmbedder:
    """Sum of fixed per-word random vectors (each seeded by the word's crc32) plus a per-text
    random part (seeded by the text's), L2-normalised; ``kind="random"``: the random part alone."""

    def __init__(self, kind: str = "words", noise: float = 0.35):
        self.kind = kind
        self.noise = noise
        self.vocab = {w: i for i, w in enumerate(dict.fromkeys(w.lower() for w in WORDS))}
        self.table = np.stack([np.random.default_rng(zlib.crc32(w.encode())).standard_normal(DIM)
                               for w in self.vocab]).astype(np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(zlib.crc32(t.encode())).standard_normal(DIM).astype(np.float32)
            if self.kind == "words":
                rows = [self.vocab[w] for w in t.lower().replace("'", " ").split() if w in self.vocab]
                v = self.table[rows].sum(axis=0) / math.sqrt(max(len(rows), 1)) + self.noise * v
            out[i] = v
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class Lookup:
    """An embedder that looks precomputed vectors up by text, inside every timed call.

    A text not among them (vxmem embeds one stored text at an open, to check that the
    embedder is the one that wrote the vectors) is embedded by ``fallback`` when one is given."""

    def __init__(self, texts: list[str], vecs: np.ndarray, fallback: Any = None):
        self.rows = {t: i for i, t in reversed(list(enumerate(texts)))}
        self.vecs = vecs
        self.fallback = fallback

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self.fallback is not None and any(t not in self.rows for t in texts):
            return np.stack([self.vecs[self.rows[t]] if t in self.rows else self.fallback([t])[0] for t in texts])
        return self.vecs[[self.rows[t] for t in texts]]


def make_embedder(name: str) -> Any:
    """``trivial`` (:class:`TrivialEmbedder`), ``hashing`` or ``default`` (bge-small on onnxruntime)."""
    if name == "trivial":
        return TrivialEmbedder()
    if name == "hashing":
        from vxmem.models.embed import HashingEmbedder

        return HashingEmbedder()
    if name == "default":
        from vxmem.models.embed import get_embedder

        return get_embedder("bge-small")
    raise SystemExit(f"unknown embedder {name!r}; expected default, trivial or hashing")


# ---------------------------------------------------------------------------- data sets

def synthetic_datasets(pattern: str = "datasets/*.jsonl") -> list[str]:
    """The shipped synthetic data sets (a glob relative to the repository's root, or absolute)."""
    if pattern == "none":
        return []
    return sorted(glob.glob(pattern if os.path.isabs(pattern) else str(ROOT / pattern)))


def locomo_turns(path: str) -> list[str]:
    """Every turn's text of a LoCoMo JSON file (not shipped), in order."""
    from vxmem.workbench.datasets import load_locomo

    return [e.text for conv in load_locomo(path) for e in conv.events if e.type == "turn"]


def scale_corpus(data: str) -> tuple[dict[str, list[str]], np.ndarray, Lookup]:
    """The texts, their vectors and the embedder over them of a ``bench_memory --scale`` directory."""
    with open(os.path.join(data, "texts.json")) as f:
        t = json.load(f)
    vecs = np.load(os.path.join(data, "vecs.npy"))
    return t, vecs, Lookup(t["corpus"] + t["queries"] + t["writes"], vecs)


def exact_top10(db: Any, qv: np.ndarray) -> list[set[str]]:
    """Per query vector, the ids whose exact cosine reaches the 10th best over every live row
    of ``db`` (ties at the 10th count as found)."""
    with db.engine.locked() as m:
        live = m.live_positions()
        sims = qv @ m.vectors(live).T
        ids = [m.ids[p] for p in live]
    thr = np.partition(sims, -10, axis=1)[:, -10] - 1e-5
    return [{ids[j] for j in np.flatnonzero(sims[i] >= thr[i])} for i in range(len(qv))]
