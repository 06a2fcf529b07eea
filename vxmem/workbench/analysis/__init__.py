"""What is learnt from replays: metrics, the questions a researcher asks, and why a memory was or was not recalled.

- :mod:`~vxmem.workbench.analysis.questions`: A/B comparisons with paired bootstrap intervals,
  inert parameters, Pareto fronts, stale memories ranked above their replacements;
- :mod:`~vxmem.workbench.analysis.why`: why a memory was or was not recalled, in a replay or a live
  memory, in the vocabulary of :mod:`~vxmem.workbench.analysis.reasons`;
- :mod:`~vxmem.workbench.analysis.metrics`: retrieval metrics as small pure functions over arrays;
- :mod:`~vxmem.workbench.analysis.audit`: did each correction retire the right memory, per judge.

``from vxmem.workbench.analysis import ab_compare, why_recalled`` hands the questions' names and
the explainers on, each module imported when its name is first asked for.
"""

from ...core.lazy import handed_on

_QUESTIONS = ["AB_METRICS", "POINT_KEYS", "ab_compare", "ABSummary", "ab_summary", "inert_parameters", "pareto_front",
              "stale_above_replacement", "stale_above_replacement_rate", "stale_replacement_pairs",
              "replay_stale_above_replacement"]
__all__ = [*_QUESTIONS, "why_recalled", "why_recalled_live"]
__getattr__ = handed_on(__name__, {**{name: "questions" for name in _QUESTIONS},
                                   "why_recalled": "why", "why_recalled_live": "why"})
