"""Why a memory was or was not returned by a recall: one vocabulary for every explainer.

The replay explainer (:func:`vxmem.workbench.analysis.why.why_recalled`) and the explainer over a
live memory (:func:`~vxmem.workbench.analysis.why.why_recalled_live`) both answer in it, and the
dashboard's tables show it.
"""

from __future__ import annotations

RETURNED = "returned"
CUT_BY_SCORE_GAP = "cut_by_score_gap"
CUT_BY_BUDGET = "cut_by_budget"
OUT_RANKED = "out_ranked"
CUT_BY_SECOND_STAGE = "cut_by_second_stage"
OUTSIDE_POOL = "outside_pool"
EXPIRED = "expired"
SUPERSEDED = "superseded"
OTHER_SESSION = "other_session"
KIND_EXCLUDED = "kind_excluded"
DELETED = "deleted"

# Best outcome first. An explainer checks the recorded facts (deleted, kind, session,
# superseded) before the ranking, and the first reason that holds is the memory's.
REASONS = (
    RETURNED,             # shipped, at rank r
    CUT_BY_SCORE_GAP,     # within the limit, after the score cliff score_gap cuts at
    CUT_BY_BUDGET,        # within the limit, but it did not fit the token budget
    OUT_RANKED,           # in the candidate pool, ranked below the limit
    CUT_BY_SECOND_STAGE,  # gathered by the first stage, cut by the second: not among the max(2 x limit, 20) it keeps
    OUTSIDE_POOL,         # eligible, but not among the max(4 x limit, 40) most relevant
    EXPIRED,              # past its time to live
    SUPERSEDED,           # replaced by a correction or a contradicting fact
    OTHER_SESSION,        # in a session the probe does not recall from
    KIND_EXCLUDED,        # of a kind the recall does not ask for
    DELETED,              # forgotten, consolidated or expired away before the moment asked about
)
