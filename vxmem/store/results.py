"""What a read returns: :class:`Result` (one document) and :class:`Results` (a ranked list)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, overload


@dataclass
class Result:
    """One document: its id, text, score (``None`` where nothing was scored) and metadata."""

    id: str
    text: str
    score: float | None
    metadata: dict[str, Any] = field(default_factory=dict)


class Results(Sequence[Result]):
    """Ranked results with what the budget did to them.

    A sequence of :class:`Result` (``.items`` is the plain list), plus the ``query``,
    whether anything was cut (``truncated``, ``cut_count``), the tokens the shipped
    results hold (``token_estimate``) and the ``token_budget`` they were cut to.
    """

    def __init__(self, items: list[Result], query: str | None = None, truncated: bool = False,
                 cut_count: int = 0, token_estimate: int = 0, token_budget: int | None = None):
        self.items = list(items)
        self.query = query
        self.truncated = bool(truncated)
        self.cut_count = int(cut_count)
        self.token_estimate = int(token_estimate)
        self.token_budget = token_budget

    @overload
    def __getitem__(self, i: int) -> Result: ...

    @overload
    def __getitem__(self, i: slice) -> list[Result]: ...

    def __getitem__(self, i: int | slice) -> Result | list[Result]:
        return self.items[i]

    def __len__(self) -> int:
        return len(self.items)

    @property
    def ids(self) -> list[str]:
        """The results' ids, in rank order."""
        return [r.id for r in self.items]

    def to_frame(self) -> Any:
        """The results as a pandas DataFrame, one row per result: rank, id, text, score and
        whatever :meth:`frame_columns` adds for each. Needs pandas (the ``workbench`` extra)."""
        try:
            import pandas as pd
        except ImportError as exc:  # the core install leaves pandas out: say which extra brings it
            raise ImportError('to_frame() needs pandas: pip install "vxmem[workbench]"') from exc

        rows = []
        for rank, r in enumerate(self.items, 1):
            row: dict[str, Any] = {"rank": rank, "id": r.id, "text": r.text, "score": r.score}
            row.update(self.frame_columns(r))
            rows.append(row)
        return pd.DataFrame(rows)

    def frame_columns(self, result: Result) -> dict[str, Any]:
        """Extra columns of ``result``'s row in :meth:`to_frame`; none for a plain collection."""
        return {}

    def __repr__(self) -> str:
        return (f"Results({len(self.items)} items, truncated={self.truncated}, "
                f"cut_count={self.cut_count}, token_estimate={self.token_estimate}, "
                f"token_budget={self.token_budget})")
