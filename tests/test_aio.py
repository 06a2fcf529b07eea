"""AsyncVectrix: every verb awaitable, run off the event loop, in the order the calls were made."""

import asyncio
import inspect
import random
import threading

import pytest

from vxmem import AsyncVectrix, Blend, Vectrix
from vxmem.core.errors import VectrixError

from helpers import DAY, T0

VERBS = ["remember", "remember_many", "warm", "recall", "feedback", "context", "forget", "consolidate", "expire",
         "turns", "history"]
WORDS = "tea coffee paris london dark light mode pdf csv report cat dog rain snow".split()


def _mixed_calls(n: int, seed: int = 0) -> list[tuple[str, tuple, dict]]:
    """``n`` calls (verb, args, kwargs): remember / recall / feedback / forget, every one on the
    simulated clock, some of them bound to fail (feedback on a forgotten memory)."""
    rng = random.Random(seed)
    calls, made = [], []
    for i in range(n):
        at = T0 + i * 60.0
        session = rng.choice(["a", "b"])
        roll = rng.random()
        if roll < 0.4 or not made:
            id = f"m{i}"
            made.append(id)
            text = " ".join(rng.choices(WORDS, k=4))
            calls.append(("remember", (text,), {"session": session, "timestamp": at, "id": id,
                                                "kind": rng.choice(["turn", "fact"])}))
        elif roll < 0.75:
            calls.append(("recall", (" ".join(rng.choices(WORDS, k=2)),),
                          {"session": rng.choice([session, None]), "limit": 5, "now": at}))
        elif roll < 0.9:
            calls.append(("feedback", (rng.choice(made), rng.choice(["useful", "dead_end"])), {"timestamp": at}))
        else:
            calls.append(("forget", (), {"ids": [rng.choice(made)], "now": at}))
    return calls


def _outcome(value):
    """What a call gave, comparable across runs: recall as (id, score) pairs, errors by type and text."""
    if isinstance(value, BaseException):
        return ("error", type(value).__name__, str(value))
    if hasattr(value, "items") and hasattr(value, "truncated"):
        return [(r.id, round(r.score, 9)) for r in value]
    return value


def _state(db: Vectrix):
    return sorted((r.id, r.text, r.metadata.get("_vx_turn"), r.metadata.get("_vx_feedback") is not None)
                  for r in db.scan())


def test_gather_of_200_mixed_calls_equals_the_same_calls_in_order(tmp_path):
    calls = _mixed_calls(200)
    assert {v for v, _, _ in calls} == {"remember", "recall", "feedback", "forget"}

    in_order = Vectrix(tmp_path / "seq.db")
    expected = []
    for verb, args, kwargs in calls:
        try:
            expected.append(_outcome(getattr(in_order, verb)(*args, **kwargs)))
        except (KeyError, ValueError) as exc:
            expected.append(_outcome(exc))

    async def gathered():
        async with AsyncVectrix(tmp_path / "par.db", readers=4) as adb:
            got = await asyncio.gather(*(getattr(adb, v)(*a, **k) for v, a, k in calls), return_exceptions=True)
            return [_outcome(g) for g in got], _state(adb.sync)

    got, state = asyncio.run(gathered())
    assert got == expected
    assert state == _state(in_order)  # nothing lost, nothing doubled
    assert any(isinstance(e, tuple) and e[0] == "error" for e in expected)  # the mix holds refused calls too
    in_order.close()


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_the_signature_and_docstring_of_vectrix(verb):
    mine, theirs = inspect.signature(getattr(AsyncVectrix, verb)), inspect.signature(getattr(Vectrix, verb))
    assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert inspect.iscoroutinefunction(getattr(AsyncVectrix, verb))
    assert getattr(AsyncVectrix, verb).__doc__ == getattr(Vectrix, verb).__doc__


def test_the_work_runs_on_a_worker_thread_not_the_event_loop():
    seen = []

    def embedder(texts):
        seen.append(threading.get_ident())
        import numpy as np
        return np.ones((len(texts), 4), dtype=np.float32) + np.arange(len(texts))[:, None]

    async def main():
        loop_thread = threading.get_ident()
        async with AsyncVectrix(embedder=embedder) as adb:
            await adb.remember("hello", timestamp=T0)
            await adb.recall("hello", now=T0 + 1)
        return loop_thread

    loop_thread = asyncio.run(main())
    assert seen and loop_thread not in seen


def test_a_refused_call_raises_and_writes_nothing():
    async def main():
        async with AsyncVectrix() as adb:
            await adb.remember("kept", id="k", timestamp=T0)
            with pytest.raises(KeyError):
                await adb.feedback("missing", "useful", timestamp=T0)
            with pytest.raises(ValueError):
                await adb.remember("again", id="k", timestamp=T0)
            with pytest.raises(ValueError):
                await adb.remember_many(["fine", {"text": "bad", "kind": "nope"}], timestamp=T0)
            return await adb.count()

    assert asyncio.run(main()) == 1


def test_a_recall_request_ranks_with_its_own_blend():
    db = Vectrix(recency_weight=0.5)
    db.remember("the cat sat on the mat", session="s", timestamp=T0)
    db.remember("a cat", session="s", timestamp=T0 + 30 * DAY)

    async def main():
        adb = AsyncVectrix.of(db)
        request = db.memory.request("the cat sat on the mat", session="s", now=T0 + 31 * DAY,
                                    blend=Blend(recency_weight=0.0))
        got = await adb.recall_request(request)
        adb.close()
        return got

    got = asyncio.run(main())
    no_recency = Vectrix(recency_weight=0.0)
    for r in db.scan():
        no_recency.remember(r.text, session="s", timestamp=r.metadata["_vx_ts"], id=r.id)
    want = no_recency.recall("the cat sat on the mat", session="s", now=T0 + 31 * DAY)
    assert [(r.id, round(r.score, 9)) for r in got] == [(r.id, round(r.score, 9)) for r in want]
    assert not db.engine.closed  # of(): the handle stays the caller's


def test_a_cancelled_call_keeps_the_later_calls_in_order():
    async def main():
        async with AsyncVectrix(readers=2) as adb:
            first = asyncio.ensure_future(adb.remember("one", id="a", timestamp=T0))
            cancelled = asyncio.ensure_future(adb.remember("two", id="b", timestamp=T0 + 1))
            after = asyncio.ensure_future(adb.recall("one two", now=T0 + 2))
            cancelled.cancel()
            await first
            got = await after
            return [r.id for r in got], await adb.count()

    ids, n = asyncio.run(main())
    assert "a" in ids and "b" not in ids and n == 1


def test_aclose_waits_for_every_call_made_before_it_and_refuses_the_ones_after(tmp_path):
    path = tmp_path / "a.vxdb"

    async def main():
        adb = AsyncVectrix(str(path), embedder="hashing")
        tasks = [asyncio.ensure_future(adb.remember(f"late {i}", timestamp=T0 + i)) for i in range(5)]
        await asyncio.sleep(0)  # the calls are admitted; most still wait their turn behind the first
        await adb.aclose()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        with pytest.raises(VectrixError, match="closed"):
            await adb.recall("late", now=T0 + DAY)
        return done

    done = asyncio.run(main())
    assert all(isinstance(d, str) for d in done), done
    with Vectrix(str(path), embedder="hashing") as db:
        assert sorted(r.text for r in db.scan()) == [f"late {i}" for i in range(5)]


class BlockedJudge:
    """A judge that says every fact is contradicted, once the test lets it answer: it waits
    on an event the test sets (as an LLM judge waits on its endpoint), not on a clock."""

    def __init__(self):
        self.called, self.release = threading.Event(), threading.Event()

    def __call__(self, new_text, old_texts):
        self.called.set()
        assert self.release.wait(timeout=120), "the test never released the judge"
        return [True] * len(old_texts)


@pytest.mark.parametrize("verb", ["remember", "remember_many"])
def test_a_recall_completes_while_a_judged_remember_waits_for_its_judge(verb):
    judge = BlockedJudge()
    new = {"text": "I live in London", "kind": "fact", "id": "new", "timestamp": T0 + 1}

    async def main():
        async with AsyncVectrix(judge=judge) as adb:
            try:
                await adb.remember("I live in Paris", kind="fact", id="old", check=False, timestamp=T0)
                judged = asyncio.ensure_future(adb.remember(**new) if verb == "remember" else adb.remember_many([new]))
                assert await asyncio.get_running_loop().run_in_executor(None, judge.called.wait, 60), "no judge call"
                recall = asyncio.ensure_future(adb.recall("where do I live", kinds=("fact",), now=T0 + 3))
                later_write = asyncio.ensure_future(adb.remember("a turn", id="turn", timestamp=T0 + 2))
                hits = await asyncio.wait_for(recall, timeout=60)  # a bound for a recall that waits for the judge
                during = ([r.id for r in hits], judge.release.is_set(), judged.done(), later_write.done())
            finally:
                judge.release.set()  # before the close, which waits for the judged remember
            await judged
            await later_write
            after = await adb.recall("where do I live", kinds=("fact",), now=T0 + 3)
            return during, [r.id for r in after]

    during, after = asyncio.run(main())
    assert during == (["old"], False, False, False)  # answered while the judge was still held
    assert after == ["new"]  # then the judge's verdict landed: London superseded Paris
