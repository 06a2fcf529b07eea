"""The context block: pinned facts, recent turns and recalled memories under one token budget.

``ConversationMemory.context()`` checks its arguments and calls :func:`assemble`. Tokens
are counted on the lines the block renders, headers included, so ``tokens_used`` is the
cost of ``.text``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.keys import K_ROLE, KIND_PINNED, KIND_TURN
from ..store.seam import ANY_SESSION, FilterValues, MemoryStore, MemoryView, Result, Results, in_session
from .request import RecallRequest

SECTIONS = ("pinned", "recent", "recalled")
HEADERS = {"pinned": "Pinned facts:", "recent": "Recent conversation:", "recalled": "Relevant memories:"}


def render(section: str, r: Result) -> str:
    """One memory's line in ``section``: a turn as ``role: text``, anything else as ``- text``."""
    text = " ".join(r.text.split())
    if section == "recent":
        return f"{r.metadata.get(K_ROLE) or 'user'}: {text}"
    return f"- {text}"


@dataclass
class ContextBlock:
    """A ready-to-inject slice of memory, assembled under one token budget.

    Order is deliberate: pinned facts first because they always apply, then the most
    recent turns so the model has the thread, then whatever else the query pulled in
    with the tokens that remain.
    """

    pinned: list[Result]
    recent: list[Result]
    recalled: list[Result]
    token_budget: int
    tokens_used: int = 0
    tokens_by_section: dict[str, int] = field(default_factory=dict)
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
                sections.append(HEADERS[name] + "\n" + "\n".join(render(name, r) for r in items))
        return "\n\n".join(sections)

    @property
    def ids(self) -> list[str]:
        """Every memory in the block, in block order."""
        return [r.id for r in self.pinned + self.recent + self.recalled]

    def __str__(self) -> str:
        return self.text


class _Budget:
    """Tokens left, and what each section took. A line is paid with the newline before it; a
    section's first line also pays its header and, after another section, the blank line
    between them: what ``ContextBlock.text`` joins them with."""

    def __init__(self, total: int, count: Callable[[str], int]):
        self.left = total
        self.count = count
        self.used = dict.fromkeys(SECTIONS, 0)
        self.newline, self.gap = count("\n"), count("\n\n")

    def cost(self, section: str, r: Result, first: bool) -> int:
        line = self.count(render(section, r)) + self.newline
        if not first:
            return line
        return line + self.count(HEADERS[section]) + (self.gap if any(self.used.values()) else 0)

    def take(self, section: str, r: Result, first: bool) -> bool:
        cost = self.cost(section, r, first)
        if cost > self.left:
            return False
        self.left -= cost
        self.used[section] += cost
        return True


def assemble(store: MemoryStore, recall: Callable[[RecallRequest], Results], request: RecallRequest,
             session: str | None, token_budget: int, recent_turns: int) -> ContextBlock:
    """The block for checked arguments: ``request`` is what the recalled section asks
    (its ``user``, ``filter`` and ``now`` apply to every section) and ``recall`` runs it.

    Pinned facts are never cut, even over budget (the block says so); recent turns are cut
    oldest first; recalled memories that do not fit are left out. With a ``user``, the
    user's pinned facts join the session's and recall spans the user's every session.
    """
    now_ts, user, flt = request.now, request.user, request.filter
    assert now_ts is not None  # a request's time is fixed when it is made
    budget = _Budget(token_budget, store.token_counter)
    # A user's block reads the user's memories (their session's recent turns among them); else the session's.
    with store.locked(user=user, session=session if user is None and isinstance(session, str) else None) as m:
        pinned = _pinned(m, session, now_ts, user, flt)
        if pinned:  # never cut: paid for even past the budget
            budget.used["pinned"] = sum(budget.cost("pinned", r, first=i == 0) for i, r in enumerate(pinned))
            budget.left -= budget.used["pinned"]
        over = budget.left < 0
        recent, cut_recent = _recent(m, in_session(session, user), recent_turns, now_ts, budget, flt)
        recalled: list[Result] = []
        cut_recalled = 0
        if budget.left > 0:
            shown = request.exclude_ids + tuple(r.id for r in pinned + recent)
            for r in recall(request.replace(exclude_ids=shown)):
                if budget.take("recalled", r, first=not recalled):
                    recalled.append(r)
                else:
                    cut_recalled += 1
    note = ""
    if over:
        note = (f"pinned facts alone take {budget.used['pinned']} tokens, over the budget of "
                f"{token_budget}; none were dropped")
    block = ContextBlock(pinned=pinned, recent=recent, recalled=recalled, token_budget=token_budget,
                         tokens_by_section=budget.used, over_budget=over, cut_recent=cut_recent,
                         cut_recalled=cut_recalled, note=note)
    return _fitted(block, budget.count)


def _fitted(block: ContextBlock, count: Callable[[str], int]) -> ContextBlock:
    """``block`` with ``tokens_used`` counted on its text. A counter that does not add up line
    by line (a tokenizer that merges across a newline) can make the whole cost more than its
    lines: then recalled memories, then the oldest recent turns, are dropped until it fits."""
    block.tokens_used = count(block.text)
    if block.tokens_used <= block.token_budget or block.over_budget:
        return block
    while block.tokens_used > block.token_budget and (block.recalled or block.recent):
        if block.recalled:
            block.recalled.pop()
            block.cut_recalled += 1
        else:
            block.recent.pop(0)
            block.cut_recent += 1
        block.tokens_used = count(block.text)
    costs = _Budget(block.token_budget, count)  # what each section left takes, as assemble counts it
    for section, items in (("pinned", block.pinned), ("recent", block.recent), ("recalled", block.recalled)):
        costs.used[section] = sum(costs.cost(section, r, first=i == 0) for i, r in enumerate(items))
    block.tokens_by_section = costs.used
    return block


def _pinned(m: MemoryView, session: str | None, now_ts: float, user: str | None = None,
            flt: FilterValues | None = None) -> list[Result]:
    """Live pinned facts of ``session`` (None: every session), or of ``user`` from any of
    their sessions, oldest first."""
    scope = ANY_SESSION if session is None or user is not None else session
    pos = m.keep_matching(m.select(scope, (KIND_PINNED,), live_at=now_ts, include_superseded=False,
                                   as_of=now_ts, user=user), flt).tolist()
    return [m.result(p) for p in sorted(pos, key=lambda p: (m.ts[p], p))]


def _recent(m: MemoryView, session: Any, recent_turns: int, now_ts: float,
            budget: _Budget, flt: FilterValues | None = None) -> tuple[list[Result], int]:
    """The last ``recent_turns`` live turns of ``session`` that fit, and how many were cut."""
    if session is None or not recent_turns:
        return [], 0
    pos = m.keep_matching(m.select(session, (KIND_TURN,), live_at=now_ts, include_superseded=False, as_of=now_ts),
                          flt)
    last = m.in_turn_order(pos)[-recent_turns:]
    recent: list[Result] = []
    for p in reversed(last):  # newest first, so the oldest are the ones cut
        r = m.result(p)
        if not budget.take("recent", r, first=not recent):
            return recent, len(last) - len(recent)
        recent.insert(0, r)
    return recent, 0
