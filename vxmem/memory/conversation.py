"""Conversation memory on top of a collection.

A vector store remembers everything as equally true forever, which is the wrong shape
for a conversation. Here relevance is blended with a half-life recency and time-decayed
feedback; corrections and contradictions supersede old facts without deleting them;
memories expire by TTL; old turns consolidate into standalone facts through a summarizer
the caller brings; ``context()`` assembles pinned facts, recent turns and recalled
memories under one token budget.

Everything is stored as ordinary documents with reserved ``_vx_*`` metadata keys
(:mod:`vxmem.core.keys`), so a memory collection is still a plain collection: ``search()``,
``delete()`` and filters all work on it unchanged. The memory reads and writes the
collection only through its seam, ``db.engine`` (:class:`~vxmem.store.seam.MemoryStore`).

:class:`ConversationMemory` inherits its reading verbs (``turns``, ``history``, ``recall``,
``candidate_pool``, ``pipeline``, ``low_relevance``, ``context``) and ``settings`` from
:class:`~vxmem.memory.reading.MemoryReading`; its argument checks are in
:mod:`vxmem.memory.arguments` and its bookkeeping helpers in :mod:`vxmem.memory.bookkeeping`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..core.checks import (
    check_bool,
    check_choice,
    check_int,
    check_kinds,
    check_limit,
    check_session,
    check_text,
)
from ..core.clock import TimeLike, days_to_seconds, to_epoch
from ..core.errors import ConflictError
from ..core.keys import (
    FORGET_KINDS,
    K_KIND,
    K_ROLE,
    K_SESSION,
    K_SUPERSEDED_AT,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    K_USER,
    KIND_FACT,
    KIND_PINNED,
    KIND_TURN,
    KINDS,
    OUTCOMES,
)
from ..core.sentinels import AnySession
from ..models.rerank import Reranker, check_reranker
from ..ranking import scoring
from ..ranking.blend import Blend
from ..store.seam import ANY_SESSION, check_ids, in_session
from . import consolidation
from .arguments import (
    any_if_none,
    check_memory_filter,
    check_min_relevance,
    check_scope,
    check_ttl_map,
    check_user,
    check_verdicts,
)
from .bookkeeping import (
    memory_pos,
    new_memory_id,
    record_feedback,
    refuse_taken,
    stamp,
)
from .consolidation import ConsolidationReport, Summarizer
from .draft import (
    REMEMBER_ARGS,
    REMEMBER_DEFAULTS,
    Draft,
    LateBits,
    LateJob,
    drafts_session,
    drafts_user,
    embed_in_batches,
    make_draft,
    ttl_for,
    write_draft,
    write_drafts,
)
from .late_stage import context_text, write_contexts
from .reading import CollectionT, MemoryReading
from .stages import DEFAULT_PRESET, check_preset, is_late, preset_stages
from .supersession import check_correction_time, live_heads, mark_superseded, unlink_deleted

Judge = Callable[[str, list[str]], Sequence[bool]]

class ConversationMemory(MemoryReading[CollectionT]):
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
        preset's second stage; its model loads on first use). With ``preset="accurate"`` it
        replaces the cascade's cross-encoder.
    :param preset: ``"default"`` (late interaction over the first stage's top 120, token
        vectors stored at write time), ``"fast"`` (the first stage alone) or ``"accurate"``
        (the default's stages and blend, then the cross-encoder reordering the ``limit`` memories
        they return, each turn read after the one before it; about 10 times the default's time). None: ``"default"``,
        whose second stage runs when ``rerank`` says so (by default with vxmem's default
        embedder); a preset named here runs its second stage unless ``rerank=False``.
    :param min_relevance: the default of ``recall(min_relevance=...)`` (raw scale; None:
        keep every candidate).
    :param recency_from: what a memory's age counts from. ``"created"`` (the spec's): when
        it was stored. ``"accessed"``: when a ``recall()`` or ``context()`` last returned it
        (LangChain's time-weighted retriever; Generative Agents), so what keeps being used
        stays fresh. Accesses are recorded durably in the database (one small write per
        recall, about 12 bytes per returned memory) and read as of ``now``, so an as-of
        recall sees the accesses made up to that moment; a read-only handle reads them but
        records none.
    """

    def __init__(self, db: CollectionT, half_life_days: float = scoring.HALF_LIFE_DAYS,
                 recency_weight: float = scoring.RECENCY_WEIGHT, feedback_weight: float = scoring.FEEDBACK_WEIGHT,
                 feedback_half_life_days: float = scoring.FEEDBACK_HALF_LIFE_DAYS,
                 ttl_days: dict[str, float | None] | None = None, judge: Judge | None = None,
                 judge_candidates: int = 5, hybrid_weight: float = scoring.HYBRID_WEIGHT, *,
                 rerank: bool | None = None, reranker: Reranker | str | None = None,
                 min_relevance: float | None = None, recency_from: str = "created", preset: str | None = None):
        self.db = db
        self.preset_given = preset is not None
        self.preset = check_preset(DEFAULT_PRESET if preset is None else preset)
        self.recency_from = check_choice(recency_from, "recency_from", scoring.RECENCY_FROM)
        self.rerank = None if rerank is None else check_bool(rerank, "rerank")
        self.own = None if reranker is None else check_reranker(reranker)
        self.reranker, self.final = preset_stages(self.preset, self.own)
        self.min_relevance = check_min_relevance(min_relevance)
        self.blend = Blend(half_life_days, recency_weight, feedback_weight, feedback_half_life_days, hybrid_weight)
        self.ttl_days = check_ttl_map(ttl_days)
        if judge is not None and not callable(judge):
            raise TypeError("judge must be a callable (new_text, [old_texts]) -> [bool, ...]")
        self.judge = judge
        self.judge_candidates = check_int(judge_candidates, "judge_candidates", minimum=1)

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
        d = make_draft(text, session=session, role=role, turn=turn, timestamp=timestamp, pinned=pinned, kind=kind,
                       metadata=metadata, id=id, ttl_days=ttl_days, check=check, user=user,
                       ttl_map=self.ttl_days, has_judge=self.judge is not None)
        if d.id is not None:
            with self.store.locked(user=d.user, session=d.session if d.user is None else None) as m:  # fail fast
                refuse_taken(m, d.id)
        # The callables (embedder, token counter, judge) run outside the lock, on a snapshot.
        soon = self._late_soon([d])  # the token vectors encode while the embedder runs
        vec = self.store.embed([d.text])[0]
        tokens = self.store.count_tokens([d.text])[0]
        late = self._late_bits(soon)
        contradicted = self._judge(d.text, vec, d.at, d.ts) if d.run_judge else []
        return write_draft(self.store, d, vec, tokens, contradicted, late)

    def remember_many(self, memories: Iterable[str | Mapping[str, Any]], *, session: str | None = None,
                      role: str = "user", timestamp: TimeLike = None, user: str | None = None,
                      check: bool | None = None) -> list[str]:
        """Store many memories in one transaction, embedded in batches; return their ids in order.

        Each item is a text, or a dict of ``remember()``'s arguments (``text``, ``session``,
        ``role``, ``turn``, ``timestamp``, ``pinned``, ``kind``, ``metadata``, ``id``,
        ``ttl_days``, ``check``, ``user``); the keyword arguments here are the defaults of the
        items that leave them out. Every item is checked before anything is embedded: one bad
        item refuses the whole call, naming it, and nothing is written. Turns are numbered in
        order within their sessions. The contradiction judge, where it runs, sees the facts
        stored before the call (not the call's own), as it would see them in a loop only if
        the call held no fact it contradicts.
        """
        if isinstance(memories, (str, bytes, Mapping)) or not isinstance(memories, Iterable):
            raise TypeError(f"memories must be a list of texts or dicts, not {type(memories).__name__} "
                            "(one memory: remember())")
        defaults = {"session": session, "role": role, "timestamp": timestamp, "user": user, "check": check}
        drafts = [self._draft_of(item, i, defaults) for i, item in enumerate(memories)]
        given = [d.id for d in drafts if d.id is not None]
        if len(set(given)) != len(given):
            raise ValueError("memories name the same id twice")
        numbered: set[tuple[Any, int]] = set()  # turns are numbered per session (each user's own)
        for d in drafts:
            if d.turn is not None:
                if (d.at, d.turn) in numbered:
                    raise ConflictError(f"turn {d.turn} of session {d.session!r} is given twice")
                numbered.add((d.at, d.turn))
        if not drafts:
            return []
        with self.store.locked(user=drafts_user(drafts)) as m:  # fail fast, before the embedder runs
            for i in given:
                refuse_taken(m, i)
        texts = [d.text for d in drafts]
        soon = self._late_soon(drafts)
        vecs = embed_in_batches(self.store, texts)  # outside the lock, a batch's memory at a time
        tokens = self.store.count_tokens(texts)
        late = self._late_bits(soon)
        contradicted = [self._judge(d.text, v, d.at, d.ts) if d.run_judge else [] for d, v in zip(drafts, vecs)]
        return write_drafts(self.store, drafts, vecs, tokens, contradicted, late)

    def _late_soon(self, drafts: Sequence[Draft]) -> LateJob | None:
        """The drafts' late-interaction token vectors, their own and read in context (see
        :mod:`~vxmem.memory.late_stage`), started on the model's worker thread, with the
        contexts read, when this memory's recall reads them; else None.

        The worker encodes while the caller embeds. One turn on a model of two lanes or fewer
        leaves its own text to the caller, after the embedding: its three runs then take two
        lanes, the longest alone (the turn in context), where all three at once would share
        two cores three ways (``benchmarks/bench_writes.py``).
        """
        if not (is_late(self.reranker) and self._reranking(None)):
            return None
        assert is_late(self.reranker)
        with self.store.locked(user=drafts_user(drafts), session=drafts_session(drafts)) as m:
            contexts = write_contexts(m, drafts)
        own = [d.text for d in drafts]
        read = [context_text(c, d.text) for d, c in zip(drafts, contexts) if c is not None]
        here = own if len(drafts) == 1 and read and self.reranker.lanes < 3 else []
        return LateJob(self.reranker.encode_soon(read if here else own + read), contexts, here)

    def _late_bits(self, soon: LateJob | None) -> LateBits | None:
        """What :meth:`_late_soon` started, once encoded (the caller's share encoded here)."""
        if soon is None:
            return None
        assert is_late(self.reranker)
        bits = (self.reranker.encode(soon.here) if soon.here else []) + soon.job.result()
        n = len(soon.contexts)
        read = iter(bits[n:])
        return LateBits(getattr(self.reranker, "name", ""), bits[:n],
                        [None if c is None else next(read) for c in soon.contexts], soon.contexts)

    def _draft_of(self, item: Any, i: int, defaults: dict[str, Any]) -> Draft:
        """Item ``i`` of ``remember_many()``, checked; an error names the item."""
        args = {"text": item} if isinstance(item, str) else item
        if not isinstance(args, Mapping):
            raise TypeError(f"memories[{i}] must be a str or a dict of remember() arguments, "
                            f"not {type(item).__name__}")
        unknown = sorted(set(args) - set(REMEMBER_ARGS))
        if unknown:
            raise TypeError(f"memories[{i}] has an argument remember() does not take: {unknown[0]!r}")
        if "text" not in args:
            raise TypeError(f"memories[{i}] has no text")
        full = {**REMEMBER_DEFAULTS, **defaults, **args}
        try:
            return make_draft(ttl_map=self.ttl_days, has_judge=self.judge is not None, **full)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"memories[{i}]: {exc}") from None

    def _ttl_for(self, kind: str, ttl_days: Any) -> float | None:
        return ttl_for(kind, ttl_days, self.ttl_days)

    def _judge(self, text: str, vec: np.ndarray, session: Any, ts: float) -> list[str]:
        """Ids of the live facts nearest to ``text`` that the judge says it contradicts.

        The candidates are the facts stored at or before ``ts`` that nothing supersedes: a
        memory written out of time order never supersedes one from its future. They are read
        under the lock; the judge is called after it is released.
        """
        with self.store.locked(session=session) as m:  # the facts of that session (of its user's)
            pos = m.select(session, (KIND_FACT, KIND_PINNED), live_at=ts, include_superseded=False)
            pos = pos[m.ts[pos] <= ts]
            if pos.size == 0 or self.judge is None:
                return []
            top, _ = self.store.topk(vec, pos, self.judge_candidates, session)
            ids = [m.ids[p] for p in top]
            texts = [m.texts[p] for p in top]
        verdicts = check_verdicts(self.judge(text, texts), len(ids))
        return [i for i, v in zip(ids, verdicts) if v]

    def feedback(self, id: str, outcome: str, correction: str | None = None, timestamp: TimeLike = None) -> str | None:
        """Record how a recalled memory turned out.

        ``useful`` lifts it in later recall, ``dead_end`` lowers it, and ``corrected``
        lowers it and, when correction text is given, stores the corrected fact as a new
        memory that supersedes this one (and any correction of it still live, so only the
        newest correction stays live). Returns the new memory's id in that case, otherwise None.

        A memory keeps up to 64 events as they are; past that, all but the newest 32 are
        folded into one decayed sum dated at the newest of them, which scores exactly as they
        did under this memory's ``feedback_half_life_days``, and a log of them answers reads as
        of an earlier time (see :func:`vxmem.ranking.scoring.fold_feedback`).

        :param id: the memory recalled.
        :param outcome: ``"useful"``, ``"dead_end"`` or ``"corrected"``.
        :param correction: the corrected fact (with ``"corrected"`` only).
        :param timestamp: when the outcome was seen (default: now); a correction is refused
            when dated before what it replaces was stored.
        """
        check_choice(outcome, "outcome", OUTCOMES)
        if correction is not None:
            if outcome != "corrected":
                raise ValueError("correction text goes with outcome='corrected' only")
            if not check_text(correction, "correction").strip():
                raise ValueError("correction must not be empty")
        ts = to_epoch(timestamp, "timestamp")
        with self.store.locked(owner_of=id) as m:  # fail fast, before the embedder runs
            memory_pos(m, id)
            if correction is not None:
                check_correction_time(m, id, ts)
        vec = tokens = None
        if correction is not None:  # the callables run outside the lock
            vec = self.store.embed([correction])[0]
            tokens = self.store.count_tokens([correction])[0]
        with self.store.locked(owner_of=id) as m:  # a correction belongs to the same user
            old_meta = dict(m.metas[memory_pos(m, id)])
            record_feedback(old_meta, outcome, ts, self.feedback_half_life_days)
            if correction is None:
                with self.store.transaction() as tx:
                    tx.update_meta(id, old_meta)
                return None
            assert vec is not None and tokens is not None
            kind = KIND_FACT if old_meta[K_KIND] == KIND_TURN else old_meta[K_KIND]
            heads = live_heads(m, id)
            new_id = new_memory_id()
            new_meta = stamp(kind, old_meta.get(K_SESSION), old_meta.get(K_ROLE, "user"), ts,
                             self._ttl_for(kind, None))
            new_meta[K_SUPERSEDES] = list(dict.fromkeys([id] + heads))
            if K_USER in old_meta:  # the corrected fact belongs to whom the old one did
                new_meta[K_USER] = old_meta[K_USER]
            if old_meta.get(K_SUPERSEDED_BY) is None:
                old_meta[K_SUPERSEDED_BY] = new_id
                old_meta[K_SUPERSEDED_AT] = ts
            with self.store.transaction() as tx:
                tx.update_meta(id, old_meta)
                tx.insert(new_id, correction, new_meta, vec, tokens)
                for h in heads:
                    if h != id:
                        mark_superseded(m, tx, h, new_id, ts)
            return new_id

    # ------------------------------------------------------------------ deleting

    def forget(self, session: str | AnySession | None = None, kinds: Sequence[str] = FORGET_KINDS,
               older_than: float | datetime | None = None, ids: Sequence[str] | None = None,
               superseded: bool = False, now: TimeLike = None, filter: dict[str, Any] | None = None,
               user: str | None = None) -> int:
        """Delete memories and return how many went.

        Deleting is real: this is the one memory operation that loses information on purpose.
        A memory that only a deleted one superseded is live again (its correction is gone, so
        it is what remains to be recalled).

        :param ids: names the memories outright; an id that is not a memory is left alone,
            and so is one outside the selection the other arguments make: ``session``,
            ``older_than`` and ``superseded`` narrow the named memories, and so does
            ``kinds`` when it is given (by default ids of every kind go). Otherwise the
            selection is:
        :param session: the session (None or ANY_SESSION: every session),
        :param kinds: the kinds it holds (default: turns),
        :param older_than: older than this many days, or than a datetime,
        :param superseded: only memories a correction or a contradiction already replaced,
            the audit trail you may keep or clear,
        :param now: the moment ``older_than`` counts back from (default: now),
        :param filter: only memories whose own metadata match it (the collection's filter
            syntax, e.g. ``{"topic": "billing"}``),
        :param user: only this user's memories (of their own ``session``, if one is given).
        """
        named = None if ids is None else check_ids(ids)
        flt = check_memory_filter(filter)
        user = check_user(user)
        session = check_scope(session)
        # With ids, only kinds the caller passed narrow them: the default (turns) is the selection's.
        kinds = KINDS if named is not None and kinds is FORGET_KINDS else check_kinds(kinds)
        check_bool(superseded, "superseded")
        now_ts = to_epoch(now)
        cutoff = days_to_seconds(older_than, now_ts)
        at = in_session(any_if_none(session), user)
        one = session if isinstance(session, str) else None  # a session's rows alone (its links stay in it)
        with self.store.locked(user=user, session=one) as m:
            pos = m.keep_matching(m.select(at, kinds, user=user), flt)
            if cutoff is not None:
                pos = pos[m.ts[pos] < cutoff]
            if superseded:
                pos = pos[m.superseded[pos]]
            chosen = [m.ids[p] for p in pos.tolist()]
            if named is not None:
                wanted = set(named)
                chosen = [i for i in chosen if i in wanted]
            return self._delete(chosen, user)

    def _delete(self, ids: list[str], user: str | None = None) -> int:
        """Delete ``ids`` (``user``'s, when given); what they alone superseded is live again, in
        the same transaction."""
        if not ids:
            return 0
        with self.store.locked(user=user) as m, self.store.transaction() as tx:
            unlink_deleted(m, tx, set(ids))
            tx.delete(ids)
        return len(ids)

    def expire(self, now: TimeLike = None, user: str | None = None) -> int:
        """Delete every memory past its time to live. Returns the count.

        Recall and context already skip expired memories, so this is about space and the
        audit trail, not correctness; run it whenever suits. ``user`` narrows it to that
        user's memories (None: everyone's).
        """
        now_ts = to_epoch(now)
        user = check_user(user)
        with self.store.locked(user=user) as m:
            pos = m.select(ANY_SESSION, KINDS, user=user)
            return self._delete([m.ids[p] for p in pos[m.expires[pos] <= now_ts].tolist()], user)

    def consolidate(self, session: str | None, summarize: Summarizer, keep_recent: int = 6,
                    older_than: float | datetime | None = None, batch_turns: int = 40, delete: bool = True,
                    pinned: bool = False, now: TimeLike = None, user: str | None = None) -> ConsolidationReport:
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
        :param user: whose session it is (without ``user``: the session of no user).
        """
        session = check_session(session)
        user = check_user(user)
        if not callable(summarize):
            raise TypeError("summarize must be a callable list[dict] -> list[str]")
        keep_recent = check_int(keep_recent, "keep_recent", minimum=0)
        batch_turns = check_limit(batch_turns, "batch_turns")
        check_bool(delete, "delete")
        check_bool(pinned, "pinned")
        now_ts = to_epoch(now)
        kind = KIND_PINNED if pinned else KIND_FACT
        return consolidation.consolidate(self.store, session, summarize, keep_recent=keep_recent, user=user,
                                         cutoff=days_to_seconds(older_than, now_ts), batch_turns=batch_turns,
                                         delete=delete, kind=kind, ttl_days=self._ttl_for(kind, None), now_ts=now_ts)
