"""Supersession: how a correction or a contradiction replaces a memory without deleting it.

The new memory lists what it replaces under ``_vx_supersedes``; each replaced memory
points at its replacement under ``_vx_superseded_by`` (with ``_vx_superseded_at``), and
drops out of recall. Nothing is deleted, so the chain stays auditable: :func:`chain`
walks it both ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core.clock import to_datetime
from ..core.keys import K_KIND, K_SUPERSEDED_AT, K_SUPERSEDED_BY, K_SUPERSEDES, K_TS
from ..store.seam import MemoryView, MemoryWrites


@dataclass
class HistoryEntry:
    """One memory in a supersession chain."""

    id: str
    text: str
    kind: str
    ts: datetime
    live: bool
    superseded_by: str | None
    superseded_at: datetime | None
    supersedes: list[str]


def mark_superseded(m: MemoryView, tx: MemoryWrites, old_id: str, new_id: str, ts: float) -> None:
    """Point ``old_id`` at its replacement ``new_id`` (in ``tx``), unless it already has one."""
    meta = dict(m.metas[m.pos_of_id[old_id]])
    if meta.get(K_SUPERSEDED_BY) is None:
        meta[K_SUPERSEDED_BY] = new_id
        meta[K_SUPERSEDED_AT] = ts
        tx.update_meta(old_id, meta)


def unlink_deleted(m: MemoryView, tx: MemoryWrites, deleted: set[str]) -> None:
    """Before ``deleted`` go (in ``tx``), mend the links that point at them: a memory one of them
    superseded points at what superseded that one in turn (which then lists it), else at another
    memory that lists it (a live one first), else it is live again, its correction gone."""
    metas = {d: m.metas[m.pos_of_id[d]] for d in deleted if d in m.pos_of_id}
    if not any(meta.get(K_SUPERSEDES) for meta in metas.values()):  # none superseded anything
        return
    stranded = [i for i, p in m.pos_of_id.items() if i not in deleted and m.metas[p].get(K_SUPERSEDED_BY) in deleted]
    if not stranded:
        return
    listed: dict[str, list[str]] = {s: [] for s in stranded}
    for i, p in m.pos_of_id.items():
        if i not in deleted:
            for s in m.metas[p].get(K_SUPERSEDES) or ():
                if s in listed:
                    listed[s].append(i)
    changed: dict[str, dict[str, Any]] = {}
    for s in sorted(stranded):
        meta = changed.setdefault(s, dict(m.metas[m.pos_of_id[s]]))
        heir = _heir(metas, meta[K_SUPERSEDED_BY])
        others = sorted(listed[s], key=lambda i: m.metas[m.pos_of_id[i]].get(K_SUPERSEDED_BY) is not None)
        if heir is not None and heir in m.pos_of_id:
            meta[K_SUPERSEDED_BY] = heir
            if heir not in listed[s]:
                heir_meta = changed.setdefault(heir, dict(m.metas[m.pos_of_id[heir]]))
                heir_meta[K_SUPERSEDES] = [*(heir_meta.get(K_SUPERSEDES) or ()), s]
        elif others:
            meta[K_SUPERSEDED_BY] = others[0]
        else:
            meta.pop(K_SUPERSEDED_BY, None)
            meta.pop(K_SUPERSEDED_AT, None)
    for i, meta in changed.items():
        tx.update_meta(i, meta)


def _heir(deleted: dict[str, dict[str, Any]], id: str) -> str | None:
    """The first memory not being deleted on the supersession links from ``id`` on, if any."""
    seen: set[str] = set()
    while id in deleted and id not in seen:
        seen.add(id)
        nxt = deleted[id].get(K_SUPERSEDED_BY)
        if not isinstance(nxt, str):
            return None
        id = nxt
    return None if id in deleted else id


def live_heads(m: MemoryView, id: str) -> list[str]:
    """The live ends of the supersession links that start at ``id``."""
    heads, seen, stack = [], set(), [id]
    while stack:
        cur = stack.pop()
        if cur in seen or cur not in m.pos_of_id:
            continue
        seen.add(cur)
        nxt = m.metas[m.pos_of_id[cur]].get(K_SUPERSEDED_BY)
        if nxt is None:
            heads.append(cur)
        else:
            stack.append(nxt)
    return heads


def chain(m: MemoryView, id: str, as_of: float | None = None) -> list[HistoryEntry]:
    """Every memory linked to ``id`` by supersession, either way, oldest first (of two made
    at one time, the one replaced first); with ``as_of``, as the chain stood at that moment
    (no memory created later, no link made later)."""
    seen, stack = set(), [id]
    while stack:
        cur = stack.pop()
        if cur in seen or not _existed(m, cur, as_of):
            continue
        seen.add(cur)
        meta = m.metas[m.pos_of_id[cur]]
        if meta.get(K_SUPERSEDED_BY) and m.superseded_as_of(m.pos_of_id[cur], as_of):
            stack.append(meta[K_SUPERSEDED_BY])
        stack.extend(meta.get(K_SUPERSEDES) or ())
    entries = {cur: _entry(m, cur, as_of) for cur in seen}
    depth = _link_depths(entries)
    return sorted(entries.values(), key=lambda e: (e.ts, depth[e.id], e.id))


def _link_depths(entries: dict[str, HistoryEntry]) -> dict[str, int]:
    """How many supersession links lead back from each entry to one that replaces none of
    them (a link that loops back counts once)."""
    depth: dict[str, int] = {}
    for start in entries:  # depth first without recursion: a chain may be long
        stack, on_path = [(start, False)], set()
        while stack:
            i, back_done = stack.pop()
            if back_done:
                depth[i] = 1 + max((depth[s] for s in entries[i].supersedes if s in depth), default=-1)
                on_path.discard(i)
            elif i not in depth and i not in on_path:
                on_path.add(i)
                stack.append((i, True))
                stack.extend((s, False) for s in entries[i].supersedes if s in entries and s not in depth)
    return depth


def _existed(m: MemoryView, id: str, as_of: float | None) -> bool:
    p = m.memory_position(id)
    return p is not None and (as_of is None or bool(m.ts[p] <= as_of))


def _later(m: MemoryView, id: str, as_of: float | None) -> bool:
    """Whether ``id`` is a memory created after ``as_of`` (a deleted one is not)."""
    p = m.memory_position(id)
    return p is not None and as_of is not None and bool(m.ts[p] > as_of)


def _entry(m: MemoryView, id: str, as_of: float | None) -> HistoryEntry:
    p = m.pos_of_id[id]
    meta = m.metas[p]
    superseded = m.superseded_as_of(p, as_of)
    at = meta.get(K_SUPERSEDED_AT) if superseded else None
    supersedes = [s for s in meta.get(K_SUPERSEDES) or [] if not _later(m, s, as_of)]
    return HistoryEntry(id=id, text=m.texts[p], kind=meta[K_KIND], ts=to_datetime(meta[K_TS]),
                        live=not superseded, superseded_by=meta.get(K_SUPERSEDED_BY) if superseded else None,
                        superseded_at=to_datetime(at) if at is not None else None,
                        supersedes=supersedes)


def check_correction_time(m: MemoryView, id: str, ts: float) -> None:
    """Refuse a correction of ``id`` at ``ts`` dated before the newest of what it would
    replace (``id`` and the live corrections of it) was stored: both would be live in between."""
    replaced = [id] + live_heads(m, id)
    newest = max(replaced, key=lambda i: float(m.ts[m.pos_of_id[i]]))
    at = float(m.ts[m.pos_of_id[newest]])
    if ts < at:
        raise ValueError(f"a correction at {to_datetime(ts).isoformat()} comes before memory {newest!r}, which it "
                         f"would replace, was stored ({to_datetime(at).isoformat()}): date it at or after that")
