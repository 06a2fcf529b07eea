"""Export and restore: a database leaves as JSON Lines with every memory's history, and comes
back answering exactly as it did; a file that is not whole is refused and nothing is written."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vxmem import DatabaseLockedError, ExportFileError, Vectrix
from vxmem.memory.rules import RuleKeyValueJudge, RuleSummarizer
from vxmem.store.portable.export import EXPORT_VERSION, new_counts, tally
from vxmem.workbench.datasets.jsonl import load_jsonl

from helpers import DAY, ROOT, T0, WordHashEmbedder

WORDS = ["dark mode", "light mode", "green tea", "coffee", "PDF reports", "the Monday meeting"]
PEOPLE = ["Dana", "Omar"]
PLACES = ["Oslo", "Lisbon", "Porto"]
QUERIES = ["which mode do I prefer", "what do I drink", "where does Dana live", "reports", "meeting"]
SESSIONS = ["a", "b", None]


def summarize(turns):
    """A simple summarizer: the batch's first two turns, restated (nothing for a batch without a user turn)."""
    return [f"Summary: {t['text']}" for t in turns][:2] if any(t["role"] == "user" for t in turns) else []


def memory_settings(recency_from="created"):
    return {"ttl_days": {"turn": 3}, "judge": RuleKeyValueJudge(), "recency_from": recency_from}


# ---------------------------------------------------------------------------- random histories

_turn = st.tuples(st.just("turn"), st.integers(0, len(WORDS) - 1), st.sampled_from(SESSIONS), st.booleans(),
                 st.sampled_from([None, 1.0, 10.0]))
_consolidate = st.tuples(st.just("consolidate"), st.sampled_from(["a", "b"]), st.integers(0, 2), st.booleans())
_feedback = st.tuples(st.just("feedback"), st.integers(0, 50), st.sampled_from(["corrected", "useful", "dead_end"]),
                      st.booleans())
_where = st.tuples(st.just("where"), st.integers(0, len(PEOPLE) - 1), st.integers(0, len(PLACES) - 1),
                  st.sampled_from(SESSIONS))
_op = st.one_of(  # turns, feedback and consolidations come more often: they make the history
    st.tuples(st.just("chat"), st.sampled_from(["a", "b"]), st.integers(2, 6)), _turn, _feedback, _consolidate,
    st.tuples(st.just("fact"), st.integers(0, len(WORDS) - 1), st.sampled_from(SESSIONS), st.booleans(),
              st.sampled_from(["u1", None])),
    _where,
    _feedback, _where,
    st.tuples(st.just("forget"), st.integers(0, 50)),
    st.tuples(st.just("forget_old"), st.sampled_from(SESSIONS), st.sampled_from([0.5, 2.0])),
    st.tuples(st.just("expire")),
    _consolidate,
    st.tuples(st.just("recall"), st.integers(0, len(QUERIES) - 1), st.sampled_from(SESSIONS)),
)
_history = st.lists(st.tuples(_op, st.sampled_from([600.0, 3600.0, 0.4 * DAY, 1.5 * DAY])), min_size=8, max_size=30)


def _apply(db, op, t, ids):
    """One operation of a random history at time ``t``; ``ids`` collects every memory made."""
    name, *a = op
    if name == "turn":
        ids.append(db.remember(f"I prefer {WORDS[a[0]]}", session=a[1], role="assistant" if a[2] else "user",
                               timestamp=t, ttl_days=a[3]))
    elif name == "chat":  # a run of turns a minute apart, the shape consolidation works on
        for k in range(a[1]):
            ids.append(db.remember(f"I prefer {WORDS[k % len(WORDS)]}", session=a[0],
                                   role="assistant" if k % 3 == 2 else "user", timestamp=t + 60 * k))
    elif name == "fact":
        ids.append(db.remember(f"The user likes {WORDS[a[0]]}", session=a[1], kind="fact", pinned=False,
                               user=a[3], timestamp=t) if not a[2] else
                   db.remember(f"The user likes {WORDS[a[0]]}", session=a[1], pinned=True, timestamp=t))
    elif name == "where":  # a person moves: the judge supersedes where they lived
        for k in range(2):
            ids.append(db.remember(f"{PEOPLE[a[0]]} lives in {PLACES[(a[1] + k) % len(PLACES)]}", session=a[2],
                                   kind="fact", timestamp=t + 60 * k))
    elif name == "feedback" and (live := [i for i in ids if i in db]):
        target = live[a[0] % len(live)]
        correction = f"Actually I prefer {WORDS[a[0] % len(WORDS)]}" if a[1] == "corrected" and not a[2] else None
        try:
            new = db.feedback(target, a[1], correction=correction, timestamp=t)
        except KeyError:  # forgotten or consolidated meanwhile
            return
        if new is not None:
            ids.append(new)
    elif name == "forget" and ids:
        db.forget(ids=[ids[a[0] % len(ids)]], now=t)
    elif name == "forget_old":
        db.forget(session=a[0], older_than=a[1], now=t)
    elif name == "expire":
        db.expire(now=t)
    elif name == "consolidate":
        ids.extend(db.consolidate(a[0], summarize, keep_recent=a[1], delete=a[2], batch_turns=3, now=t).facts)
    elif name == "recall":
        db.recall(QUERIES[a[0]], session=a[1], now=t)


def _build(history, recency_from):
    db = Vectrix(None, embedder="hashing", **memory_settings(recency_from))
    ids, t = [], T0
    for op, gap in history:
        t += gap
        _apply(db, op, t, ids)
    return db, ids, t


def _answers(db, ids, moments):
    """Every recall, as-of recall, history, context and turns answer over ``moments``."""
    out = []
    for now in moments:
        for q in QUERIES:
            for s in SESSIONS:
                res = db.recall(q, session=s, limit=5, now=now)
                out.append(("recall", q, s, now, res.items, res.truncated, res.cut_count, res.token_estimate))
            wide = db.recall(q, limit=8, include_superseded=True, user="u1", now=now)
            out.append(("recall+", q, now, wide.items))
            out.append(("context", q, now, db.context(q, session="a", token_budget=60, recent_turns=3, now=now)))
        for s in SESSIONS:
            out.append(("turns", s, now, db.turns(s, now=now)))
        for i in ids:
            try:
                out.append(("history", i, now, db.history(i, now=now)))
            except KeyError as exc:
                out.append(("history", i, now, str(exc)))
    return out


@settings(max_examples=40)
@given(history=_history, vectors=st.booleans(), to_file=st.booleans(),
       recency_from=st.sampled_from(["created", "accessed"]))
def test_a_restored_database_answers_every_call_as_the_original(history, vectors, to_file, recency_from):
    original, ids, end = _build(history, recency_from)
    with tempfile.TemporaryDirectory() as tmp:
        exported, again = os.path.join(tmp, "x.jsonl"), os.path.join(tmp, "y.jsonl")
        original.export(exported, vectors=vectors)
        target = os.path.join(tmp, "new.vxdb") if to_file else None
        restored = Vectrix.restore(exported, target, embedder="hashing", progress=False,
                                   **memory_settings(recency_from))
        try:
            restored.export(again, vectors=vectors)
            assert Path(again).read_bytes() == Path(exported).read_bytes()
            moments = [end + DAY, (T0 + end) / 2, T0]  # now, and as of two moments of the past
            assert _answers(restored, ids, moments) == _answers(original, ids, moments)
            # the turn counters came along: the next turn of each session gets the same number
            for s in SESSIONS:
                a = original.remember("one more", session=s, timestamp=end + 2 * DAY, id=f"next-{s}")
                b = restored.remember("one more", session=s, timestamp=end + 2 * DAY, id=f"next-{s}")
                assert original.get(a).metadata == restored.get(b).metadata
        finally:
            restored.close()
    original.close()


# ---------------------------------------------------------------------------- a replayed conversation

DATASETS = ["long_thread", "preference_drift", "feedback_loop", "contradicting_facts", "pinned_profile"]


def replay_into(db, conv, prefix):
    """Drive ``db`` through a conversation's events (sessions prefixed); returns its probes."""
    ids, probes = {}, []
    session = (lambda s: None if s is None else f"{prefix}/{s}")
    for ev in conv.events:
        if ev.type in ("turn", "fact"):
            kind = None if ev.type == "turn" or ev.pinned else "fact"
            ids[ev.label] = db.remember(ev.text, session=session(ev.session), role=ev.role, timestamp=ev.time,
                                        pinned=ev.pinned, kind=kind, ttl_days=ev.ttl_days)
        elif ev.type == "feedback" and ev.target in ids and ids[ev.target] in db:
            new = db.feedback(ids[ev.target], ev.outcome, correction=ev.correction, timestamp=ev.time)
            if new is not None and ev.label:
                ids[ev.label] = new
        elif ev.type == "forget":
            db.forget(ids=[ids[lab] for lab in ev.targets if lab in ids] or None, session=session(ev.session),
                      older_than=ev.older_than, superseded=ev.superseded, now=ev.time)
        elif ev.type == "expire":
            db.expire(now=ev.time)
        elif ev.type == "consolidate":
            db.consolidate(session(ev.session), RuleSummarizer(), keep_recent=ev.keep_recent,
                           older_than=ev.older_than, batch_turns=ev.batch_turns, now=ev.time)
        elif ev.type == "probe":
            probes.append((ev.query, session(ev.session), ev.time))
    return probes


def _replayed(path):
    db = Vectrix(path, embedder="hashing", judge=RuleKeyValueJudge(), ttl_days={"turn": 20})
    probes = []
    for name in DATASETS:
        probes += replay_into(db, load_jsonl(ROOT / "datasets" / f"{name}.jsonl"), name)
    return db, probes


def _probe_answers(db, probes):
    ids = [r.id for r in db.scan()]
    out = []
    for q, s, t in probes:
        out.append((db.recall(q, session=s, now=t).items, db.context(q, session=s, now=t)))
        out.append(db.recall(q, session=s, now=t + 30 * DAY).items)
    out += [db.history(i, now=t) for i in ids for t in (probes[len(probes) // 2][2], probes[-1][2])]
    return out


def _vxmem(*args):
    return subprocess.run([sys.executable, "-m", "vxmem", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def test_cli_export_then_restore_of_a_replayed_conversation_answers_identically(tmp_path):
    src = str(tmp_path / "chat.vxdb")
    db, probes = _replayed(src)
    c = new_counts()
    for r in db.scan():
        tally(c, r.metadata, 0, False)
    assert c["feedback_events"] and c["supersession_links"] and c["consolidated_facts"] and c["expiring"]
    assert c["pinned"]
    want = _probe_answers(db, probes)
    db.close()
    out = _vxmem("export", src, "-o", str(tmp_path / "chat.jsonl"))
    assert out.returncode == 0, out.stderr
    assert f"{c['feedback_events']} feedback events" in out.stdout
    out = _vxmem("restore", str(tmp_path / "chat.jsonl"), "--db", str(tmp_path / "copy.vxdb"))
    assert out.returncode == 0, out.stderr
    assert "holds no vectors: embedding its" in out.stdout  # said, never silent
    copy = Vectrix(str(tmp_path / "copy.vxdb"), embedder="hashing", judge=RuleKeyValueJudge(), ttl_days={"turn": 20})
    try:
        assert _probe_answers(copy, probes) == want
    finally:
        copy.close()


# ---------------------------------------------------------------------------- refusals


@pytest.fixture
def exported(tmp_path):
    """An export of a small history with every kind of record, as its lines."""
    db, ids, _ = _build([(("turn", 0, "a", True, None), 60.0), (("fact", 2, "a", False, "u1"), 60.0),
                         (("feedback", 0, "corrected", True), 60.0), (("turn", 1, "b", True, 1.0), 60.0),
                         (("where", 0, 0, "a"), 60.0), (("where", 0, 1, "a"), 60.0)], "created")
    path = tmp_path / "x.jsonl"
    db.export(path)
    db.close()
    return path.read_bytes().splitlines(keepends=True)


def reseal(lines):
    """The lines with a fresh end line: right counts and checksum, so only what a test broke is wrong."""
    import hashlib

    def parsed(line):
        try:
            obj = json.loads(line)
        except ValueError:
            return {}
        return obj if isinstance(obj, dict) else {}

    body = [ln for ln in lines if parsed(ln).get("type") != "end"]
    counts = new_counts()
    for obj in map(parsed, body[1:]):
        if obj.get("type") == "memory" and isinstance(obj.get("metadata"), dict):
            tally(counts, obj["metadata"], len(obj.get("accessed", [])), "vector" in obj)
        elif obj.get("type") == "counter":
            counts["counters"] += 1
    end = {"type": "end", "lines": len(body), "counts": counts,
           "sha256": hashlib.sha256(b"".join(body)).hexdigest()}
    return body + [json.dumps(end).encode() + b"\n"]


def _refused(tmp_path, lines, match):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"".join(lines))
    target = tmp_path / "new" / "db.vxdb"
    target.parent.mkdir(exist_ok=True)
    with pytest.raises(ExportFileError, match=match) as err:
        Vectrix.restore(src, target, embedder="hashing", progress=False)
    assert "\n" not in str(err.value)
    assert os.listdir(target.parent) == []  # nothing written, no temporary file left
    with pytest.raises(ExportFileError, match=match):
        Vectrix.restore(src, None, embedder="hashing", progress=False)


def _with_header(lines, **changes):
    header = json.loads(lines[0])
    header.update(changes)
    return [json.dumps(header).encode() + b"\n", *lines[1:]]


def test_a_file_of_a_newer_format_version_is_refused(tmp_path, exported):
    _refused(tmp_path, reseal(_with_header(exported, version=EXPORT_VERSION + 1)), "newer than this vxmem reads")


def test_a_file_without_its_end_line_is_refused_as_truncated(tmp_path, exported):
    _refused(tmp_path, exported[:-1], "truncated")
    _refused(tmp_path, exported[:3], "truncated")


def test_a_file_cut_in_the_middle_of_a_line_is_refused_as_truncated(tmp_path, exported):
    _refused(tmp_path, exported[:2] + [exported[2][:40]], "truncated")


def test_a_file_missing_a_line_is_refused_by_its_end_line(tmp_path, exported):
    _refused(tmp_path, exported[:2] + exported[3:], "lines came before it")


def test_a_file_with_a_changed_line_is_refused_by_its_checksum(tmp_path, exported):
    changed = exported[1].replace(b"I prefer", b"I adore")
    _refused(tmp_path, [exported[0], changed, *exported[2:]], "checksum")


def test_a_file_naming_an_id_twice_is_refused(tmp_path, exported):
    _refused(tmp_path, reseal([exported[0], exported[1], *exported[1:]]), "appears twice")


@pytest.mark.parametrize("broken, match", [
    (b"not json at all\n", "not a JSON line"),
    (b'{"type": "memory", "id": "x", "text": "t", "metadata": []}\n', "metadata must be a JSON object"),
    (b'{"type": "memory", "id": "x", "text": "t", "kind": "turn", "session": null, "user": null, "ts": 1.0, '
     b'"tokens": 1, "metadata": {"_vx_kind": "turn", "_vx_ts": "yesterday"}}\n', "_vx_ts"),
    (b'{"type": "memory", "id": "x", "text": "t", "kind": "fact", "session": null, "user": null, "ts": 1.0, '
     b'"tokens": 1, "metadata": {"_vx_kind": "turn", "_vx_ts": 1.0}}\n', "disagrees"),
    (b'{"type": "thing"}\n', "type is one of"),
])
def test_a_malformed_line_is_refused_naming_it(tmp_path, exported, broken, match):
    _refused(tmp_path, reseal([exported[0], exported[1], broken, *exported[2:]]), rf"line 3: .*{match}")


def test_a_file_that_is_no_export_is_refused(tmp_path):
    _refused(tmp_path, [b'{"format": "vxmem-conversation/1", "name": "demo"}\n'], "not a vxmem export")


def test_a_target_that_holds_memories_is_refused_and_left_as_it_was(tmp_path, exported):
    src = tmp_path / "x.jsonl"
    src.write_bytes(b"".join(exported))
    target = str(tmp_path / "full.vxdb")
    with Vectrix(target, embedder="hashing") as db:
        db.remember("already here", session="z", timestamp=T0)
        db.export(tmp_path / "before.jsonl")
    with pytest.raises(ValueError, match="already holds 1 documents"):
        Vectrix.restore(src, target, embedder="hashing", progress=False)
    with Vectrix(target, embedder="hashing") as db:
        db.export(tmp_path / "after.jsonl")
    assert (tmp_path / "after.jsonl").read_bytes() == (tmp_path / "before.jsonl").read_bytes()


def test_a_target_open_for_writing_elsewhere_is_refused(tmp_path, exported):
    src = tmp_path / "x.jsonl"
    src.write_bytes(b"".join(exported))
    target = str(tmp_path / "busy.vxdb")
    with Vectrix(target, embedder="hashing") as busy:
        with pytest.raises(DatabaseLockedError):
            Vectrix.restore(src, target, embedder="hashing", progress=False)
        assert len(busy) == 0
    assert sorted(os.listdir(tmp_path)) == ["busy.vxdb", "x.jsonl"]


def test_an_empty_database_is_a_target_a_restore_fills(tmp_path, exported):
    src = tmp_path / "x.jsonl"
    src.write_bytes(b"".join(exported))
    target = str(tmp_path / "empty.vxdb")
    Vectrix(target, embedder="hashing").close()
    with Vectrix.restore(src, target, embedder="hashing", progress=False) as db:
        assert len(db) == json.loads(exported[0])["counts"]["documents"]


def test_cli_refuses_a_truncated_file_in_one_line_and_writes_nothing(tmp_path, exported):
    src = tmp_path / "cut.jsonl"
    src.write_bytes(b"".join(exported[:-1]))
    out = _vxmem("restore", str(src), "--db", str(tmp_path / "new.vxdb"))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "truncated" in out.stderr
    assert sorted(os.listdir(tmp_path)) == ["cut.jsonl", "x.jsonl"]


# ---------------------------------------------------------------------------- vectors


def test_vectors_in_the_file_are_kept_with_the_same_embedder(tmp_path, exported, caplog):
    db, _, _ = _build([(("turn", 0, "a", True, None), 60.0), (("fact", 1, "b", False, None), 60.0)], "created")
    db.export(tmp_path / "v.jsonl", vectors=True)
    with caplog.at_level("WARNING", logger="vxmem.restore"):
        copy = Vectrix.restore(tmp_path / "v.jsonl", embedder="hashing", progress=False)
    assert not caplog.records  # nothing embedded again, nothing to say
    with db.engine.locked() as m, copy.engine.locked() as c:
        for r in db.scan():
            assert m.vector(m.pos_of_id[r.id]).tolist() == c.vector(c.pos_of_id[r.id]).tolist()


def test_another_embedder_embeds_again_and_says_so(tmp_path, caplog):
    db, _, _ = _build([(("turn", 0, "a", True, None), 60.0), (("fact", 1, "b", False, None), 60.0)], "created")
    db.export(tmp_path / "v.jsonl", vectors=True)
    with caplog.at_level("WARNING", logger="vxmem.restore"):
        copy = Vectrix.restore(tmp_path / "v.jsonl", embedder=WordHashEmbedder(), progress=False)
    assert "not of this database's embedder (WordHashEmbedder): embedding its 2 texts again" in caplog.text
    assert copy.recall("dark mode", session="a", now=T0 + DAY).ids == db.recall("dark mode", session="a",
                                                                                 now=T0 + DAY).ids


class CountingEmbedder(WordHashEmbedder):
    """A real embedder that counts the texts it was asked to embed."""

    def __init__(self):
        super().__init__()
        self.texts = 0

    def __call__(self, texts):
        self.texts += len(texts)
        return super().__call__(texts)


def test_a_file_with_a_bad_checksum_is_refused_before_anything_is_embedded(tmp_path, exported):
    changed = exported[-2].replace(b'"type"', b'"type" ')  # the last line before the end line
    assert changed != exported[-2]
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"".join([*exported[:-2], changed, exported[-1]]))
    embedder = CountingEmbedder()
    with pytest.raises(ExportFileError, match=rf"line {len(exported)}: the file is damaged: .*checksum"):
        Vectrix.restore(src, tmp_path / "db.vxdb", embedder=embedder, progress=False)
    assert embedder.texts == 0
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl", "x.jsonl"]


def test_a_file_whose_line_endings_became_crlf_restores_as_it_was_and_says_so(tmp_path, exported, caplog):
    lf, crlf = tmp_path / "lf.jsonl", tmp_path / "crlf.jsonl"
    lf.write_bytes(b"".join(exported))
    crlf.write_bytes(b"".join(line.replace(b"\n", b"\r\n") for line in exported))
    with caplog.at_level("WARNING", logger="vxmem.restore"):
        got = Vectrix.restore(crlf, tmp_path / "crlf.vxdb", embedder="hashing", progress=False)
    want = Vectrix.restore(lf, tmp_path / "lf.vxdb", embedder="hashing", progress=False)
    try:
        assert [(r.id, r.text, r.metadata) for r in got.scan()] == \
            [(r.id, r.text, r.metadata) for r in want.scan()]
    finally:
        got.close()
        want.close()
    assert any("CRLF line endings" in r.getMessage() for r in caplog.records)


def test_a_crlf_file_changed_beyond_its_line_endings_is_refused_saying_so(tmp_path, exported):
    changed = exported[1].replace(b"I prefer", b"I adore")
    assert changed != exported[1]
    lines = [line.replace(b"\n", b"\r\n") for line in [exported[0], changed, *exported[2:]]]
    _refused(tmp_path, lines, "damaged: .*checksum .*line endings were changed from LF to CRLF")
