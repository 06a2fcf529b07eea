"""Fuzzing every public call.

Each call either succeeds or raises ValueError / TypeError / KeyError with a message; a
call that fails leaves the database exactly as it was (the vx_docs, vx_counters and
vx_meta tables, read through a second connection, and the handle's own view of them).
A call that succeeds leaves the handle agreeing with the file, and every read still works.
"""

import json
import math
import os
import shutil
import sqlite3
import tempfile
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vxmem import KINDS, OUTCOMES, Vectrix
from vxmem.memory import K_KIND, K_SESSION

FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NOW = 2_000_000.0
ACCEPTED = (ValueError, TypeError, KeyError)

# ------------------------------------------------------------------ strategies

SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
CONTROL = st.text(st.characters(categories=["Cc"]), min_size=1, max_size=8)
WHITESPACE = st.text(st.sampled_from(" \t\n\r\x0b\x0c\u00a0\u2003"), max_size=5)
HUGE = st.sampled_from(["x" * 100_000, "word " * 20_000, "é" * 50_000])
NON_STR = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=5), st.booleans(),
                    st.lists(st.text(max_size=3), max_size=2), st.just(object()))
PLAIN = st.text(max_size=40)
TEXT = st.one_of(PLAIN, PLAIN, st.just(""), WHITESPACE, CONTROL, SURROGATES,
                 st.tuples(PLAIN, SURROGATES).map("".join), HUGE, NON_STR)

MEMORY_IDS = ["t-a-0", "t-a-1", "t-a-2", "t-b-0", "t-b-1", "f-a", "p-a", "f-b", "t-exp"]
IDS = st.one_of(st.sampled_from(MEMORY_IDS + ["doc-1", "no-such-id"]), PLAIN, SURROGATES, NON_STR)
SESSION = st.one_of(st.sampled_from(["a", "b", "c"]), st.none(), PLAIN, SURROGATES, NON_STR)

JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                        PLAIN)
JSON = st.recursive(JSON_SCALAR, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(PLAIN, inner, max_size=3), max_leaves=10)
NOT_JSON = st.one_of(st.floats(allow_nan=True).filter(lambda f: not math.isfinite(f)),
                     st.sets(st.integers(), max_size=2),
                     st.binary(max_size=3), st.just(object()), st.just(10**5000), SURROGATES,
                     st.complex_numbers(max_magnitude=10))


def _deep(n):
    d = {}
    for _ in range(n):
        d = {"k": d}
    return d


METADATA = st.one_of(
    st.none(), st.dictionaries(PLAIN, JSON, max_size=4),
    st.dictionaries(st.sampled_from(["_vx_kind", "_vx_session", "_vx_turn", "_vx_", "_vx_anything"]), JSON,
                    min_size=1, max_size=2),
    st.dictionaries(PLAIN, NOT_JSON, min_size=1, max_size=2),
    st.dictionaries(st.one_of(st.integers(), st.tuples(st.integers()), st.none(), SURROGATES), JSON,
                    min_size=1, max_size=2),
    st.integers(0, 60).map(_deep), st.lists(JSON, max_size=2), PLAIN, st.integers(),
)

TZ = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
TIME = st.one_of(
    st.floats(-1e12, 1e12), st.floats(), st.integers(-10**30, 10**30), st.integers(0, 4 * 10**9),
    st.datetimes(), st.datetimes(timezones=TZ), st.just(datetime.min), st.just(datetime.max),
    st.just(datetime.min.replace(tzinfo=timezone(timedelta(hours=5)))),
    st.just(datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))),
    st.dates(), st.datetimes().map(datetime.isoformat), st.datetimes(timezones=TZ).map(datetime.isoformat),
    st.sampled_from(["2024-01-01", "2024-13-01", "yesterday", "", "9999-12-31T23:59:59-23:59"]),
    st.booleans(), NON_STR,
)
COUNT = st.one_of(st.integers(-3, 50), st.integers(-10**20, 10**30), st.booleans(), st.floats(), st.none(),
                  PLAIN, st.just(float("inf")))
NUMBER = st.one_of(st.none(), st.floats(), st.integers(-10**20, 10**20), st.booleans(), PLAIN)
KIND = st.one_of(st.sampled_from(KINDS), st.none(), PLAIN, st.integers(), SURROGATES)
KINDS_ARG = st.one_of(st.lists(KIND, max_size=4), st.lists(st.sampled_from(KINDS), min_size=1, max_size=3),
                      st.sampled_from(KINDS), st.none(), st.integers(), st.just(()), PLAIN)
OUTCOME = st.one_of(st.sampled_from(OUTCOMES), PLAIN, NON_STR)
BOOL = st.one_of(st.booleans(), st.none(), st.integers(-1, 2), PLAIN)
IDS_ARG = st.one_of(st.lists(IDS, max_size=4), IDS, st.sets(st.sampled_from(MEMORY_IDS), max_size=3))
FILTER = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["_vx_kind", "_vx_session", "_vx_turn", "colour", ""]) | PLAIN,
                    st.one_of(JSON_SCALAR, st.lists(JSON_SCALAR, max_size=3), NOT_JSON, st.lists(JSON, max_size=2)),
                    max_size=3),
    NON_STR, st.lists(PLAIN, max_size=2),
)


def _summarizer(kind):
    def summarize(items):
        texts = [i["text"] for i in items]
        return {
            "good": [" ".join(texts)],
            "empty": [],
            "string": " ".join(texts),
            "none": None,
            "ints": [1, 2],
            "blank": ["   "],
            "surrogate": ["fact \ud800"],
            "mixed": ["fine fact", 3],
            "raise": (_ for _ in ()).throw(ValueError("summarizer refused")),
        }[kind]

    return summarize


SUMMARIZER = st.one_of(st.sampled_from(["good", "empty", "string", "none", "ints", "blank", "surrogate", "mixed"])
                       .map(_summarizer), NON_STR)

# ------------------------------------------------------------------ the harness


@pytest.fixture(scope="module")
def template(tmp_path_factory, hashing_embedder):
    """A small memory database, copied afresh for every example."""
    path = str(tmp_path_factory.mktemp("fuzz") / "template.db")
    with Vectrix(path, embedder=hashing_embedder) as db:
        for i in range(3):
            db.remember(f"alice turn {i} about dark mode and tea", session="a", id=f"t-a-{i}", timestamp=1000 + i)
        for i in range(2):
            db.remember(f"bob turn {i} about pdf reports", session="b", id=f"t-b-{i}", timestamp=1100 + i,
                        role="assistant")
        db.remember("alice lives in paris", session="a", kind="fact", id="f-a", timestamp=1200,
                    metadata={"colour": "blue", "n": 3})
        db.remember("alice's name is alice", session="a", pinned=True, id="p-a", timestamp=1300)
        db.remember("bob likes csv", session="b", kind="fact", id="f-b", timestamp=1400)
        db.remember("an old turn that expired", session="a", id="t-exp", timestamp=10, ttl_days=1)
        db.feedback("f-b", "corrected", correction="bob likes parquet, not csv", timestamp=1500)
        db.feedback("t-a-1", "useful", timestamp=1600)
        db.add(["a plain document, not a memory"], metadata={"colour": "red"}, ids=["doc-1"])
    return path


@contextmanager
def fresh(template, embedder):
    d = tempfile.mkdtemp(prefix="vxfuzz")
    path = os.path.join(d, "f.db")
    shutil.copy(template, path)
    db = Vectrix(path, embedder=embedder, exact_threshold=4)
    try:
        yield db, path
    finally:
        db.close()
        shutil.rmtree(d, ignore_errors=True)


def dump(path):
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("vx_docs", "vx_counters", "vx_meta")}
    finally:
        conn.close()


def view(db):
    return [(r.id, r.text, r.metadata) for r in db.scan()]


def _reads_still_work(db, path):
    """The handle agrees with the file, and every read of every memory still works."""
    conn = sqlite3.connect(path)
    try:
        rows = [(id, text, json.loads(meta)) for id, text, meta in
                conn.execute("SELECT id, text, metadata FROM vx_docs ORDER BY rowid")]
    finally:
        conn.close()
    assert view(db) == rows
    sessions = set()
    for r in db.scan():
        session = r.metadata.get(K_SESSION)
        if session is None or isinstance(session, str):  # a plain document may hold any JSON there
            sessions.add(session)
        ts = r.metadata.get("_vx_ts")
        if r.metadata.get(K_KIND) in KINDS and isinstance(ts, (int, float)) and not isinstance(ts, bool):
            db.history(r.id)
        else:  # some reserved keys written through the plain collection do not make a memory
            with pytest.raises(KeyError, match="no memory"):
                db.history(r.id)
    db.recall("dark mode", limit=5, now=NOW)
    for s in sessions:
        db.recall("dark mode", session=s, limit=5, now=NOW)
        db.context("dark mode", session=s, token_budget=300, now=NOW)
        db.turns(s, now=NOW)


def attempt(db, path, call):
    """Run ``call``; check the contract whichever way it goes. Returns (ok, result or error)."""
    before, before_view = dump(path), view(db)
    try:
        out = call()
    except ACCEPTED as exc:
        msg = str(exc.args[0]) if exc.args else ""
        assert msg.strip(), f"{type(exc).__name__} without a message"
        report = getattr(exc, "report", None)
        if report is None or report.batches == 0:  # consolidate keeps batches it finished, by design
            assert dump(path) == before, f"failed call ({exc!r}) changed the database"
            assert view(db) == before_view, f"failed call ({exc!r}) changed the handle's view"
        _reads_still_work(db, path)
        return False, exc
    _reads_still_work(db, path)
    return True, out


# ------------------------------------------------------------------ one test per call
#
# Drawing every argument wild would make almost every call fail on its first bad
# argument. So an example is all-valid, or breaks exactly one argument, or (now and then)
# draws everything wild. "Valid" still means far past and future, odd Unicode, nesting.

VALID_TEXT = st.one_of(PLAIN.filter(str.strip), CONTROL.map(lambda c: "a" + c), HUGE,
                       st.text(st.characters(codec="utf-8"), min_size=1, max_size=30).filter(str.strip))
VALID_TIME = st.one_of(st.floats(0, 4e9), st.integers(-62_000_000_000, 253_000_000_000), st.datetimes(),
                       st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 1, 1), timezones=TZ),
                       st.datetimes(timezones=TZ).map(datetime.isoformat)
                       .filter(lambda s: s[:4] not in ("0001", "9999")),
                       st.dates(), st.none())
VALID_SESSION = st.one_of(st.sampled_from(["a", "b", "c"]), st.none(), PLAIN)
VALID_COUNT = st.one_of(st.integers(1, 50), st.integers(1, 10**30))
VALID_IDS = st.sampled_from(MEMORY_IDS + ["doc-1", "no-such-id"])
VALID_METADATA = st.one_of(st.none(), st.dictionaries(PLAIN.filter(lambda k: not k.startswith("_vx_")), JSON,
                                                      max_size=4), st.integers(0, 30).map(_deep))
VALID_NUMBER = st.one_of(st.none(), st.floats(0.001, 1e6), st.integers(1, 10**6))
VALID_BOOL = st.booleans()
VALID_KINDS = st.one_of(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3), st.sampled_from(KINDS))


def call_args(**specs):
    """Keyword arguments from ``name=(valid, wild)`` strategy pairs."""
    @st.composite
    def build(draw):
        mode = draw(st.sampled_from(["valid", "one", "one", "wild"]))
        broken = draw(st.sampled_from(sorted(specs))) if mode == "one" else None
        out = {}
        for name, (valid, wild) in specs.items():
            out[name] = draw(st.one_of(valid, wild) if mode == "wild" else wild if name == broken else valid)
        return out
    return build()


FUZZ_MANY = settings(FUZZ, max_examples=80)
_REMEMBER = dict(text="hello", session="a", role="user", turn=None, timestamp=5000, pinned=False, kind=None,
                 metadata=None, id=None, ttl_days=None, check=None)


@FUZZ_MANY
@given(kw=call_args(text=(VALID_TEXT, TEXT), session=(VALID_SESSION, SESSION),
                    role=(st.sampled_from(["user", "assistant"]), st.one_of(PLAIN, NON_STR)),
                    turn=(st.none() | st.integers(0, 10**30), COUNT), timestamp=(VALID_TIME, TIME),
                    pinned=(VALID_BOOL, BOOL), kind=(st.none() | st.sampled_from(KINDS), KIND),
                    metadata=(VALID_METADATA, METADATA), id=(st.none() | st.uuids().map(str), IDS),
                    ttl_days=(VALID_NUMBER, NUMBER), check=(st.none() | st.just(False), BOOL)))
@example(kw=dict(_REMEMBER, timestamp=1e300))          # found: stored, then history() overflowed
@example(kw=dict(_REMEMBER, timestamp=-10**15))        # found: likewise in the far past
@example(kw=dict(_REMEMBER, turn=10**30))              # found: OverflowError from SQLite
@example(kw=dict(_REMEMBER, metadata=_deep(33)))       # nested past the limit
def test_fuzzed_remember_stores_exactly_what_it_was_given_or_changes_nothing(template, hashing_embedder, kw):
    with fresh(template, hashing_embedder) as (db, path):
        ok, out = attempt(db, path, lambda: db.remember(**kw))
        if ok:
            got = db.get(out)
            assert got.text == kw["text"]
            assert {k: v for k, v in got.metadata.items() if not k.startswith("_vx_")} == (kw["metadata"] or {})
            db.close()
            with Vectrix(path, embedder=hashing_embedder) as again:  # and it reads back the same
                assert again.get(out).text == kw["text"]
                assert again.get(out).metadata == got.metadata


@FUZZ
@given(kw=call_args(id=(VALID_IDS, IDS), outcome=(st.sampled_from(OUTCOMES), OUTCOME),
                    correction=(st.none() | VALID_TEXT, TEXT), timestamp=(VALID_TIME, TIME)))
def test_fuzzed_feedback_succeeds_or_changes_nothing(template, hashing_embedder, kw):
    if kw["correction"] is not None and kw["outcome"] in ("useful", "dead_end") and kw["id"] in MEMORY_IDS:
        kw["outcome"] = "corrected"  # keep the all-valid draws valid
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.feedback(**kw))


RECALL_ARGS = dict(
    session=(VALID_SESSION, SESSION), limit=(VALID_COUNT, COUNT), score_gap=(VALID_NUMBER, NUMBER),
    kinds=(VALID_KINDS, KINDS_ARG), include_superseded=(VALID_BOOL, BOOL),
    mode=(st.sampled_from([None, "dense"]), PLAIN), now=(VALID_TIME, TIME),
    exclude_ids=(st.lists(VALID_IDS, max_size=3), IDS_ARG))


@FUZZ_MANY
@given(query=st.one_of(VALID_TEXT, TEXT),
       kw=call_args(token_budget=(st.none() | VALID_COUNT, COUNT), **RECALL_ARGS))
def test_fuzzed_recall_succeeds_or_changes_nothing(template, hashing_embedder, query, kw):
    with fresh(template, hashing_embedder) as (db, path):
        ok, out = attempt(db, path, lambda: db.recall(query, **kw))
        if ok:
            assert len(out) <= kw["limit"]


@FUZZ_MANY
@given(query=st.one_of(VALID_TEXT, TEXT),
       kw=call_args(session=(VALID_SESSION, SESSION), token_budget=(VALID_COUNT, COUNT),
                    recent_turns=(st.integers(0, 10**30), COUNT), limit=(VALID_COUNT, COUNT), now=(VALID_TIME, TIME)),
       extra=st.dictionaries(st.sampled_from(["kinds", "score_gap", "include_superseded", "mode", "exclude_ids",
                                              "bogus"]), st.one_of(KINDS_ARG, NUMBER, BOOL), max_size=2))
def test_fuzzed_context_succeeds_or_changes_nothing(template, hashing_embedder, query, kw, extra):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.context(query, **kw, **extra))


@FUZZ
@given(kw=call_args(session=(VALID_SESSION, SESSION), kinds=(VALID_KINDS, KINDS_ARG),
                    older_than=(st.one_of(VALID_NUMBER, VALID_TIME.filter(lambda t: isinstance(t, datetime))),
                                st.one_of(NUMBER, TIME)),
                    ids=(st.none() | st.lists(VALID_IDS, max_size=3), st.none() | IDS_ARG),
                    superseded=(VALID_BOOL, BOOL), now=(VALID_TIME, TIME)))
def test_fuzzed_forget_succeeds_or_changes_nothing(template, hashing_embedder, kw):
    with fresh(template, hashing_embedder) as (db, path):
        ok, out = attempt(db, path, lambda: db.forget(**kw))
        if ok:
            assert isinstance(out, int) and out >= 0
            assert "doc-1" in db  # a plain document is never a memory to forget


@FUZZ
@given(now=st.one_of(VALID_TIME, TIME))
def test_fuzzed_expire_succeeds_or_changes_nothing(template, hashing_embedder, now):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.expire(now=now))


@FUZZ
@given(kw=call_args(session=(VALID_SESSION, SESSION),
                    summarize=(st.just(_summarizer("good")), SUMMARIZER),
                    keep_recent=(st.integers(0, 10**30), COUNT),
                    older_than=(st.one_of(VALID_NUMBER, VALID_TIME.filter(lambda t: isinstance(t, datetime))),
                                st.one_of(NUMBER, TIME)),
                    batch_turns=(VALID_COUNT, COUNT), delete=(VALID_BOOL, BOOL), pinned=(VALID_BOOL, BOOL),
                    now=(VALID_TIME, TIME)))
def test_fuzzed_consolidate_succeeds_or_changes_nothing(template, hashing_embedder, kw):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.consolidate(kw.pop("session"), kw.pop("summarize"), **kw))


@FUZZ
@given(kw=call_args(session=(VALID_SESSION, SESSION), limit=(st.none() | VALID_COUNT, COUNT),
                    now=(VALID_TIME, TIME)))
def test_fuzzed_turns_succeeds_or_changes_nothing(template, hashing_embedder, kw):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.turns(kw.pop("session"), **kw))


@FUZZ
@given(id=st.one_of(VALID_IDS, IDS))
def test_fuzzed_history_and_get_succeed_or_change_nothing(template, hashing_embedder, id):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.history(id))
        attempt(db, path, lambda: db.get(id))


@FUZZ
@given(kw=call_args(texts=(st.lists(VALID_TEXT, max_size=3), st.one_of(TEXT, st.lists(TEXT, max_size=3))),
                    metadata=(st.none() | VALID_METADATA, st.one_of(METADATA, st.lists(METADATA, max_size=3))),
                    ids=(st.none(), st.lists(IDS, max_size=3) | IDS)))
@example(kw=dict(texts=["0"], metadata={"_vx_kind": None}, ids=None))  # found: history() KeyError '_vx_ts'
@example(kw=dict(texts=["0"], metadata={"_vx_session": []}, ids=None))  # found: a session the memory cannot read
@example(kw=dict(texts=["0"], metadata={"_vx_turn": True, "_vx_kind": "turn", "_vx_ts": 1.0}, ids=None))
def test_fuzzed_add_succeeds_or_changes_nothing(template, hashing_embedder, kw):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.add(**kw))


@FUZZ
@given(query=st.one_of(VALID_TEXT, TEXT), limit=st.one_of(VALID_COUNT, COUNT), filter=FILTER)
def test_fuzzed_search_scan_and_count_succeed_or_change_nothing(template, hashing_embedder, query, limit, filter):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.search(query, limit=limit, filter=filter))
        attempt(db, path, lambda: list(db.scan(filter)))
        attempt(db, path, lambda: db.count(filter))


@FUZZ
@given(kw=call_args(id=(VALID_IDS, IDS), patch=(st.dictionaries(PLAIN, JSON, max_size=3), METADATA),
                    merge=(VALID_BOOL, BOOL)))
@example(kw=dict(id="f-b", patch={}, merge=False))  # found: history() of its correction raised KeyError
def test_fuzzed_update_metadata_succeeds_or_changes_nothing(template, hashing_embedder, kw):
    patch = kw["patch"]
    # Reserved keys are the memory layer's; a plain-collection write that sets them is out of scope here.
    if isinstance(patch, dict) and any(isinstance(k, str) and k.startswith("_vx_") for k in patch):
        kw["patch"] = {k: v for k, v in patch.items() if not (isinstance(k, str) and k.startswith("_vx_"))}
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.update_metadata(**kw))


@FUZZ
@given(ids=st.one_of(st.lists(VALID_IDS, max_size=3), IDS_ARG))
def test_fuzzed_delete_succeeds_or_changes_nothing(template, hashing_embedder, ids):
    with fresh(template, hashing_embedder) as (db, path):
        attempt(db, path, lambda: db.delete(ids))


@FUZZ
@given(settings_=st.fixed_dictionaries({}, optional={
    "half_life_days": NUMBER, "recency_weight": NUMBER, "feedback_weight": NUMBER,
    "feedback_half_life_days": NUMBER, "judge_candidates": COUNT,
    "ttl_days": st.one_of(st.none(), st.dictionaries(KIND, NUMBER, max_size=2), NON_STR),
    "exact_threshold": COUNT}))
def test_fuzzed_settings_open_a_working_memory_or_raise_a_clear_error(hashing_embedder, settings_):
    try:
        db = Vectrix(None, embedder=hashing_embedder, **settings_)
    except ACCEPTED as exc:
        assert exc.args and str(exc.args[0]).strip()
        return
    with db:
        db.remember("settings accepted", session="s", timestamp=1)
        assert len(db.recall("settings", session="s", now=2)) == 1


@FUZZ
@given(verdicts=st.one_of(st.lists(st.booleans(), max_size=4), st.lists(NON_STR, max_size=3), NON_STR, PLAIN,
                          st.just([True] * 7)))
def test_fuzzed_judge_verdicts_are_applied_or_the_remember_changes_nothing(template, hashing_embedder, verdicts):
    with fresh(template, hashing_embedder) as (db, path):
        db.memory.judge = lambda new, olds: verdicts
        attempt(db, path, lambda: db.remember("alice lives in london now", session="a", kind="fact",
                                              timestamp=5000))
