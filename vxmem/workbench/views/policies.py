"""What each ranking policy takes from the workbench's controls: its own parameters, and the shared ones it ignores.

The A/B page sets a policy per side; a slider that the side's policy never reads must say so rather than
move nothing (:func:`vxmem.workbench.analysis.questions.inert_parameters`, as the Tune page's notes do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis import questions
from ..replay.record import Replay
from ..sweep.policies import POLICIES
from .settings import DEFAULT_SETTINGS

# What every policy ranks with, whatever it scores by: how many memories, and how many tokens, it ships.
SIZE_PARAMS = ("limit", "token_budget")


def policy_params(policy: str) -> dict[str, float]:
    """The parameters of ``policy`` beyond the limit and the token budget, with their defaults."""
    return dict(POLICIES[policy].defaults)


def policy_description(policy: str) -> str:
    """What ``policy`` computes, in one line."""
    return POLICIES[policy].description


def ignored_by(policy: str, settings: Mapping[str, Any], names: Sequence[str],
               replays: Sequence[Replay] | None = None) -> dict[str, str]:
    """Which of the shared controls ``names`` cannot change a ranking under ``policy`` at ``settings``, each with
    why: another policy's parameters, and (for the blend) one multiplied away by a zero weight."""
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    point = {k: s[k] for k in names if k not in SIZE_PARAMS and k in s}
    why = questions.inert_parameters(point, policy=policy, replays=list(replays) if replays is not None else None)
    out = {}
    for k in names:
        if k in why:
            reason = why[k]
            if k in point and k not in POLICIES[policy].params:
                reason = f"the {policy} policy scores by {policy_description(policy)}, without it"
            out[k] = reason
    return out
