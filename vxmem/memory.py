"""Conversation memory on top of a collection.

A vector store remembers everything as equally true forever, which is the wrong shape
for a conversation. Here relevance is blended with a half-life recency and time-decayed
feedback; corrections and contradictions supersede old facts without deleting them;
memories expire by TTL; old turns consolidate into standalone facts through a summarizer
the caller brings; ``context()`` assembles pinned facts, recent turns and recalled
memories under one token budget.

Everything is stored as ordinary documents with reserved ``_vx_*`` metadata keys
(:mod:`vxmem.keys`), so a memory collection is still a plain collection: ``search()``,
``delete()`` and filters all work on it unchanged. The memory reads and writes the
collection only through its documented internal surface: ``_locked()`` (the lock and the
:class:`~vxmem.store.mirror.Mirror`), ``_transaction()``, ``_embed()``, ``_topk()`` and
``_candidates()``.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from . import consolidation, scoring
from .checks import (
    check_bool,
    check_choice,
    check_int,
    check_kinds,
    check_limit,
    check_number,
    check_positive,
    check_session,
    check_text,
    check_weight,
)
from .clock import DAY, TimeLike, days_to_seconds, to_epoch
from .consolidation import ConsolidationReport, Summarizer
from .context import ContextBlock, assemble
from .embed import reranks_by_default
from .keys import (
    FORGET_KINDS,
    K_CONSOLIDATED_FROM,
    K_EXPIRES,
    K_FEEDBACK,
    K_FEEDBACK_FOLDED,
    K_KIND,
    K_ROLE,
    K_SCORING,
    K_SESSION,
    K_SUPERSEDED_AT,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    K_TS,
    K_TURN,
    K_USER,
    KIND_FACT,
    KIND_PINNED,
    KIND_TURN,
    KINDS,
    OUTCOMES,
    RESERVED_PREFIX,
    TURN_LIMIT,
)
from .pool import CandidatePool
from .recall import MemoryResults, drop_below, gather, rank, rerank_pool
from .rerank import Reranker, check_reranker, reranker_name
from .store import Collection, Result
from .store.checks import (
    FilterValues,
    check_filter,
    check_hybrid_weight,
    check_id,
    check_ids,
    check_json,
    check_mode,
    json_copy,
)
from .store.database import Transaction
from .store.mirror import ANY_SESSION, Mirror
from .supersession import HistoryEntry, chain, live_heads, mark_superseded

# The spec documents the reserved keys, kinds and outcomes as attributes of this module.
__all__ = [
    "ConversationMemory", "ContextBlock", "ConsolidationReport", "HistoryEntry", "feedback_score",
    "K_KIND", "K_SESSION", "K_USER", "K_ROLE", "K_TURN", "K_TS", "K_FEEDBACK", "K_SUPERSEDED_BY", "K_SUPERSEDES",
    "K_SUPERSEDED_AT", "K_SCORING", "K_EXPIRES", "K_CONSOLIDATED_FROM", "KIND_TURN", "KIND_FACT", "KIND_PINNED",
    "KINDS", "OUTCOMES",
]

Judge = Callable[[str, list[str]], Sequence[bool]]
# A memory keeps at most this many feedback events; past it the oldest are folded into one
# decayed sum (``_vx_feedback_folded``), which leaves the score as it was.
FEEDBACK_EVENTS_KEPT = 64
RECALL_ARGS = ("score_gap", "kinds", "include_superseded", "mode", "exclude_ids", "hybrid_weight", "min_relevance",
               "rerank")

feedback_score = scoring.feedback_score


def _check_ttl_map(ttl_days: Any) -> dict[str, float | None]:
    if ttl_days is None:
        return {}
    if not isinstance(ttl_days, dict):
        raise TypeError("ttl_days must be a dict of kind -> days, e.g. {'turn': 30}")
    out: dict[str, float | None] = {}
    for k, v in ttl_days.items():
        if k not in KINDS:
            raise ValueError(f"ttl_days has unknown kind {k!r}; expected some of {KINDS}")
        out[k] = None if v is None else check_positive(v, f"ttl_days[{k!r}]", allow_inf=True)
    return out


def _check_verdicts(verdicts: Any, n: int) -> list[bool]:
    if isinstance(verdicts, (str, bytes)) or not isinstance(verdicts, Iterable):
        raise TypeError(f"judge must return a sequence of bools, got {type(verdicts).__name__}")
    verdicts = list(verdicts)
    if len(verdicts) != n:
        raise ValueError(f"judge returned {len(verdicts)} verdicts for {n} candidates")
    if not all(isinstance(v, (bool, np.bool_)) for v in verdicts):
        raise TypeError("judge must return one bool per candidate")
    return [bool(v) for v in verdicts]


def _check_min_relevance(value: Any) -> float | None:
    return None if value is None else check_number(value, "min_relevance")


def _new_id() -> str:
    return uuid.uuid4().hex


def _check_user(user: Any) -> str | None:
    """A user's name (a non-empty ``str``), or None for no user in particular."""
    if user is None:
        return None
    if not isinstance(user, str):
        raise TypeError(f"user must be a str or None, not {type(user).__name__}")
    if not check_text(user, "user").strip():
        raise ValueError("user must be a non-empty str")
    return user


def _check_memory_filter(filter: Any) -> FilterValues | None:
    """A filter on the caller's own metadata, in the collection's syntax (``{key: value}``
    or ``{key: [values]}``); the reserved keys have arguments of their own."""
    flt = check_filter(filter)
    for key in flt or ():
        if key.startswith(RESERVED_PREFIX):
            raise ValueError(f"filter key {key!r} is reserved; narrow with session=, user= or kinds= instead")
    return flt


def _any_if_none(session: str | None) -> Any:
    """``session=None`` in recall, forget and context means every session."""
    return ANY_SESSION if session is None else session


class ConversationMemory:
    """Remember, recall, grade, forget, consolidate and assemble memory.

    Reached as ``db.memory``; ``db.remember()``, ``db.recall()``, ``db.feedback()``,
    ``db.context()``, ``db.forget()`` and ``db.consolidate()`` delegate here.

    :param db: the collection memories live in.
    :param half_life_days: relevance of a memory halves every this many days. Seven suits a
        chat product; a knowledge base wants longer.
    :param recency_weight: how much a brand-new memory gains over a very old one, on the
        same 0-to-1 scale relevance is measured on. At 0.5 a memory must be clearly more
        relevant, not slightly, to beat a fresher one; ties go to the newer.
    :param feedback_weight: how much one unit of feedback moves the result on that scale,
        bounded to plus or minus two units.
    :param feedback_half_life_days: feedback ages too: a dead end reported last month should
        not still bury a memory today.
    :param ttl_days: time to live per kind, e.g. ``{"turn": 30}``; missing or None means
        forever. A memory past its TTL is invisible to recall and context at once and is
        deleted by ``expire()``.
    :param judge: contradiction detector for facts, called as ``judge(new_text, [nearest
        stored fact texts])``; it returns one bool per candidate, True where the old fact is
        contradicted. Any LLM call fits; nothing is bundled.
    :param judge_candidates: how many nearest facts the judge sees.
    :param hybrid_weight: the dense share of hybrid relevance (``mode="hybrid"``, the default).
    :param rerank: whether ``recall()`` reranks its most relevant candidates with
        ``reranker`` by default. None: yes with vxmem's default embedder (the pipeline it
        was measured with), no with ``"hashing"`` or an embedder of your own.
    :param reranker: any ``(query, texts) -> scores`` callable, or a name (default: the
        bundled ms-marco-MiniLM-L-12-v2 cross-encoder; its model loads on first use).
    :param min_relevance: the default of ``recall(min_relevance=...)`` (raw scale; None:
        keep every candidate).
    """

    def __init__(self, db: Collection, half_life_days: float = scoring.HALF_LIFE_DAYS,
                 recency_weight: float = scoring.RECENCY_WEIGHT, feedback_weight: float = scoring.FEEDBACK_WEIGHT,
                 feedback_half_life_days: float = scoring.FEEDBACK_HALF_LIFE_DAYS,
                 ttl_days: dict[str, float | None] | None = None, judge: Judge | None = None,
                 judge_candidates: int = 5, hybrid_weight: float = scoring.HYBRID_WEIGHT, *,
                 rerank: bool | None = None, reranker: Reranker | str | None = None,
                 min_relevance: float | None = None):
        self.db = db
        self.rerank = None if rerank is None else check_bool(rerank, "rerank")
        self.reranker = check_reranker(reranker)
        self.min_relevance = _check_min_relevance(min_relevance)
        self.hybrid_weight = check_hybrid_weight(hybrid_weight)
        self.half_life_days = check_positive(half_life_days, "half_life_days")
        self.recency_weight = check_weight(recency_weight, "recency_weight")
        self.feedback_weight = check_weight(feedback_weight, "feedback_weight")
        self.feedback_half_life_days = check_positive(feedback_half_life_days, "feedback_half_life_days")
        self.ttl_days = _check_ttl_map(ttl_days)
        if judge is not None and not callable(judge):
            raise TypeError("judge must be a callable (new_text, [old_texts]) -> [bool, ...]")
        self.judge = judge
        self.judge_candidates = check_int(judge_candidates, "judge_candidates", minimum=1)

    @property
    def settings(self) -> dict[str, float]:
        """The ranking parameters, as the sweep engine names them."""
        return {"half_life_days": self.half_life_days, "recency_weight": self.recency_weight,
                "feedback_weight": self.feedback_weight,
                "feedback_half_life_days": self.feedback_half_life_days, "hybrid_weight": self.hybrid_weight}

    # ------------------------------------------------------------------ writing

    def remember(self, text: str, session: str | None = None, role: str = "user", turn: int | None = None,
                 timestamp: TimeLike = None, pinned: bool = False, kind: str | None = None,
                 metadata: dict[str, Any] | None = None, id: str | None = None, ttl_days: float | None = None,
                 check: bool | None = None, user: str | None = None) -> str:
        """Store one memory and return its id.

        A turn is numbered automatically within its session when not given.
        ``pinned=True`` stores a fact that ``context()`` always includes; ``kind="fact"``
        stores a standalone fact that is recalled by relevance but not pinned.

        :param text: what was said, or the fact.
        :param session: the conversation it belongs to (None: the unnamed one).
        :param role: who said it (``"user"``, ``"assistant"``, ...).
        :param turn: the turn number (a turn only). Numbers are never reused: one a live turn
            holds, or one below the session's next number (a forgotten or consolidated turn's),
            is refused.
        :param timestamp: when it was said (default: now).
        :param kind: ``"turn"`` (default), ``"fact"`` or ``"pinned"``.
        :param metadata: the caller's own JSON keys (none may start with ``_vx_``).
        :param id: the memory's id (default: a new random one).
        :param ttl_days: overrides the per-kind TTL for this memory (``math.inf``: never).
        :param check: runs the contradiction judge (default: when one is configured and the
            memory is a fact or pinned); ``check=False`` skips it for a memory you know is new.
            The judge runs outside the handle's lock, on the facts live when it is called; a
            fact it names that another write superseded or deleted meanwhile is left as it is.
        :param user: the user it belongs to, across their sessions (``_vx_user``), so
            ``recall(user=...)`` finds it from any session and ``context(user=...)`` includes
            it when pinned.
        """
        check_text(text, "text")
        if not text.strip():
            raise ValueError("text must not be empty or only whitespace")
        session = check_session(session)
        check_text(role, "role")
        if not role:
            raise ValueError("role must be a non-empty str")
        check_bool(pinned, "pinned")
        if kind is not None:
            check_choice(kind, "kind", KINDS)
        if pinned and kind not in (None, KIND_PINNED):
            raise ValueError(f"pinned=True stores a pinned fact; it cannot also be kind={kind!r}")
        kind = KIND_PINNED if pinned else (kind or KIND_TURN)
        if turn is not None:
            turn = check_int(turn, "turn", minimum=0, below=TURN_LIMIT)
            if kind != KIND_TURN:
                raise ValueError(f"turn numbers belong to turns, not to a {kind}")
        ts = to_epoch(timestamp, "timestamp")
        meta = self._check_caller_metadata(metadata)
        user = _check_user(user)
        if id is not None:
            check_id(id)
        ttl = self._ttl_for(kind, ttl_days)
        if check is not None:
            check_bool(check, "check")
        run_judge = check if check is not None else (self.judge is not None and kind != KIND_TURN)
        if run_judge and self.judge is None:
            raise ValueError("check=True needs a judge; pass judge= to ConversationMemory")

        db = self.db
        if id is not None:
            with db._locked() as m:  # fail fast, before the embedder runs
                self._refuse_taken(m, id)
        # The callables (embedder, token counter, judge) run outside the lock, on a snapshot.
        vec = db._embed([text])[0]
        tokens = db._count_tokens([text])[0]
        contradicted = self._judge(text, vec, session, ts) if run_judge else []
        with db._locked() as m:
            if id is not None:
                self._refuse_taken(m, id)
            # A fact the judge named that a write meanwhile superseded or deleted is left as it is.
            contradicted = [c for c in contradicted if (p := m.memory_position(c)) is not None and not m.superseded[p]]
            new_id = id or _new_id()
            meta.update(self._stamp(kind, session, role, ts, ttl))
            if user is not None:
                meta[K_USER] = user
            if contradicted:
                meta[K_SUPERSEDES] = contradicted
            with db._transaction() as tx:
                if kind == KIND_TURN:
                    meta[K_TURN] = self._claim_turn(m, tx, session, turn)
                tx.insert(new_id, text, meta, vec, tokens)
                for old in contradicted:
                    mark_superseded(m, tx, old, new_id, ts)
            return new_id

    @staticmethod
    def _refuse_taken(m: Mirror, id: str) -> None:
        if id in m.pos_of_id:
            raise ValueError(f"id already exists: {id!r}")

    @staticmethod
    def _stamp(kind: str, session: str | None, role: str, ts: float, ttl: float | None) -> dict[str, Any]:
        """The reserved keys every new memory carries."""
        meta: dict[str, Any] = {K_KIND: kind, K_SESSION: session, K_ROLE: role, K_TS: ts}
        if ttl is not None:
            meta[K_EXPIRES] = ts + ttl * DAY
        return meta

    @staticmethod
    def _check_caller_metadata(metadata: Any) -> dict[str, Any]:
        if metadata is None:
            return {}
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict, not {type(metadata).__name__}")
        check_json(metadata)
        reserved = [k for k in metadata if k.startswith(RESERVED_PREFIX)]
        if reserved:
            raise ValueError(f"metadata key {reserved[0]!r} is reserved: keys starting with "
                             f"{RESERVED_PREFIX!r} belong to vxmem")
        return dict(json_copy(metadata))

    def _ttl_for(self, kind: str, ttl_days: Any) -> float | None:
        ttl = check_positive(ttl_days, "ttl_days", allow_inf=True) if ttl_days is not None else self.ttl_days.get(kind)
        return None if ttl is None or math.isinf(ttl) else ttl

    def _claim_turn(self, m: Mirror, tx: Transaction, session: str | None, turn: int | None) -> int:
        """The next turn number of ``session``, or ``turn`` if it is not below it.

        The counter lives in the database and only grows, so numbers are never reused:
        not after reopening, forgetting or consolidating (an explicit ``turn`` below the
        counter is refused, as is one a live turn holds). It moves in the caller's
        transaction, so a call that fails consumes nothing.
        """
        name = "turn:" + json.dumps(session)
        if turn is None:
            return tx.take_counter(name)
        if np.any(m.turn[m.select(session, (KIND_TURN,))] == turn):
            raise ValueError(f"turn {turn} of session {session!r} is already held by a live turn")
        counter = tx.counter(name)
        if turn < counter:
            raise ValueError(f"turn {turn} of session {session!r} is below the session's next turn number "
                             f"({counter}): turn numbers are never reused")
        tx.raise_counter(name, turn + 1)
        return turn

    def _judge(self, text: str, vec: np.ndarray, session: str | None, ts: float) -> list[str]:
        """Ids of the live facts nearest to ``text`` that the judge says it contradicts.

        The candidates are read under the lock; the judge is called after it is released.
        """
        with self.db._locked() as m:
            pos = m.select(session, (KIND_FACT, KIND_PINNED), live_at=ts, include_superseded=False)
            if pos.size == 0 or self.judge is None:
                return []
            top, _ = self.db._topk(vec, pos, self.judge_candidates, session)
            ids = [m.ids[p] for p in top]
            texts = [m.texts[p] for p in top]
        verdicts = _check_verdicts(self.judge(text, texts), len(ids))
        return [i for i, v in zip(ids, verdicts) if v]

    @staticmethod
    def _memory_pos(m: Mirror, id: Any) -> int:
        check_id(id)
        p = m.memory_position(id)
        if p is None:
            raise KeyError(f"no memory with id {id!r}")
        return p

    def feedback(self, id: str, outcome: str, correction: str | None = None, timestamp: TimeLike = None) -> str | None:
        """Record how a recalled memory turned out.

        ``useful`` lifts it in later recall, ``dead_end`` lowers it, and ``corrected``
        lowers it and, when correction text is given, stores the corrected fact as a new
        memory that supersedes this one (and any correction of it still live, so only the
        newest correction stays live). Returns the new memory's id in that case, otherwise None.

        A memory keeps its last 64 events as they are; older ones are folded into one
        decayed sum dated at the newest of them, which scores exactly as they did under
        this memory's ``feedback_half_life_days`` (see :func:`vxmem.scoring.fold_feedback`).

        :param id: the memory recalled.
        :param outcome: ``"useful"``, ``"dead_end"`` or ``"corrected"``.
        :param correction: the corrected fact (with ``"corrected"`` only).
        :param timestamp: when the outcome was seen (default: now).
        """
        check_choice(outcome, "outcome", OUTCOMES)
        if correction is not None:
            if outcome != "corrected":
                raise ValueError("correction text goes with outcome='corrected' only")
            check_text(correction, "correction")
            if not correction.strip():
                raise ValueError("correction must not be empty")
        ts = to_epoch(timestamp, "timestamp")
        db = self.db
        with db._locked() as m:  # fail fast, before the embedder runs
            self._memory_pos(m, id)
        vec = tokens = None
        if correction is not None:  # the callables run outside the lock
            vec = db._embed([correction])[0]
            tokens = db._count_tokens([correction])[0]
        with db._locked() as m:
            old_meta = dict(m.metas[self._memory_pos(m, id)])
            self._record_feedback(old_meta, outcome, ts)
            if correction is None:
                with db._transaction() as tx:
                    tx.update_meta(id, old_meta)
                return None
            assert vec is not None and tokens is not None
            kind = KIND_FACT if old_meta[K_KIND] == KIND_TURN else old_meta[K_KIND]
            heads = live_heads(m, id)
            new_id = _new_id()
            new_meta = self._stamp(kind, old_meta.get(K_SESSION), old_meta.get(K_ROLE, "user"), ts,
                                   self._ttl_for(kind, None))
            new_meta[K_SUPERSEDES] = list(dict.fromkeys([id] + heads))
            if K_USER in old_meta:  # the corrected fact belongs to whom the old one did
                new_meta[K_USER] = old_meta[K_USER]
            if old_meta.get(K_SUPERSEDED_BY) is None:
                old_meta[K_SUPERSEDED_BY] = new_id
                old_meta[K_SUPERSEDED_AT] = ts
            with db._transaction() as tx:
                tx.update_meta(id, old_meta)
                tx.insert(new_id, correction, new_meta, vec, tokens)
                for h in heads:
                    if h != id:
                        mark_superseded(m, tx, h, new_id, ts)
            return new_id

    def _record_feedback(self, meta: dict[str, Any], outcome: str, ts: float) -> None:
        """Add one ``[outcome, ts]`` event to ``meta``; past :data:`FEEDBACK_EVENTS_KEPT`
        events, the older half is folded into ``_vx_feedback_folded`` (see
        :func:`vxmem.scoring.fold_feedback`), so a much-graded memory stays cheap to rank."""
        events = list(meta.get(K_FEEDBACK) or []) + [[outcome, ts]]
        if len(events) > FEEDBACK_EVENTS_KEPT:
            events, meta[K_FEEDBACK_FOLDED] = scoring.fold_feedback(
                events, meta.get(K_FEEDBACK_FOLDED), self.feedback_half_life_days, keep=FEEDBACK_EVENTS_KEPT // 2)
        meta[K_FEEDBACK] = events

    # ------------------------------------------------------------------ deleting

    def forget(self, session: str | None = None, kinds: Sequence[str] = FORGET_KINDS,
               older_than: float | datetime | None = None, ids: Sequence[str] | None = None,
               superseded: bool = False, now: TimeLike = None, filter: dict[str, Any] | None = None,
               user: str | None = None) -> int:
        """Delete memories and return how many went.

        Deleting is real: this is the one memory operation that loses information on purpose.

        :param ids: names the memories outright; an id that is not a memory is left alone,
            and so is one outside the selection the other arguments make: ``session``,
            ``older_than`` and ``superseded`` narrow the named memories, and so does
            ``kinds`` when it is given (by default ids of every kind go). Otherwise the
            selection is:
        :param session: the session (None: every session),
        :param kinds: the kinds it holds (default: turns),
        :param older_than: older than this many days, or than a datetime,
        :param superseded: only memories a correction or a contradiction already replaced,
            the audit trail you may keep or clear,
        :param now: the moment ``older_than`` counts back from (default: now),
        :param filter: only memories whose own metadata match it (the collection's filter
            syntax, e.g. ``{"topic": "billing"}``),
        :param user: only memories of this user (any session unless ``session`` is given).
        """
        named = None if ids is None else check_ids(ids)
        flt = _check_memory_filter(filter)
        user = _check_user(user)
        session = check_session(session)
        # With ids, only kinds the caller passed narrow them: the default (turns) is the selection's.
        kinds = KINDS if named is not None and kinds is FORGET_KINDS else check_kinds(kinds)
        check_bool(superseded, "superseded")
        now_ts = to_epoch(now)
        cutoff = days_to_seconds(older_than, now_ts)
        with self.db._locked() as m:
            pos = m.keep_matching(m.select(_any_if_none(session), kinds, user=user), flt)
            if cutoff is not None:
                pos = pos[m.ts[pos] < cutoff]
            if superseded:
                pos = pos[m.superseded[pos]]
            chosen = [m.ids[p] for p in pos.tolist()]
            if named is not None:
                wanted = set(named)
                chosen = [i for i in chosen if i in wanted]
            return self._delete(chosen)

    def _delete(self, ids: list[str]) -> int:
        if not ids:
            return 0
        with self.db._transaction() as tx:
            tx.delete(ids)
        return len(ids)

    def expire(self, now: TimeLike = None) -> int:
        """Delete every memory past its time to live. Returns the count.

        Recall and context already skip expired memories, so this is about space and the
        audit trail, not correctness; run it whenever suits.
        """
        now_ts = to_epoch(now)
        with self.db._locked() as m:
            pos = m.select(ANY_SESSION, KINDS)
            return self._delete([m.ids[p] for p in pos[m.expires[pos] <= now_ts].tolist()])

    def consolidate(self, session: str | None, summarize: Summarizer, keep_recent: int = 6,
                    older_than: float | datetime | None = None, batch_turns: int = 40, delete: bool = True,
                    pinned: bool = False, now: TimeLike = None) -> ConsolidationReport:
        """Turn old turns into standalone facts and drop the turns.

        ``summarize`` receives ``{"role", "text", "ts"}`` dicts, oldest first, and returns
        the facts worth keeping as separate, self-contained strings ("The user prefers PDF
        reports", not "they said PDF"). Any LLM call fits. Facts are dated at the newest
        turn they summarise and stamped with the turn ids they came from, so recency keeps
        meaning something. Each batch is one transaction: if ``summarize`` raises, finished
        batches stay done, the rest stay untouched, and the error carries the partial
        report as ``.report``.

        A batch the summarizer returns no fact for (``[]``) keeps its turns: nothing is
        stored or deleted, and the report lists them in ``turns_kept``. Turns are summarised
        once: those a ``delete=False`` call consolidated are marked (``_vx_consolidated_into``)
        and never offered to ``summarize`` again; a later ``delete=True`` call deletes them.
        ``summarize`` runs outside the handle's lock, so other threads are not held up; a
        batch whose turns another write changed meanwhile is skipped (``batches_skipped``).

        :param session: whose turns.
        :param summarize: ``list[dict] -> list[str]``.
        :param keep_recent: the last this many turns stay, so ``context()`` keeps its thread.
        :param older_than: only turns older than this many days (or a datetime).
        :param batch_turns: turns per ``summarize`` call, so a long history is never one prompt.
        :param delete: False keeps the turns, marked as consolidated (a dry run that still
            stores the facts).
        :param pinned: store the facts pinned rather than as plain facts.
        :param now: the moment ``older_than`` counts back from (default: now).
        """
        session = check_session(session)
        if not callable(summarize):
            raise TypeError("summarize must be a callable list[dict] -> list[str]")
        keep_recent = check_int(keep_recent, "keep_recent", minimum=0)
        batch_turns = check_limit(batch_turns, "batch_turns")
        check_bool(delete, "delete")
        check_bool(pinned, "pinned")
        now_ts = to_epoch(now)
        kind = KIND_PINNED if pinned else KIND_FACT
        return consolidation.consolidate(
            self.db, session, summarize, keep_recent=keep_recent, cutoff=days_to_seconds(older_than, now_ts),
            batch_turns=batch_turns, delete=delete, kind=kind, ttl_days=self._ttl_for(kind, None), now_ts=now_ts)

    # ------------------------------------------------------------------ reading

    def turns(self, session: str | None, limit: int | None = None, now: TimeLike = None,
              filter: dict[str, Any] | None = None) -> list[Result]:
        """A session's turns in order; the last ``limit`` of them if given.

        Expired turns (at ``now``) are left out; superseded ones stay, flagged in their
        metadata, because this is the transcript.

        :param session: whose turns.
        :param limit: only the last this many.
        :param now: the moment of the transcript (default: now): turns created after it
            are not in it, and one expired by then is left out.
        :param filter: only turns whose own metadata match it (the collection's filter syntax).
        """
        session = check_session(session)
        flt = _check_memory_filter(filter)
        if limit is not None:
            limit = check_limit(limit)
        now_ts = to_epoch(now)
        with self.db._locked() as m:
            ordered = m.in_turn_order(m.keep_matching(m.select(session, (KIND_TURN,), live_at=now_ts, as_of=now_ts),
                                                      flt))
            if limit is not None:
                ordered = ordered[-limit:]
            return [m.result(p) for p in ordered]

    def history(self, id: str, now: TimeLike = None) -> list[HistoryEntry]:
        """The supersession chain ``id`` belongs to, oldest first, as it stood at ``now``.

        Follows correction and contradiction links both ways, so "where did I live
        before?" has an answer even after the old fact dropped out of recall.

        :param id: a memory of the chain.
        :param now: the moment (default: now): memories created after it are not in the
            chain, and a supersession made after it has not happened yet. Empty when ``id``
            itself did not exist yet.
        """
        now_ts = to_epoch(now)
        with self.db._locked() as m:
            self._memory_pos(m, id)
            return chain(m, id, as_of=now_ts)

    def recall(self, query: str, session: str | None = None, limit: int = 10, token_budget: int | None = None,
               score_gap: float | None = None, kinds: Sequence[str] = KINDS, include_superseded: bool = False,
               mode: str | None = None, now: TimeLike = None, exclude_ids: Sequence[str] = (),
               hybrid_weight: float | None = None, min_relevance: float | None = None,
               rerank: bool | None = None, filter: dict[str, Any] | None = None,
               user: str | None = None) -> MemoryResults:
        """Relevance, blended with recency and feedback, cut to a budget.

        The most relevant eligible memories (a pool of ``max(4 x limit, 40)``) have their
        relevance min-max normalised across the pool, then ``score = relevance_norm +
        recency_weight * 0.5 ** (age / half_life_days) + feedback_weight * clamp(feedback,
        -2, 2)``; ties go to the newer. Embedding models put cosines in a narrow band;
        measured against the spread the candidates actually have, "clearly more relevant"
        means what it says.

        With a rerank, the pool is first cut to its ``max(2 x limit, 20)`` most relevant
        candidates (by the mode's relevance, not by the blend), and each one's relevance
        becomes the reranker's score of (query, text); the blend above then ranks them
        unchanged. On LoCoMo this lifts recall@10 from 0.65 to 0.76 (README, "Search modes").

        Each result's ``metadata["_vx_scoring"]`` holds the parts of its score:
        ``relevance`` (raw: the reranker's logit when reranked, else the mode's score),
        ``relevance_norm``, ``recency``, ``feedback``, ``score``, ``age_days``, ``mode``,
        ``first_stage`` (the mode's relevance before the rerank; None when not reranked),
        ``rerank`` (the reranker's name, or None), and outside dense mode the raw ``dense``
        cosine and ``lexical`` BM25.

        :param query: the text to match.
        :param session: whose memories (None: every session).
        :param limit: how many results at most.
        :param token_budget: the most tokens the results may hold (the top one always ships).
        :param score_gap: cut at the first result scoring this much below the one before it.
        :param kinds: which kinds are eligible.
        :param include_superseded: let corrected and contradicted memories back in.
        :param mode: the relevance: ``"hybrid"`` (the default, None) fuses the cosine and
            BM25 with ``hybrid_weight``; ``"dense"`` is the cosine alone; ``"lexical"`` BM25
            from the FTS5 index alone. The blend on top is the same whatever the mode.
        :param now: the moment of the recall (default: now): ages count to it, and the
            collection is read as it stood then. A memory created after it is not there,
            one superseded after it is live, one expired by then is left out, and only
            feedback recorded at or before it counts.
        :param exclude_ids: memories to leave out.
        :param hybrid_weight: the dense share of hybrid relevance (default: the memory's).
        :param min_relevance: leave out candidates whose raw relevance is below this, before
            normalising (so a query that matches nothing returns nothing). Raw means the
            reranker's logit when reranked (about 0 is "maybe"; -5 drops what is unrelated),
            else the cosine in dense and hybrid mode, BM25 in lexical mode. Default: the
            memory's (None: keep every candidate). :meth:`low_relevance` gives a hint.
        :param rerank: rerank with the memory's reranker (None: the memory's ``rerank``
            setting; by default on with vxmem's default embedder, off otherwise).
        :param filter: only memories whose own metadata match it, in the collection's filter
            syntax (``{"topic": "billing"}``, ``{"topic": ["billing", "refunds"]}``). Exact:
            the pool is drawn from the matching memories alone, so the results are the true
            top ``limit`` among them.
        :param user: only this user's memories (``remember(user=...)``), from every session
            unless ``session`` narrows it to one.
        """
        if token_budget is not None:
            token_budget = check_limit(token_budget, "token_budget")
        if score_gap is not None:
            score_gap = check_weight(score_gap, "score_gap")
        self._prepare_query(query, mode)  # the embedder runs before the lock is taken
        with self.db._locked() as m:  # the pool's positions stay valid only while no one else writes
            pool = self.candidate_pool(query, session=session, limit=limit, kinds=kinds,
                                       include_superseded=include_superseded, mode=mode, now=now,
                                       exclude_ids=exclude_ids, hybrid_weight=hybrid_weight,
                                       min_relevance=min_relevance, rerank=rerank, filter=filter, user=user)
            return rank(pool, m, query, self.settings, score_gap, token_budget)

    def candidate_pool(self, query: str, session: str | None = None, limit: int = 10, kinds: Sequence[str] = KINDS,
                       include_superseded: bool = False, mode: str | None = None, now: TimeLike = None,
                       exclude_ids: Sequence[str] = (), pool: int | None = None,
                       hybrid_weight: float | None = None, min_relevance: float | None = None,
                       rerank: bool | None = None, filter: dict[str, Any] | None = None,
                       user: str | None = None) -> CandidatePool:
        """The candidates ``recall()`` blends, with everything ranking needs, as a
        :class:`~vxmem.pool.CandidatePool`: already reranked (and cut by ``min_relevance``)
        when ``recall()`` with these arguments would be.

        The workbench caches this at each probe and re-ranks it for every sweep point.
        The arguments are ``recall()``'s, plus ``pool``, which overrides the pool size
        (default ``max(4 x limit, 40)``).
        """
        check_text(query, "query")
        session = check_session(session)
        limit = check_limit(limit)
        kinds = check_kinds(kinds)
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        hybrid_weight = self.hybrid_weight if hybrid_weight is None else check_hybrid_weight(hybrid_weight)
        check_bool(include_superseded, "include_superseded")
        excluded = tuple(check_ids(exclude_ids, "exclude_ids"))
        floor = self.min_relevance if min_relevance is None else _check_min_relevance(min_relevance)
        reranking = self._reranking(rerank)
        flt = _check_memory_filter(filter)
        user = _check_user(user)
        now_ts = to_epoch(now)
        size = scoring.pool_size(limit) if pool is None else check_limit(pool, "pool")
        scope = _any_if_none(session)
        self.db._prepare_query(query, mode)  # a no-op when recall() prepared it already
        with self.db._locked() as m:
            pos = m.select(scope, kinds, live_at=now_ts, include_superseded=include_superseded, exclude_ids=excluded,
                           as_of=now_ts, user=user)
            pos = m.keep_matching(pos, flt)
            found = gather(self.db, m, query, pos, size=size, mode=mode, hybrid_weight=hybrid_weight,
                           session=scope, now_ts=now_ts, limit=limit)
            if reranking and len(found):
                found = rerank_pool(found, m, query, self.reranker, reranker_name(self.reranker))
            return found if floor is None else drop_below(found, floor)

    def _reranking(self, rerank: Any) -> bool:
        """Whether a recall with ``rerank=`` reranks: the argument, else the memory's setting,
        else whether the embedder is the one the default pipeline was measured with."""
        if rerank is not None:
            return check_bool(rerank, "rerank")
        if self.rerank is not None:
            return self.rerank
        return reranks_by_default(self.db.embedder)

    def pipeline(self, mode: str | None = None, rerank: bool | None = None) -> dict[str, Any]:
        """What ``recall(mode=mode, rerank=rerank)`` would run: ``{"mode": the search mode,
        "rerank": the reranker's name or None, "embedder": the embedder's name or None}``."""
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        emb = getattr(self.db.embedder, "name", None)
        return {"mode": mode, "rerank": reranker_name(self.reranker) if self._reranking(rerank) else None,
                "embedder": emb if isinstance(emb, str) else None}

    def low_relevance(self, mode: str | None = None, rerank: bool | None = None) -> float | None:
        """The raw relevance below which the best candidate probably matches nothing, for
        the pipeline ``recall(mode=mode, rerank=rerank)`` would use; None when unknown.

        It comes from the reranker's ``low_relevance`` when reranking (the cross-encoder's
        logit 0), else from the embedder's in dense mode (hashing cosine 0.25, bge cosine
        0.6, a weak hint: bge cosines sit in a narrow band). BM25 and the fused hybrid
        score have no absolute scale, so lexical and hybrid without a rerank give None.
        Compare it with ``_vx_scoring["relevance"]`` of the top result to warn a user.
        """
        mode = scoring.DEFAULT_MODE if mode is None else check_mode(mode)
        if self._reranking(rerank):
            hint = getattr(self.reranker, "low_relevance", None)
        elif mode == "dense":
            hint = getattr(self.db.embedder, "low_relevance", None)
        else:
            hint = None
        return float(hint) if isinstance(hint, (int, float)) and not isinstance(hint, bool) else None

    def _prepare_query(self, query: Any, mode: Any) -> None:
        """Embed a recall's query before any lock is taken (when the arguments are valid;
        otherwise the checks inside report them)."""
        if isinstance(query, str) and (mode is None or mode in ("dense", "hybrid")):
            try:
                check_text(query, "query")
            except ValueError:
                return
            self.db._prepare_query(query, check_mode(mode))

    def context(self, query: str, session: str | None = None, token_budget: int = 1500, recent_turns: int = 6,
                limit: int = 10, now: TimeLike = None, user: str | None = None, filter: dict[str, Any] | None = None,
                **recall_kwargs: Any) -> ContextBlock:
        """Assemble pinned facts, recent turns and recalled memories under one budget.

        Pinned facts are never cut: they are the caller's own declaration of what always
        matters. If they alone exceed the budget the block says so (``over_budget``)
        rather than dropping one. Recent turns (never superseded ones) are cut
        oldest-first. Whatever is left goes to recall, and a recalled memory that does
        not fit is left out rather than shipped over budget.

        ``session=None`` is the view across every session, as in ``recall()``: every
        session's pinned facts, no recent turns (turns belong to one conversation), and
        memories recalled from every session. Pass a session for one conversation's block.

        ``user`` widens the block to a user across their sessions: the user's pinned facts
        (from any session) join the session's, and recall draws on every memory of the
        user's (from any session) instead of the session's; the recent turns stay the
        session's. Remember a user's turns with ``user=`` so that recall finds them.

        :param query: what to recall memories for.
        :param session: whose context (None: every session's pinned facts, no recent turns,
            recall across sessions).
        :param token_budget: the tokens the block may hold, headers included.
        :param recent_turns: how many of the session's last turns to include.
        :param limit: how many memories to recall at most.
        :param now: the moment of the block (default: now): every section reads the
            collection as it stood then, as ``recall(now=...)`` does.
        :param user: whose pinned facts and memories join the block (see above).
        :param filter: only memories whose own metadata match it, in every section (the
            collection's filter syntax).
        :param recall_kwargs: ``recall()``'s ``score_gap``, ``kinds``, ``include_superseded``,
            ``mode``, ``exclude_ids``, ``hybrid_weight``, ``min_relevance`` and ``rerank``.
        """
        check_text(query, "query")
        session = check_session(session)
        user = _check_user(user)
        flt = _check_memory_filter(filter)
        token_budget = check_limit(token_budget, "token_budget")
        recent_turns = check_int(recent_turns, "recent_turns", minimum=0)
        limit = check_limit(limit)
        for taken in ("token_budget", "session", "limit", "now", "query"):  # context() sets these itself
            recall_kwargs.pop(taken, None)
        unknown = set(recall_kwargs) - set(RECALL_ARGS)
        if unknown:
            raise TypeError(f"context() got unexpected recall arguments: {sorted(unknown)}")
        self._prepare_query(query, recall_kwargs.get("mode"))
        return assemble(self.db, self.recall, query, session, token_budget, recent_turns, limit,
                        to_epoch(now), recall_kwargs, user=user, flt=flt)
