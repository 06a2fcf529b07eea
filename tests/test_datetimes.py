"""One rule for time everywhere: epoch seconds, aware datetimes in their zone, naive ones as UTC; years 1 to 9999."""

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.core.clock import to_epoch
from vxmem.memory import K_FEEDBACK, K_TS
from vxmem.workbench.datasets import loads_jsonl
from vxmem.workbench.replay.run import replay

from helpers import WordHashEmbedder

NAIVE = datetime(2024, 3, 31, 0, 30)
AWARE = NAIVE.replace(tzinfo=UTC)
LISBON = ZoneInfo("Europe/Lisbon")


def test_a_naive_datetime_is_read_as_utc_in_every_form():
    epoch = AWARE.timestamp()
    same = [NAIVE, AWARE, "2024-03-31T00:30:00", "2024-03-31T00:30:00Z", "2024-03-31T01:30:00+01:00",
            np.datetime64("2024-03-31T00:30:00"), epoch, np.float64(epoch), np.int64(epoch)]
    assert {to_epoch(v) for v in same} == {epoch}


def test_an_aware_time_counts_in_its_own_zone_across_a_dst_change():
    before = datetime(2024, 3, 31, 0, 30, tzinfo=LISBON)  # WET, UTC+0
    after = datetime(2024, 3, 31, 3, 30, tzinfo=LISBON)  # WEST, UTC+1: the clock jumped from 1:00 to 2:00
    assert to_epoch(after) - to_epoch(before) == 2 * 3600


@pytest.mark.parametrize("verb", ["remember", "feedback", "recall", "context", "turns", "history", "forget", "expire"])
def test_every_verb_reads_a_naive_datetime_as_utc(verb):
    db = Vectrix(embedder=WordHashEmbedder())
    early = db.remember("tea in the morning", session="s", timestamp=NAIVE)
    assert db.get(early).metadata[K_TS] == AWARE.timestamp()
    late = db.remember("coffee at noon", session="s", timestamp=AWARE + timedelta(hours=3))
    between_naive, between_aware = NAIVE + timedelta(hours=1), AWARE + timedelta(hours=1)
    if verb == "remember":
        mid = db.remember("juice", session="s", timestamp=between_naive)
        assert db.get(mid).metadata[K_TS] == between_aware.timestamp()
    elif verb == "feedback":
        db.feedback(early, "useful", timestamp=between_naive)
        assert db.get(early).metadata[K_FEEDBACK][0][1] == between_aware.timestamp()
    elif verb in ("recall", "context", "turns"):
        call = {"recall": lambda now: db.recall("tea coffee", session="s", now=now).ids,
                "context": lambda now: db.context("tea coffee", session="s", now=now).ids,
                "turns": lambda now: [r.id for r in db.turns("s", now=now)]}[verb]
        assert call(between_naive) == call(between_aware) == call(between_aware.astimezone(LISBON))
        assert late not in call(between_naive)
    elif verb == "history":
        assert db.history(late, now=between_naive) == db.history(late, now=between_aware) == []
    elif verb == "forget":
        assert db.forget(session="s", older_than=between_naive, now=between_naive) == 1
        assert early not in db and late in db
    else:
        db.remember("short lived", session="s", timestamp=NAIVE, ttl_days=1 / 24)
        assert db.expire(now=NAIVE + timedelta(hours=2)) == 1


def test_the_ends_of_the_calendar_are_accepted_and_beyond_them_refused():
    db = Vectrix(embedder=WordHashEmbedder())
    first = db.remember("the first day", session="s", timestamp=datetime(1, 1, 1))
    last = db.remember("the last day", session="s", timestamp=datetime(9999, 12, 31, 23, 59, 59))
    before_1970 = db.remember("the moon landing", session="s", timestamp="1969-07-20T20:17:00Z")
    assert db.get(before_1970).metadata[K_TS] < 0
    assert set(db.recall("day", session="s", now=datetime(9999, 12, 31, 23, 59, 59)).ids) >= {first, last}
    for bad in (1e300, -1e300, np.datetime64("10000-01-01"), "10000-01-01"):
        with pytest.raises(ValueError, match="timestamp"):
            db.remember("never", session="s", timestamp=bad)
    for bad in (float("nan"), np.datetime64("NaT")):
        with pytest.raises(ValueError, match="now"):
            db.recall("day", session="s", now=bad)
    with pytest.raises(TypeError, match="now"):
        db.recall("day", session="s", now=True)
    assert len(db) == 3


def test_a_replay_reads_dataset_times_by_the_same_rule():
    text = ('{"format": "vxmem-conversation/1", "name": "zones"}\n'
            '{"time": "2024-03-31T00:30:00", "type": "turn", "session": "s", "text": "naive is UTC", "label": "a"}\n'
            '{"time": "2024-03-31T02:30:00+01:00", "type": "turn", "session": "s", "text": "an hour later", '
            '"label": "b"}\n'
            '{"time": "2024-03-31T01:45:00Z", "type": "probe", "session": "s", "query": "later", '
            '"relevant": ["a", "b"]}\n')
    rep = replay(loads_jsonl(text), embedder=WordHashEmbedder())
    created = {m["labels"][0]: m["created"] for m in rep.memories}
    assert created["b"] - created["a"] == 3600 and created["a"] == AWARE.timestamp()
    assert rep.probes[0]["pool"] == 2  # both existed at 01:45 UTC


def test_fixed_offsets_and_zone_names_agree():
    assert to_epoch(datetime(2024, 7, 1, 12, tzinfo=LISBON)) == to_epoch(
        datetime(2024, 7, 1, 12, tzinfo=timezone(timedelta(hours=1))))
