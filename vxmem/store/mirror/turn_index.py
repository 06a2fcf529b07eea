"""Which live document holds turn ``n`` of a session: a map per session, made on first use.

A recall reads each candidate turn after the turn before it (see
:mod:`vxmem.memory.late_stage`), so it asks this for up to a few hundred candidates at a
time. Scanning a session's positions per candidate cost O(session) each; a map per session,
kept up to date as turns come and go, answers in O(1). A session's map is made the first
time it is asked for, and dropped when a turn of it changes number or session.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["TurnIndex"]


class TurnIndex:
    """Session code -> {turn number: position} for the sessions asked about so far."""

    def __init__(self) -> None:
        self._maps: dict[int, dict[float, int]] = {}

    def at(self, code: int, turn: float, mates: Sequence[int], turns: np.ndarray) -> int:
        """The position of turn ``turn`` of session ``code`` (-1: none), ``mates`` being the
        session's positions and ``turns`` the mirror's turn column."""
        got = self._maps.get(code)
        if got is None:
            pos = np.asarray(mates, dtype=np.int64)
            got = self._maps[code] = {float(t): int(p) for p, t in zip(pos.tolist(), turns[pos].tolist())
                                      if not math.isnan(t)}
        return got.get(turn, -1)

    def added(self, code: int, turn: float, p: int) -> None:
        """A turn came to session ``code`` at position ``p`` (the later of two alike wins)."""
        got = self._maps.get(code)
        if got is not None and not math.isnan(turn):
            got[turn] = max(p, got.get(turn, -1))

    def dropped(self, *codes: int) -> None:
        """Forget the maps of ``codes`` (made again when next asked for)."""
        for code in codes:
            self._maps.pop(code, None)
