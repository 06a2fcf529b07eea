"""recall()'s options are declared once (RecallOptions) and every facade, schema and pass-on list is made from it;
MEMORY_SETTING is the memory's setting and ANY_SESSION every session."""

import asyncio
import copy
import dataclasses
import inspect
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import pytest

import vxmem
from vxmem import ANY_SESSION, MEMORY_SETTING, AsyncVectrix, ConversationMemory, RecallOptions, RecallRequest, Vectrix
from vxmem.core.options import option, takes
from vxmem.memory.reading import RECALL_ARGS
from vxmem.serve import schemas

from helpers import ROOT, T0, WordHashEmbedder

DECLARED = dataclasses.fields(RecallOptions)
FACADES = [ConversationMemory.recall, Vectrix.recall, AsyncVectrix.recall]


@pytest.mark.parametrize("verb", FACADES, ids=["memory", "vectrix", "async"])
def test_every_facade_takes_exactly_the_declared_options(verb):
    params = list(inspect.signature(verb).parameters.values())
    assert [p.name for p in params[:2]] == ["self", "query"]
    assert [(p.name, p.default) for p in params[2:]] == [(f.name, f.default) for f in DECLARED]
    for f in DECLARED:  # help() lists each option with the declaration's meaning
        assert f":param {f.name}: {f.metadata['doc'][:30]}" in " ".join(verb.__doc__.split())


def test_help_on_recall_shows_every_option_and_its_default():
    shown = " ".join(inspect.getdoc(Vectrix().recall).split()) + str(inspect.signature(Vectrix().recall))
    assert "min_relevance: float | vxmem.core.sentinels.MemorySetting | None = MEMORY_SETTING" in shown
    assert "limit: int = 10" in shown and ":param preset:" in shown and "Relevance, blended" in shown


def test_the_async_recall_stays_a_coroutine_function():
    assert inspect.iscoroutinefunction(AsyncVectrix.recall)


def test_options_bind_by_position_as_in_the_spec_and_a_wrong_one_names_recall(make_db):
    db = make_db(embedder=WordHashEmbedder())
    db.remember("tea in the morning", session="a", timestamp=T0)
    db.remember("tea at night", session="b", timestamp=T0)
    assert [r.text for r in db.recall("tea", "a", 5, now=T0)] == ["tea in the morning"]
    with pytest.raises(TypeError, match=r"recall\(\) got an unexpected keyword argument 'sesion'"):
        db.recall("tea", sesion="a")
    with pytest.raises(TypeError, match=r"recall\(\) got multiple values for argument 'session'"):
        db.recall("tea", "a", session="b")


def test_context_passes_on_every_declared_option_it_does_not_take_itself():
    own = {"session", "limit", "token_budget", "now", "user", "filter"}
    assert set(RECALL_ARGS) == {f.name for f in DECLARED} - own | {"blend"}


@pytest.mark.parametrize("model", [schemas.RecallBody, schemas.ContextBody], ids=["recall", "context"])
def test_the_servers_schemas_hold_every_option_with_its_declared_default(model):
    fields = model.model_fields
    for f in DECLARED:
        if model is schemas.ContextBody and f.name in ("limit", "token_budget"):
            continue  # context's own, with its own defaults
        want = None if f.default is MEMORY_SETTING else f.default
        assert fields[f.name].default == (list(want) if isinstance(want, tuple) else want), f.name
    for name in ("rerank", "recency_from", "preset", "min_relevance"):
        assert "MEMORY_SETTING" not in fields[name].description, name
        assert fields[name].description.endswith("(null: the server's setting)"), name
    assert model.model_json_schema()["properties"]["exclude_ids"]["description"] == "memories to leave out."


@pytest.mark.subprocess
def test_an_option_added_to_the_declaration_reaches_every_facade(tmp_path):
    # A copy of the package whose declaration has one option more, and whose request carries it.
    shutil.copytree(ROOT / "vxmem", tmp_path / "vxmem", ignore=shutil.ignore_patterns("__pycache__"))
    request = tmp_path / "vxmem" / "memory" / "request.py"
    text = request.read_text()
    anchor = "\n\n# The options whose MEMORY_SETTING"
    assert anchor in text and "    preset: str | None = None\n" in text
    text = text.replace(anchor, '\n    extra: int = option(7, "an option added to the declaration alone.")' + anchor)
    request.write_text(text.replace("    preset: str | None = None\n", "    preset: str | None = None\n"
                                                                       "    extra: int = 7\n"))
    child = """
        import asyncio, inspect
        from vxmem import AsyncVectrix, ConversationMemory, Vectrix
        from vxmem.memory.reading import RECALL_ARGS
        from vxmem.serve import schemas
        import vxmem; assert vxmem.__file__.startswith(ROOT), vxmem.__file__
        for verb in (ConversationMemory.recall, Vectrix.recall, AsyncVectrix.recall):
            assert inspect.signature(verb).parameters["extra"].default == 7
            assert ":param extra: an option added to the declaration alone." in verb.__doc__
        assert "extra" in RECALL_ARGS
        for model in (schemas.RecallBody, schemas.ContextBody):
            assert model.model_fields["extra"].default == 7
        assert schemas.RecallBody.model_json_schema()["properties"]["extra"]["default"] == 7
        db = Vectrix(embedder="hashing")
        db.remember("tea", timestamp=0)
        assert [r.text for r in db.recall("tea", now=1, extra=3)] == ["tea"]
        assert [r.text for r in asyncio.run(AsyncVectrix.of(db).recall("tea", now=1, extra=3))] == ["tea"]
        print("reached")
    """
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = f"ROOT = {str(tmp_path)!r}\n" + textwrap.dedent(child)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "reached", out.stderr


def test_takes_makes_a_verb_of_any_declaration():
    @dataclasses.dataclass(frozen=True)
    class Options:
        depth: int = option(2, "how deep.")

    class Thing:
        @takes(Options)
        def look(self, query, options):
            """Look.

            :param query: at what."""
            return query, options.depth

    assert Thing().look("x", 5) == ("x", 5) and Thing().look("x") == ("x", 2)
    assert str(inspect.signature(Thing.look)) == "(self, query: str, depth: int = 2)"
    assert Thing.look.__doc__ == "Look.\n\n:param query: at what.\n:param depth: how deep."
    with pytest.raises(TypeError, match="dataclass"):
        takes(dict)


# ---------------------------------------------------------------- MEMORY_SETTING and ANY_SESSION


def _floored(make_db):
    db = make_db(embedder=WordHashEmbedder(), min_relevance=0.99)
    db.remember("alpha beta gamma", session="s", timestamp=T0)
    db.remember("something else entirely", session="s", timestamp=T0)
    return db


def test_min_relevance_none_turns_the_memorys_floor_off_in_one_call(make_db):
    db = _floored(make_db)
    floored = db.recall("alpha beta gamma", now=T0, mode="dense")
    assert [r.text for r in floored] == ["alpha beta gamma"]
    assert [r.id for r in db.recall("alpha beta gamma", now=T0, mode="dense", min_relevance=MEMORY_SETTING)] == [
        r.id for r in floored]
    unfloored = db.recall("alpha beta gamma", now=T0, mode="dense", min_relevance=None)
    assert len(unfloored) == 2
    plain = make_db(embedder=WordHashEmbedder())
    plain.remember("alpha beta gamma", session="s", timestamp=T0)
    plain.remember("something else entirely", session="s", timestamp=T0)
    assert [r.score for r in unfloored] == [r.score for r in plain.recall("alpha beta gamma", now=T0, mode="dense")]
    block = db.context("alpha beta gamma", session="s", recent_turns=0, now=T0, mode="dense", min_relevance=None)
    assert len(block.recalled) == 2


def test_a_request_keeps_the_memorys_floor_apart_from_no_floor(make_db):
    db = _floored(make_db)
    assert RecallRequest("x").min_relevance is MEMORY_SETTING
    assert RecallRequest("x", min_relevance=None).min_relevance is None
    assert len(db.memory.recall_request(RecallRequest("alpha beta gamma", now=T0, mode="dense"))) == 1
    assert len(db.memory.recall_request(RecallRequest("alpha beta gamma", now=T0, mode="dense",
                                                      min_relevance=None))) == 2


@pytest.mark.parametrize("name", ["rerank", "recency_from", "preset", "hybrid_weight"])
def test_memory_setting_and_none_mean_the_same_where_none_has_no_other_meaning(make_db, name):
    db = make_db(embedder=WordHashEmbedder(), preset="fast")
    for i, text in enumerate(["tea in the morning", "tea at night", "coffee at noon"]):
        db.remember(text, session="s", timestamp=T0 - i * 86400)
    ranked = {repr(v): [(r.id, r.score) for r in db.recall("tea", now=T0, **{name: v})]
              for v in (MEMORY_SETTING, None)}
    assert ranked["MEMORY_SETTING"] == ranked["None"] == [(r.id, r.score) for r in db.recall("tea", now=T0)]


def test_any_session_is_every_session_as_none_is(make_db):
    db = make_db(embedder=WordHashEmbedder())
    for session in ("a", "b", None):
        db.remember(f"tea with {session}", session=session, timestamp=T0)
    every = [r.id for r in db.recall("tea", session=ANY_SESSION, now=T0)]
    assert len(every) == 3 and every == [r.id for r in db.recall("tea", session=None, now=T0)]
    assert len(db.context("tea", session=ANY_SESSION, now=T0).recalled) == 3
    assert len(asyncio.run(AsyncVectrix.of(db).recall("tea", session=ANY_SESSION, now=T0))) == 3
    with pytest.raises(TypeError, match="session"):
        db.turns(ANY_SESSION)  # a transcript is one session's; None there is the unnamed one
    assert db.forget(session=ANY_SESSION) == 3


def test_the_sentinels_are_public_named_and_stay_themselves():
    assert {"ANY_SESSION", "MEMORY_SETTING", "RecallOptions"} <= set(vxmem.__all__)
    for value, name in ((ANY_SESSION, "ANY_SESSION"), (MEMORY_SETTING, "MEMORY_SETTING")):
        assert repr(value) == str(value) == name
        assert pickle.loads(pickle.dumps(value)) is value and copy.deepcopy(value) is value
    assert RecallRequest("x", session=ANY_SESSION).session is None


def test_a_server_request_that_leaves_min_relevance_out_or_null_keeps_the_servers_floor(make_db):
    from vxmem.serve.service import MemoryService

    db = _floored(make_db)
    for text in ("alpha beta gamma", "something else entirely"):
        db.remember(text, timestamp=T0, user="default", session="default/s")
    svc = MemoryService(AsyncVectrix.of(db))

    async def recalled(**given):
        body = schemas.RecallBody(query="alpha beta gamma", now=T0, mode="dense", **given)
        return [r.text for r in (await svc.recall(body)).results]

    assert asyncio.run(recalled()) == ["alpha beta gamma"]  # the server's floor, 0.99
    assert asyncio.run(recalled(min_relevance=None)) == ["alpha beta gamma"]
    assert len(asyncio.run(recalled(min_relevance=-1))) == 2
