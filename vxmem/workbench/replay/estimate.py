"""How long a replay will take, said before it starts: a short sample of the dataset replayed here,
its per-write and per-probe times scaled to the whole.

A full LoCoMo or LongMemEval file is thousands of turns: a researcher should know whether that is a
coffee or a lunch before the bar starts. :func:`estimate` replays the first ``sample`` writes of the
first conversation (and a few of its questions, asked at the end of them) without any cache, as the
real replay will run, and scales: every write costs what the sampled ones did, every probe what
the sampled ones did (its recall and the recording of its candidate pool).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..datasets.model import Conversation

__all__ = ["Estimate", "estimate", "is_long", "LONG_REPLAY", "SAMPLE_WRITES", "SAMPLE_PROBES"]

LONG_REPLAY = 500  # events from which a replay says how long it will take before it starts
SAMPLE_WRITES = 40  # writes replayed to time one
SAMPLE_PROBES = 10  # questions asked at the end of them to time one (enough that their time stands out of the noise)


@dataclass(frozen=True)
class Estimate:
    """A replay's expected duration: ``seconds`` for ``writes`` writes and ``probes`` probes, at
    ``ms_per_write`` and ``ms_per_probe`` measured on ``sampled`` writes here."""

    seconds: float
    writes: int
    probes: int
    ms_per_write: float
    ms_per_probe: float
    sampled: int

    def __str__(self) -> str:
        return (f"about {_duration(self.seconds)} ({self.writes:,} writes at {self.ms_per_write:.0f} ms and "
                f"{self.probes:,} probes at {self.ms_per_probe:.0f} ms each, measured on {self.sampled} writes here)")


def is_long(conversations: Sequence[Conversation]) -> bool:
    """Whether replaying ``conversations`` is long enough to say how long first (:data:`LONG_REPLAY` events)."""
    return sum(len(c.events) for c in conversations) >= LONG_REPLAY


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _sample(conv: Conversation, writes: int, probes: int) -> Conversation:
    """The first ``writes`` writes of ``conv`` (turns and facts) and ``probes`` of its questions,
    asked just after them with nothing to find (their labels may name memories not sampled)."""
    kept = [e for e in conv.events if e.type in ("turn", "fact")][:writes]
    end = kept[-1].time if kept else 0.0
    asked = [dataclasses.replace(e, time=end + 1.0 + i, relevant={}, stale=(), relevant_sessions=())
             for i, e in enumerate(conv.probes[:probes])]
    return Conversation(name=f"{conv.name} (sample)", events=[*kept, *asked], meta=dict(conv.meta))


def estimate(conversations: Sequence[Conversation], settings: dict[str, Any] | None = None, embedder: Any = None,
             *, sample: int = SAMPLE_WRITES, probes: int = SAMPLE_PROBES) -> Estimate:
    """How long :func:`~vxmem.workbench.replay.run.replay_many` of ``conversations`` at ``settings``
    with ``embedder`` will take, from a sample replayed here (see the module)."""
    from .run import replay

    convs = list(conversations)
    writes = sum(1 for c in convs for e in c.events if e.type in ("turn", "fact", "feedback"))
    n_probes = sum(len(c.probes) for c in convs)
    first = next((c for c in convs if any(e.type in ("turn", "fact") for e in c.events)), None)
    if first is None:
        return Estimate(0.0, writes, n_probes, 0.0, 0.0, 0)
    replay(_sample(first, 5, 1), settings, embedder=embedder, cache=False, progress=False)  # models loaded, untimed
    timed = []
    for asked in (0, probes):  # the same writes twice, with and without questions: the difference is theirs
        part = _sample(first, sample, asked)
        started = time.perf_counter()
        rep = replay(part, settings, embedder=embedder, cache=False, progress=False)
        timed.append(((time.perf_counter() - started) * 1000.0, rep))
    (bare_ms, bare), (asked_ms, with_probes) = timed
    per_write = bare_ms / max(len(bare.memories), 1)  # setting up the memory included: a whole replay pays it too
    per_probe = max(0.0, asked_ms - bare_ms) / with_probes.n_probes if with_probes.n_probes else 0.0
    return Estimate((writes * per_write + n_probes * per_probe) / 1000.0, writes, n_probes, per_write, per_probe,
                    len(bare.memories))
