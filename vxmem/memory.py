"""Conversation memory on top of a Vectrix collection.

A vector store remembers everything as equally true forever, which is the wrong shape
for a conversation. Here relevance is blended with a half-life recency and time-decayed
feedback; corrections and contradictions supersede old facts without deleting them;
memories expire by TTL; old turns consolidate into standalone facts through a summarizer
the caller brings; ``context()`` assembles pinned facts, recent turns and recalled
memories under one token budget.

Everything is stored as ordinary documents with reserved ``_vx_*`` metadata keys, so a
memory collection is still a plain collection: ``search()``, ``delete()`` and filters
all work on it unchanged.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np

from . import scoring
from .clock import DAY, days_to_seconds, to_datetime, to_epoch
from .store import (
    SEARCH_MODES, Result, Results, check_hybrid_weight, check_id, check_json, check_limit, check_mode, check_text,
)

if TYPE_CHECKING:  # pragma: no cover
    from .store import Vectrix

K_KIND = "_vx_kind"
K_SESSION = "_vx_session"
K_ROLE = "_vx_role"
K_TURN = "_vx_turn"
K_TS = "_vx_ts"
K_FEEDBACK = "_vx_feedback"
K_SUPERSEDED_BY = "_vx_superseded_by"
K_SUPERSEDES = "_vx_supersedes"
K_SCORING = "_vx_scoring"
K_EXPIRES = "_vx_expires"
K_CONSOLIDATED_FROM = "_vx_consolidated_from"
K_SUPERSEDED_AT = "_vx_superseded_at"

KIND_TURN = "turn"
KIND_FACT = "fact"
KIND_PINNED = "pinned"
KINDS = (KIND_TURN, KIND_FACT, KIND_PINNED)
OUTCOMES = ("useful", "dead_end", "corrected")
MODES = SEARCH_MODES

RESERVED_PREFIX = "_vx_"

feedback_score = scoring.feedback_score

_HEADERS = {"pinned": "Pinned facts:", "recent": "Recent conversation:", "recalled": "Relevant memories:"}


@dataclass
class ContextBlock:
    """A ready-to-inject slice of memory, assembled under one token budget.

    Order is deliberate: pinned facts first because they always apply, then the most
    recent turns so the model has the thread, then whatever else the query pulled in
    with the tokens that remain.
    """

    pinned: List[Result]
    recent: List[Result]
    recalled: List[Result]
    token_budget: int
    tokens_used: int = 0
    tokens_by_section: Dict[str, int] = field(default_factory=dict)
    over_budget: bool = False
    cut_recent: int = 0
    cut_recalled: int = 0
    note: str = ""

    @property
    def text(self) -> str:
        """The block as plain text, ready to prepend to a prompt."""
        sections = []
        for name, items in (("pinned", self.pinned), ("recent", self.recent), ("recalled", self.recalled)):
            if items:
                lines = [_render(name, r) for r in items]
                sections.append(_HEADERS[name] + "\n" + "\n".join(lines))
        return "\n\n".join(sections)

    @property
    def ids(self) -> List[str]:
        return [r.id for r in self.pinned + self.recent + self.recalled]

    def __str__(self) -> str:
        return self.text


def _render(section: str, r: Result) -> str:
    text = " ".join(r.text.split())
    if section == "recent":
        return f"{r.metadata.get(K_ROLE) or 'user'}: {text}"
    return f"- {text}"


@dataclass
class ConsolidationReport:
    """What consolidate() did."""

    session: Optional[str]
    batches: int = 0
    turns_consolidated: List[str] = field(default_factory=list)
    turns_deleted: int = 0
    facts: List[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    completed: bool = False

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass
class HistoryEntry:
    """One memory in a supersession chain."""

    id: str
    text: str
    kind: str
    ts: datetime
    live: bool
    superseded_by: Optional[str]
    superseded_at: Optional[datetime]
    supersedes: List[str]


def _check_positive(value, name: str, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive number, not {type(value).__name__}")
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be a positive{'' if allow_inf else ' finite'} number, got {value!r}")
    return float(value)


def _check_weight(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _check_kinds(kinds) -> tuple:
    if isinstance(kinds, str):
        kinds = (kinds,)
    try:
        kinds = tuple(kinds)
    except TypeError:
        raise TypeError(f"kinds must be a kind or a sequence of kinds from {KINDS}") from None
    if not kinds:
        raise ValueError(f"kinds must name at least one of {KINDS}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown kind {bad[0]!r}; expected some of {KINDS}")
    return tuple(dict.fromkeys(kinds))


def _check_session(session) -> Optional[str]:
    if session is not None and not isinstance(session, str):
        raise TypeError(f"session must be a str or None, not {type(session).__name__}")
    if session is not None:
        check_text(session, "session")
    return session


def _check_nonneg_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def _check_ttl_map(ttl_days) -> Dict[str, Optional[float]]:
    if ttl_days is None:
        return {}
    if not isinstance(ttl_days, dict):
        raise TypeError("ttl_days must be a dict of kind -> days, e.g. {'turn': 30}")
    out = {}
    for k, v in ttl_days.items():
        if k not in KINDS:
            raise ValueError(f"ttl_days has unknown kind {k!r}; expected some of {KINDS}")
        out[k] = None if v is None else _check_positive(v, f"ttl_days[{k!r}]", allow_inf=True)
    return out


def _counter_name(session: Optional[str]) -> str:
    return "turn:" + json.dumps(session)


class ConversationMemory:
    """Remember, recall, grade, forget, consolidate and assemble memory.

    Reached as ``db.memory``; ``db.remember()``, ``db.recall()``, ``db.feedback()``,
    ``db.context()``, ``db.forget()`` and ``db.consolidate()`` delegate here.
    """

    def __init__(self, db: "Vectrix", half_life_days: float = 7.0, recency_weight: float = 0.5,
                 feedback_weight: float = 0.25, feedback_half_life_days: float = 30.0,
                 ttl_days: Optional[Dict[str, Optional[float]]] = None,
                 judge: Optional[Callable[[str, List[str]], Sequence[bool]]] = None,
                 judge_candidates: int = 5, hybrid_weight: float = 0.5):
        self.db = db
        self.hybrid_weight = check_hybrid_weight(hybrid_weight)
        self.half_life_days = _check_positive(half_life_days, "half_life_days")
        self.recency_weight = _check_weight(recency_weight, "recency_weight")
        self.feedback_weight = _check_weight(feedback_weight, "feedback_weight")
        self.feedback_half_life_days = _check_positive(feedback_half_life_days, "feedback_half_life_days")
        self.ttl_days = _check_ttl_map(ttl_days)
        if judge is not None and not callable(judge):
            raise TypeError("judge must be a callable (new_text, [old_texts]) -> [bool, ...]")
        self.judge = judge
        if isinstance(judge_candidates, bool) or not isinstance(judge_candidates, int) or judge_candidates < 1:
            raise ValueError("judge_candidates must be an int >= 1")
        self.judge_candidates = judge_candidates

    @property
    def settings(self) -> Dict[str, float]:
        """The ranking parameters, as the sweep engine names them."""
        return {"half_life_days": self.half_life_days, "recency_weight": self.recency_weight,
                "feedback_weight": self.feedback_weight,
                "feedback_half_life_days": self.feedback_half_life_days, "hybrid_weight": self.hybrid_weight}

    # ------------------------------------------------------------------ writing

    def remember(self, text: str, session: Optional[str] = None, role: str = "user",
                 turn: Optional[int] = None, timestamp=None, pinned: bool = False,
                 kind: Optional[str] = None, metadata: Optional[dict] = None, id: Optional[str] = None,
                 ttl_days: Optional[float] = None, check: Optional[bool] = None) -> str:
        """Store one memory and return its id.

        A turn is numbered automatically within its session when not given.
        ``pinned=True`` stores a fact that ``context()`` always includes; ``kind="fact"``
        stores a standalone fact that is recalled by relevance but not pinned.
        ``ttl_days`` overrides the per-kind TTL for this memory (``math.inf``: never).
        ``check`` runs the contradiction judge (default: when one is configured and the
        memory is a fact or pinned); ``check=False`` skips it.
        """
        check_text(text, "text")
        if not text.strip():
            raise ValueError("text must not be empty or only whitespace")
        session = _check_session(session)
        if not isinstance(role, str) or not role:
            raise TypeError("role must be a non-empty str")
        check_text(role, "role")
        if not isinstance(pinned, bool):
            raise TypeError("pinned must be a bool")
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
        if pinned and kind not in (None, KIND_PINNED):
            raise ValueError(f"pinned=True stores a pinned fact; it cannot also be kind={kind!r}")
        kind = KIND_PINNED if pinned else (kind or KIND_TURN)
        if turn is not None:
            turn = _check_nonneg_int(turn, "turn")
            if turn >= 2**62:
                raise ValueError(f"turn must be below 2**62, got {turn}")
            if kind != KIND_TURN:
                raise ValueError(f"turn numbers belong to turns, not to a {kind}")
        ts = to_epoch(timestamp, "timestamp")
        meta = self._check_caller_metadata(metadata)
        if id is not None:
            check_id(id)
        ttl = self._ttl_for(kind, ttl_days)
        if check is not None and not isinstance(check, bool):
            raise TypeError("check must be True, False or None")
        run_judge = check if check is not None else (self.judge is not None and kind != KIND_TURN)
        if run_judge and self.judge is None:
            raise ValueError("check=True needs a judge; pass judge= to ConversationMemory")

        db = self.db
        with db._lock:
            db._check_open()
            if id is not None and id in db._m.pos_of_id:
                raise ValueError(f"id already exists: {id!r}")
            vec = db._embed([text])[0]
            contradicted = self._judge(text, vec, session, ts) if run_judge else []
            new_id = id or _new_id()
            meta.update({K_KIND: kind, K_SESSION: session, K_ROLE: role, K_TS: ts})
            if ttl is not None:
                meta[K_EXPIRES] = ts + ttl * DAY
            if contradicted:
                meta[K_SUPERSEDES] = contradicted
            with db._transaction() as tx:
                if kind == KIND_TURN:
                    meta[K_TURN] = self._claim_turn(tx, session, turn)
                db._ensure_dim(tx, vec.shape[0])
                tx.insert(new_id, text, meta, vec)
                for old in contradicted:
                    self._mark_superseded(tx, old, new_id, ts)
            return new_id

    def _check_caller_metadata(self, metadata) -> dict:
        if metadata is None:
            return {}
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict, not {type(metadata).__name__}")
        check_json(metadata)
        reserved = [k for k in metadata if k.startswith(RESERVED_PREFIX)]
        if reserved:
            raise ValueError(f"metadata key {reserved[0]!r} is reserved: keys starting with "
                             f"{RESERVED_PREFIX!r} belong to vxmem")
        return json.loads(json.dumps(metadata))

    def _ttl_for(self, kind: str, ttl_days) -> Optional[float]:
        if ttl_days is not None:
            ttl = _check_positive(ttl_days, "ttl_days", allow_inf=True)
        else:
            ttl = self.ttl_days.get(kind)
        return None if ttl is None or math.isinf(ttl) else ttl

    def _claim_turn(self, tx, session: Optional[str], turn: Optional[int]) -> int:
        """The next turn number of ``session``, or ``turn`` if no live turn holds it.

        The counter lives in the database and only grows, so numbers are never reused:
        not after reopening, forgetting or consolidating. It moves in the caller's
        transaction, so a call that fails consumes nothing.
        """
        name = _counter_name(session)
        if turn is None:
            return tx.take_counter(name)
        if self._turn_held(session, turn):
            raise ValueError(f"turn {turn} of session {session!r} is already held by a live turn")
        tx.raise_counter(name, turn + 1)
        return turn

    def _turn_held(self, session, turn: int) -> bool:
        m = self.db._m
        return bool(np.any(m.turn[self.db._select(session, (KIND_TURN,))] == turn))

    def _judge(self, text: str, vec: np.ndarray, session, ts: float) -> List[str]:
        db = self.db
        pos = db._select(session, (KIND_FACT, KIND_PINNED), live_at=ts, include_superseded=False)
        if pos.size == 0:
            return []
        top, _ = db._topk(vec, pos, self.judge_candidates, session)
        ids = [db._m.ids[p] for p in top]
        texts = [db._m.texts[p] for p in top]
        verdicts = self.judge(text, texts)
        if isinstance(verdicts, (str, bytes)) or not isinstance(verdicts, Iterable):
            raise TypeError(f"judge must return a sequence of bools, got {type(verdicts).__name__}")
        verdicts = list(verdicts)
        if len(verdicts) != len(ids):
            raise ValueError(f"judge returned {len(verdicts)} verdicts for {len(ids)} candidates")
        if not all(isinstance(v, (bool, np.bool_)) for v in verdicts):
            raise TypeError("judge must return one bool per candidate")
        return [i for i, v in zip(ids, verdicts) if v]

    def _mark_superseded(self, tx, old_id: str, new_id: str, ts: float) -> None:
        m = self.db._m
        meta = dict(m.metas[m.pos_of_id[old_id]])
        if meta.get(K_SUPERSEDED_BY) is None:
            meta[K_SUPERSEDED_BY] = new_id
            meta[K_SUPERSEDED_AT] = ts
            tx.update_meta(old_id, meta)

    def _memory_pos(self, id: str) -> int:
        check_id(id)
        m = self.db._m
        p = m.pos_of_id.get(id)
        if p is None or m.kind[p] < 0:  # the mirror's kind column: a well-formed memory
            raise KeyError(f"no memory with id {id!r}")
        return p

    def feedback(self, id: str, outcome: str, correction: Optional[str] = None, timestamp=None) -> Optional[str]:
        """Record how a recalled memory turned out.

        ``useful`` lifts it in later recall, ``dead_end`` lowers it, and ``corrected``
        lowers it and, when correction text is given, stores the corrected fact as a new
        memory that supersedes this one (and any correction of it still live, so only the
        newest correction stays live). Returns the new memory's id in that case.
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}; expected one of {OUTCOMES}")
        if correction is not None:
            if outcome != "corrected":
                raise ValueError("correction text goes with outcome='corrected' only")
            check_text(correction, "correction")
            if not correction.strip():
                raise ValueError("correction must not be empty")
        ts = to_epoch(timestamp, "timestamp")
        db = self.db
        with db._lock:
            db._check_open()
            p = self._memory_pos(id)
            m = db._m
            old_meta = dict(m.metas[p])
            old_meta[K_FEEDBACK] = list(old_meta.get(K_FEEDBACK) or []) + [[outcome, ts]]
            if correction is None:
                with db._transaction() as tx:
                    tx.update_meta(id, old_meta)
                return None
            old_kind = old_meta[K_KIND]
            kind = KIND_FACT if old_kind == KIND_TURN else old_kind
            vec = db._embed([correction])[0]
            heads = self._live_heads(id)
            new_id = _new_id()
            new_meta = {K_KIND: kind, K_SESSION: old_meta.get(K_SESSION), K_ROLE: old_meta.get(K_ROLE, "user"),
                        K_TS: ts, K_SUPERSEDES: list(dict.fromkeys([id] + heads))}
            ttl = self._ttl_for(kind, None)
            if ttl is not None:
                new_meta[K_EXPIRES] = ts + ttl * DAY
            if old_meta.get(K_SUPERSEDED_BY) is None:
                old_meta[K_SUPERSEDED_BY] = new_id
                old_meta[K_SUPERSEDED_AT] = ts
            with db._transaction() as tx:
                tx.update_meta(id, old_meta)
                tx.insert(new_id, correction, new_meta, vec)
                for h in heads:
                    if h != id:
                        self._mark_superseded(tx, h, new_id, ts)
            return new_id

    def _live_heads(self, id: str) -> List[str]:
        """The live ends of the supersession links that start at ``id``."""
        m = self.db._m
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

    # ------------------------------------------------------------------ deleting

    def forget(self, session: Optional[str] = None, kinds: Sequence[str] = (KIND_TURN,), older_than=None,
               ids: Optional[Sequence[str]] = None, superseded: bool = False, now=None) -> int:
        """Delete memories and return how many went.

        ``ids`` names them outright; an id that is not a memory is left alone. Otherwise
        the selection is the ``kinds`` in ``session`` (None means every session) older
        than ``older_than`` (days or a datetime); ``superseded=True`` selects only memories
        a correction or contradiction already replaced. Deleting is real: this is the one
        memory operation that loses information on purpose.
        """
        db = self.db
        if ids is not None:
            if isinstance(ids, str):
                ids = [ids]
            ids = [check_id(i, "ids[]") for i in ids]
            with db._lock:
                db._check_open()
                m = db._m
                chosen = [i for i in dict.fromkeys(ids)
                          if i in m.pos_of_id and m.kind[m.pos_of_id[i]] >= 0]
                return self._delete(chosen)
        session = _check_session(session)
        kinds = _check_kinds(kinds)
        if not isinstance(superseded, bool):
            raise TypeError("superseded must be a bool")
        now_ts = to_epoch(now)
        cutoff = days_to_seconds(older_than, now_ts)
        with db._lock:
            db._check_open()
            m = db._m
            pos = db._select(... if session is None else session, kinds)
            if cutoff is not None:
                pos = pos[m.ts[pos] < cutoff]
            if superseded:
                pos = pos[m.superseded[pos]]
            return self._delete([m.ids[p] for p in pos.tolist()])

    def _delete(self, ids: List[str]) -> int:
        if not ids:
            return 0
        with self.db._transaction() as tx:
            tx.delete(ids)
        return len(ids)

    def expire(self, now=None) -> int:
        """Delete every memory past its time to live. Returns the count.

        Recall and context already skip expired memories, so this is about space and the
        audit trail, not correctness; run it whenever suits.
        """
        now_ts = to_epoch(now)
        db = self.db
        with db._lock:
            db._check_open()
            m = db._m
            pos = db._select(..., KINDS)
            pos = pos[m.expires[pos] <= now_ts]
            return self._delete([m.ids[p] for p in pos.tolist()])

    # ------------------------------------------------------------------ consolidation

    def consolidate(self, session: Optional[str], summarize: Callable[[List[dict]], List[str]],
                    keep_recent: int = 6, older_than=None, batch_turns: int = 40, delete: bool = True,
                    pinned: bool = False, now=None) -> ConsolidationReport:
        """Turn old turns into standalone facts and drop the turns.

        ``summarize`` receives ``{"role", "text", "ts"}`` dicts, oldest first, and returns
        the facts worth keeping as separate, self-contained strings. It is called once per
        ``batch_turns`` turns. The last ``keep_recent`` turns stay. Facts are dated at the
        newest turn they summarise and stamped with the turn ids they came from. Each
        batch is one transaction: its facts are stored and its turns deleted together, so
        if ``summarize`` raises, finished batches stay done, the rest stay untouched, and
        the error carries the partial report as ``.report``.
        """
        session = _check_session(session)
        if not callable(summarize):
            raise TypeError("summarize must be a callable list[dict] -> list[str]")
        keep_recent = _check_nonneg_int(keep_recent, "keep_recent")
        batch_turns = check_limit(batch_turns, "batch_turns")
        if not isinstance(delete, bool) or not isinstance(pinned, bool):
            raise TypeError("delete and pinned must be bools")
        now_ts = to_epoch(now)
        cutoff = days_to_seconds(older_than, now_ts)
        db = self.db
        report = ConsolidationReport(session=session)
        kind = KIND_PINNED if pinned else KIND_FACT
        with db._lock:
            db._check_open()
            m = db._m
            pos = db._select(session, (KIND_TURN,), live_at=now_ts, include_superseded=False)
            pos = np.array(self._turn_order(pos), dtype=np.int64)
            if keep_recent:
                pos = pos[:-keep_recent] if pos.size > keep_recent else pos[:0]
            if cutoff is not None:
                pos = pos[m.ts[pos] < cutoff]
            # Batches hold ids, not positions: a commit may compact the mirror.
            ids = [m.ids[p] for p in pos.tolist()]
            batches = [ids[i:i + batch_turns] for i in range(0, len(ids), batch_turns)]
            try:
                for batch in batches:
                    self._consolidate_batch(batch, summarize, kind, session, delete, report)
                report.completed = True
            except Exception as exc:
                exc.report = report
                raise
        return report

    def _consolidate_batch(self, turn_ids: List[str], summarize, kind: str, session, delete: bool,
                           report: ConsolidationReport) -> None:
        db = self.db
        m = db._m
        plist = [m.pos_of_id[i] for i in turn_ids]
        items = [{"role": m.metas[p].get(K_ROLE, "user"), "text": m.texts[p], "ts": to_datetime(float(m.ts[p]))}
                 for p in plist]
        newest = float(max(m.ts[p] for p in plist))
        tokens_before = int(sum(int(m.tokens[p]) for p in plist))
        facts = summarize(items)
        if isinstance(facts, (str, bytes)) or not isinstance(facts, (list, tuple)):
            raise TypeError(f"summarize must return a list of strings, got {type(facts).__name__}")
        for i, f in enumerate(facts):
            if not isinstance(f, str):
                raise TypeError(f"summarize returned a {type(f).__name__} at position {i}; expected str")
            check_text(f, f"summary fact {i}")
        facts = [f.strip() for f in facts if f.strip()]
        vecs = db._embed(facts) if facts else np.zeros((0, 1), dtype=np.float32)
        ttl = self._ttl_for(kind, None)
        ids = [_new_id() for _ in facts]
        with db._transaction() as tx:
            for fid, text, vec in zip(ids, facts, vecs):
                meta = {K_KIND: kind, K_SESSION: session, K_ROLE: "summary", K_TS: newest,
                        K_CONSOLIDATED_FROM: list(turn_ids)}
                if ttl is not None:
                    meta[K_EXPIRES] = newest + ttl * DAY
                db._ensure_dim(tx, vec.shape[0])
                tx.insert(fid, text, meta, vec)
            if delete:
                tx.delete(turn_ids)
        report.batches += 1
        report.turns_consolidated.extend(turn_ids)
        report.turns_deleted += len(turn_ids) if delete else 0
        report.facts.extend(ids)
        report.tokens_before += tokens_before
        report.tokens_after += sum(int(db.token_counter(f)) for f in facts)

    # ------------------------------------------------------------------ reading

    def turns(self, session: Optional[str], limit: Optional[int] = None, now=None) -> List[Result]:
        """A session's turns in order; the last ``limit`` of them if given.

        Expired turns (at ``now``) are left out; superseded ones stay, flagged in their
        metadata, because this is the transcript.
        """
        session = _check_session(session)
        if limit is not None:
            limit = check_limit(limit)
        now_ts = to_epoch(now)
        db = self.db
        with db._lock:
            db._check_open()
            db._refresh_if_changed()
            pos = db._select(session, (KIND_TURN,), live_at=now_ts)
            ordered = self._turn_order(pos)
            if limit is not None:
                ordered = ordered[-limit:]
            return [db._result(p, None) for p in ordered]

    def _turn_order(self, pos: np.ndarray) -> List[int]:
        """Positions in turn order (then time, then insertion)."""
        m = self.db._m
        turn = np.nan_to_num(m.turn[pos], nan=0.0)
        return pos[np.lexsort((pos, m.ts[pos], turn))].tolist()

    def history(self, id: str) -> List[HistoryEntry]:
        """The supersession chain ``id`` belongs to, oldest first.

        Follows correction and contradiction links both ways, so "where did I live
        before?" has an answer even after the old fact dropped out of recall.
        """
        db = self.db
        with db._lock:
            db._check_open()
            self._memory_pos(id)
            m = db._m
            seen, stack = set(), [id]
            while stack:
                cur = stack.pop()
                if cur in seen or cur not in m.pos_of_id or m.kind[m.pos_of_id[cur]] < 0:
                    continue
                seen.add(cur)
                meta = m.metas[m.pos_of_id[cur]]
                if meta.get(K_SUPERSEDED_BY):
                    stack.append(meta[K_SUPERSEDED_BY])
                stack.extend(meta.get(K_SUPERSEDES) or ())
            out = []
            for cur in seen:
                p = m.pos_of_id[cur]
                meta = m.metas[p]
                at = meta.get(K_SUPERSEDED_AT)
                out.append(HistoryEntry(
                    id=cur, text=m.texts[p], kind=meta.get(K_KIND), ts=to_datetime(meta[K_TS]),
                    live=meta.get(K_SUPERSEDED_BY) is None, superseded_by=meta.get(K_SUPERSEDED_BY),
                    superseded_at=to_datetime(at) if at is not None else None,
                    supersedes=list(meta.get(K_SUPERSEDES) or [])))
            out.sort(key=lambda e: (e.ts, e.id))
            return out

    def recall(self, query: str, session: Optional[str] = None, limit: int = 10,
               token_budget: Optional[int] = None, score_gap: Optional[float] = None,
               kinds: Sequence[str] = KINDS, include_superseded: bool = False, mode: Optional[str] = None,
               now=None, exclude_ids: Sequence[str] = (), hybrid_weight: Optional[float] = None) -> Results:
        """Relevance, blended with recency and feedback, cut to a budget.

        ``session=None`` recalls across every session. The most relevant eligible
        memories (a pool of ``max(4 x limit, 40)``) have their relevance min-max normalised
        across the pool, then ``score = relevance_norm + recency_weight * 0.5 ** (age /
        half_life_days) + feedback_weight * clamp(feedback, -2, 2)``; ties go to the newer.
        Embedding models put cosines in a narrow band; measured against the spread the
        candidates actually have, "clearly more relevant" means what it says.

        ``mode`` picks the relevance: ``"dense"`` (default) cosine, ``"lexical"`` BM25 from
        the FTS5 index, ``"hybrid"`` both fused with ``hybrid_weight`` (default: the
        memory's, 0.5). The blend on top is the same whatever the mode.
        """
        if token_budget is not None:
            token_budget = check_limit(token_budget, "token_budget")
        if score_gap is not None:
            score_gap = _check_weight(score_gap, "score_gap")
        with self.db._lock:  # positions stay valid only while no one else writes
            pool = self.candidate_pool(query, session=session, limit=limit, kinds=kinds,
                                       include_superseded=include_superseded, mode=mode, now=now,
                                       exclude_ids=exclude_ids, hybrid_weight=hybrid_weight)
            return self._rank(query, pool, score_gap, token_budget)

    def _rank(self, query: str, pool: Dict[str, Any], score_gap, token_budget) -> Results:
        limit = pool["limit"]
        db = self.db
        if pool["positions"].size == 0:
            return Results([], query=query, token_budget=token_budget)
        score, rel_norm, recency, fb = scoring.score_pool(
            pool["relevance"], pool["age_days"], pool["feedback_signs"], pool["feedback_ages"],
            self.half_life_days, self.recency_weight, self.feedback_weight, self.feedback_half_life_days)
        order = scoring.rank_order(score, pool["ts"])
        top = order[:limit]
        n_gap = scoring.apply_score_gap(score[top], score_gap)
        kept_gap = top[:n_gap]
        keep = scoring.fit_budget(pool["tokens"][kept_gap], token_budget)
        shipped = kept_gap[keep]
        items = []
        for i in shipped.tolist():
            r = db._result(int(pool["positions"][i]), float(score[i]))
            r.metadata[K_SCORING] = {
                "relevance": float(pool["relevance"][i]), "relevance_norm": float(rel_norm[i]),
                "recency": float(recency[i]), "feedback": float(fb[i]), "score": float(score[i]),
                "age_days": float(pool["age_days"][i]), "mode": pool["mode"],
            }
            if pool["mode"] != "dense":  # which relevance parts contributed
                r.metadata[K_SCORING].update(_relevance_parts(pool, i))
            items.append(r)
        cut = int(top.size - shipped.size)
        return Results(items, query=query, truncated=cut > 0, cut_count=cut,
                       token_estimate=int(pool["tokens"][shipped].sum()), token_budget=token_budget)

    def candidate_pool(self, query: str, session: Optional[str] = None, limit: int = 10,
                       kinds: Sequence[str] = KINDS, include_superseded: bool = False,
                       mode: Optional[str] = None, now=None, exclude_ids: Sequence[str] = (),
                       pool: Optional[int] = None, hybrid_weight: Optional[float] = None) -> Dict[str, Any]:
        """The candidates ``recall()`` blends, with everything ranking needs, as arrays.

        The workbench caches this at each probe and re-ranks it for every sweep point.
        ``pool`` overrides the pool size (default ``max(4 x limit, 40)``). ``relevance`` is
        the mode's score; ``dense`` and ``lexical`` hold the raw parts (NaN where the mode
        did not compute one), so a hybrid pool can be re-fused with another weight by
        :func:`vxmem.scoring.fuse_relevance` without searching again.
        """
        check_text(query, "query")
        session = _check_session(session)
        limit = check_limit(limit)
        kinds = _check_kinds(kinds)
        mode = check_mode(mode)
        hybrid_weight = self.hybrid_weight if hybrid_weight is None else check_hybrid_weight(hybrid_weight)
        if not isinstance(include_superseded, bool):
            raise TypeError("include_superseded must be a bool")
        if isinstance(exclude_ids, str):
            exclude_ids = (exclude_ids,)
        exclude_ids = tuple(check_id(i, "exclude_ids[]") for i in exclude_ids)
        now_ts = to_epoch(now)
        size = scoring.pool_size(limit) if pool is None else check_limit(pool, "pool")
        db = self.db
        with db._lock:
            db._check_open()
            db._refresh_if_changed()
            m = db._m
            pos = db._select(... if session is None else session, kinds, live_at=now_ts,
                             include_superseded=include_superseded, exclude_ids=exclude_ids)
            cand = db._candidates(query, pos, size, mode, hybrid_weight, session=... if session is None else session)
            pos = cand["positions"]
            ts = m.ts[pos]
            plist = pos.tolist()
            metas = [m.metas[p] for p in plist]
            graded = [(i, scoring.feedback_events(meta, now_ts)) for i, meta in enumerate(metas)
                      if meta.get(K_FEEDBACK)]  # most memories have none
            width = max((len(s) for _, (s, _) in graded), default=0)
            fs = np.zeros((pos.size, width))
            fa = np.zeros((pos.size, width))
            for i, (s, a) in graded:
                fs[i, : len(s)] = s
                fa[i, : len(a)] = a
            return {
                "positions": pos, "ids": [m.ids[p] for p in plist],
                "relevance": cand["relevance"], "dense": cand["dense"], "lexical": cand["lexical"],
                "hybrid_weight": hybrid_weight, "ts": ts, "age_days": (now_ts - ts) / DAY,
                "feedback_signs": fs, "feedback_ages": fa, "tokens": m.tokens[pos].copy(),
                "kinds": [meta.get(K_KIND) for meta in metas],
                "sessions": [meta.get(K_SESSION) for meta in metas],
                "limit": limit, "now": now_ts, "mode": mode,
            }

    def context(self, query: str, session: Optional[str] = None, token_budget: int = 1500,
                recent_turns: int = 6, limit: int = 10, now=None, **recall_kwargs) -> ContextBlock:
        """Assemble pinned facts, recent turns and recalled memories under one budget.

        Pinned facts are never cut: they are the caller's own declaration of what always
        matters. If they alone exceed the budget the block says so (``over_budget``)
        rather than dropping one. Recent turns (never superseded ones) are cut
        oldest-first. Whatever is left goes to recall, and a recalled memory that does
        not fit is left out rather than shipped over budget. Tokens are counted on the
        lines the block renders, headers included, so ``tokens_used`` is the cost of
        ``.text``.
        """
        check_text(query, "query")
        session = _check_session(session)
        token_budget = check_limit(token_budget, "token_budget")
        recent_turns = _check_nonneg_int(recent_turns, "recent_turns")
        limit = check_limit(limit)
        for bad in ("token_budget", "session", "limit", "now", "query"):
            recall_kwargs.pop(bad, None)
        unknown = set(recall_kwargs) - {"score_gap", "kinds", "include_superseded", "mode", "exclude_ids",
                                        "hybrid_weight"}
        if unknown:
            raise TypeError(f"context() got unexpected recall arguments: {sorted(unknown)}")
        now_ts = to_epoch(now)
        db = self.db
        count = db.token_counter
        with db._lock:
            db._check_open()
            db._refresh_if_changed()
            m = db._m
            sel = ... if session is None else session
            pinned_pos = db._select(sel, (KIND_PINNED,), live_at=now_ts, include_superseded=False)
            pinned = [db._result(p, None) for p in sorted(pinned_pos.tolist(), key=lambda p: (m.ts[p], p))]
            used = {"pinned": 0, "recent": 0, "recalled": 0}
            if pinned:
                used["pinned"] = count(_HEADERS["pinned"]) + sum(count(_render("pinned", r)) for r in pinned)
            left = token_budget - used["pinned"]
            over = left < 0
            recent: List[Result] = []
            cut_recent = 0
            if session is not None and recent_turns:
                turn_pos = db._select(session, (KIND_TURN,), live_at=now_ts, include_superseded=False)
                last = self._turn_order(turn_pos)[-recent_turns:]
                header = count(_HEADERS["recent"])
                for p in reversed(last):  # newest first, so the oldest are the ones cut
                    r = db._result(p, None)
                    cost = count(_render("recent", r)) + (header if not recent else 0)
                    if cost <= left:
                        recent.insert(0, r)
                        left -= cost
                        used["recent"] += cost
                    else:
                        cut_recent = len(last) - len(recent)
                        break
            exclude = tuple(recall_kwargs.pop("exclude_ids", ())) + tuple(r.id for r in pinned + recent)
            recalled: List[Result] = []
            cut_recalled = 0
            if left > 0:
                res = self.recall(query, session=session, limit=limit, now=now_ts,
                                  exclude_ids=exclude, **recall_kwargs)
                header = count(_HEADERS["recalled"])
                for r in res:
                    cost = count(_render("recalled", r)) + (header if not recalled else 0)
                    if cost <= left:
                        recalled.append(r)
                        left -= cost
                        used["recalled"] += cost
                    else:
                        cut_recalled += 1
            note = ""
            if over:
                note = (f"pinned facts alone take {used['pinned']} tokens, over the budget of "
                        f"{token_budget}; none were dropped")
            return ContextBlock(pinned=pinned, recent=recent, recalled=recalled, token_budget=token_budget,
                                tokens_used=sum(used.values()), tokens_by_section=used, over_budget=over,
                                cut_recent=cut_recent, cut_recalled=cut_recalled, note=note)


def _relevance_parts(pool: Dict[str, Any], i: int) -> Dict[str, Any]:
    dense, lexical = float(pool["dense"][i]), float(pool["lexical"][i])
    parts = {"dense": None if math.isnan(dense) else dense, "lexical": None if math.isnan(lexical) else lexical}
    if pool["mode"] == "hybrid":
        parts["hybrid_weight"] = pool["hybrid_weight"]
    return parts


def _new_id() -> str:
    return uuid.uuid4().hex
