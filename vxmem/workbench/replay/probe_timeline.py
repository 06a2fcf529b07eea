"""A replay's memories as they stood at one probe's moment, and how a table names them.

- :class:`ProbeTimeline`: which memories existed at a probe, and which were deleted or
  superseded by then.
- :func:`expiry_times`: when each memory of a replay expires.
- :func:`memory_label`: a memory's labels, or its id when it has none.

:mod:`vxmem.workbench.analysis.why` and :mod:`vxmem.workbench.analysis.questions` read replays through them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.clock import DAY
from .record import Replay

if TYPE_CHECKING:
    from ..datasets.model import Conversation


def memory_label(memory: Mapping[str, Any] | None, mid: str) -> str:
    """The labels of a replay's ``memory`` (a row of ``Replay.memories``), or its id ``mid``."""
    labels = (memory or {}).get("labels") or []
    return ", ".join(labels) if labels else mid


class ProbeTimeline:
    """What existed at probe ``i`` of a replay: creation and deletion against the probe's moment.

    Events at the probe's very timestamp count by their order in the conversation.
    """

    def __init__(self, replay: Replay, i: int):
        self.t = float(replay.probes[i]["time"])
        probe_events = [e["index"] for e in replay.events if e.get("type") == "probe"]
        self.at = probe_events[i] if i < len(probe_events) else None
        self.made = {e["memory_id"]: e["index"] for e in replay.events if e.get("memory_id")}
        self.events = replay.events
        self.mems = {m["id"]: m for m in replay.memories}

    def _before(self, t: float | None, index: int | None) -> bool:
        if t is None:
            return False
        if t != self.t or self.at is None:
            return t <= self.t
        return index is not None and index < self.at

    def _event_at(self, t: float, types: tuple[str, ...]) -> int | None:
        hits = [e["index"] for e in self.events if e.get("type") in types and e.get("time") == t]
        before = [k for k in hits if self.at is None or k < self.at]
        return before[0] if before else (hits[0] if hits else None)

    def created(self, m: Mapping[str, Any]) -> bool:
        idx = self.made.get(m["id"])
        if idx is None and m["created"] == self.t:  # a consolidation's fact: made by that event
            idx = self._event_at(m["created"], ("consolidate",))
        return self._before(m["created"], idx)

    def deleted(self, m: Mapping[str, Any]) -> bool:
        d = m.get("deleted")
        if d is None:
            return False
        idx = self._event_at(d, ("forget", "expire", "consolidate")) if d == self.t else None
        return self._before(d, idx)

    def exists(self, m: Mapping[str, Any] | None) -> bool:
        return m is not None and self.created(m) and not self.deleted(m)

    def superseded(self, m: Mapping[str, Any]) -> bool:
        new = self.mems.get(m.get("superseded_by") or "")
        if new is None:
            at = m.get("superseded_at")
            return at is not None and at <= self.t
        return self.created(new)


def expiry_times(replay: Replay, conversation: Conversation | None) -> dict[str, float | None]:
    """When each memory expires: recorded, else its event's ``ttl_days``, else its kind's TTL."""
    ttl_kind = replay.settings.get("ttl_days") or {}
    ev_ttl: dict[str, float] = {}
    if conversation is not None:
        events = conversation.events
        for e in replay.events:
            k = e.get("index")
            ttl = events[k].ttl_days if e.get("memory_id") and isinstance(k, int) and k < len(events) else None
            if ttl is not None:
                ev_ttl[e["memory_id"]] = float(ttl)
    out: dict[str, float | None] = {}
    for m in replay.memories:
        if "expires" in m:
            out[m["id"]] = m["expires"]
            continue
        ttl = ev_ttl.get(m["id"], ttl_kind.get(m.get("kind")) if isinstance(ttl_kind, Mapping) else None)
        out[m["id"]] = None if ttl is None or math.isinf(ttl) else m["created"] + float(ttl) * DAY
    return out
