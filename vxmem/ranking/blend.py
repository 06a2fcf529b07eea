"""How a recall ranks its candidates, as one typed value: :class:`Blend`.

The spec's score is ``relevance_norm + recency_weight * 0.5 ** (age / half_life_days) +
feedback_weight * clamp(feedback, +-2)``, feedback decaying with ``feedback_half_life_days``;
in hybrid mode the relevance itself fuses the dense and lexical scores with
``hybrid_weight``. A :class:`~vxmem.memory.ConversationMemory` holds one blend, a recall may
bring its own, a replay records the one it ran with, and a sweep ranks a grid of them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.checks import check_number
from .scoring import FEEDBACK_HALF_LIFE_DAYS, FEEDBACK_WEIGHT, HALF_LIFE_DAYS, HYBRID_WEIGHT, RECENCY_WEIGHT

# What each field accepts: (low, low open, high, high open), as check_number takes them.
BLEND_BOUNDS = {
    "half_life_days": (0.0, True, math.inf, True),
    "recency_weight": (0.0, False, math.inf, True),
    "feedback_weight": (0.0, False, math.inf, True),
    "feedback_half_life_days": (0.0, True, math.inf, True),
    "hybrid_weight": (0.0, False, 1.0, False),
}


@dataclass(frozen=True, slots=True)
class Blend:
    """The parameters of the spec's blend and of the hybrid fusion, checked when made.

    :param half_life_days: relevance of a memory halves every this many days.
    :param recency_weight: how much a brand-new memory gains over a very old one, on the
        0-to-1 scale normalised relevance is measured on.
    :param feedback_weight: how much one unit of feedback moves the score (feedback is
        clamped to plus or minus two units).
    :param feedback_half_life_days: feedback ages too, with this half-life.
    :param hybrid_weight: the dense share of hybrid relevance, in [0, 1].
    """

    half_life_days: float = HALF_LIFE_DAYS
    recency_weight: float = RECENCY_WEIGHT
    feedback_weight: float = FEEDBACK_WEIGHT
    feedback_half_life_days: float = FEEDBACK_HALF_LIFE_DAYS
    hybrid_weight: float = HYBRID_WEIGHT

    def __post_init__(self) -> None:
        for name, (low, low_open, high, high_open) in BLEND_BOUNDS.items():
            value = check_number(getattr(self, name), name, low, high, low_open=low_open, high_open=high_open)
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Blend:
        """This blend with ``changes`` (checked); an unknown name is a ``TypeError``."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, float]:
        """The five parameters by name, as the workbench's settings and sweep grids name them."""
        return {name: getattr(self, name) for name in BLEND_FIELDS}

    @classmethod
    def of(cls, settings: Mapping[str, Any], base: Blend | None = None) -> Blend:
        """The blend named in ``settings`` (a replay's settings, a URL's, a sweep point's):
        the keys it has of :data:`BLEND_FIELDS`, the rest from ``base`` (default: the spec's).
        Other keys are left to their owners."""
        given = {k: settings[k] for k in BLEND_FIELDS if k in settings and settings[k] is not None}
        return (base or cls()).replace(**given)


    @classmethod
    def grid(cls, base: Blend | None = None, **axes: Any) -> list[Blend]:
        """Every blend of the Cartesian product of ``axes`` (field -> a value or a list of
        values), the other fields from ``base``: a sweep grid as a set of blends."""
        unknown = sorted(set(axes) - set(BLEND_FIELDS))
        if unknown:
            raise TypeError(f"Blend has no field {unknown[0]!r}; its fields: {', '.join(BLEND_FIELDS)}")
        names = list(axes)
        values = [v if isinstance(v, (list, tuple, range)) else [v] for v in axes.values()]
        start = base or cls()
        return [start.replace(**dict(zip(names, point))) for point in itertools.product(*values)]


BLEND_FIELDS = tuple(f.name for f in dataclasses.fields(Blend))
