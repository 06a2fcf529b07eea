"""Every metric on hand-computed cases."""

import math

import numpy as np
import pandas as pd
import pytest

from vxmem.workbench.analysis.metrics import (
    aggregate,
    budget_fill,
    dcg_at_k,
    hit_at_k,
    mrr,
    ndcg_at_k,
    ranked_metrics,
    recall_at_k,
    reciprocal_rank,
    session_recall_at_k,
    stale_leak_at_k,
    tokens_saved,
)

GAINS = np.array([0.0, 2.0, 1.0, 0.0])  # ranks 2 and 3 are relevant, rank 2 twice as much


def test_hit_at_k():
    assert hit_at_k(GAINS, 1) == 0.0
    assert hit_at_k(GAINS, 2) == 1.0
    assert hit_at_k(np.zeros(3)) == 0.0


def test_recall_at_k_counts_relevant_found_over_relevant_existing():
    assert recall_at_k(GAINS, 3, k=2) == pytest.approx(1 / 3)
    assert recall_at_k(GAINS, 2) == pytest.approx(1.0)


def test_recall_is_nan_when_nothing_was_relevant():
    assert math.isnan(recall_at_k(np.zeros(3), 0))


def test_reciprocal_rank_and_mrr():
    assert reciprocal_rank(GAINS) == pytest.approx(0.5)
    assert reciprocal_rank(GAINS, k=1) == 0.0
    batch = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    assert mrr(batch) == pytest.approx((1 + 1 / 3 + 0) / 3)


def test_dcg_uses_linear_gains_and_log2_discounts():
    # 2/log2(3) + 1/log2(4)
    assert dcg_at_k(GAINS, 3) == pytest.approx(2 / math.log2(3) + 0.5)


def test_ndcg_against_the_ideal_order():
    ideal = np.array([1.0, 2.0, 1.0])  # any order: sorted inside
    # dcg@3 = 1.26186 + 0.5 ; idcg@3 = 2 + 1/log2(3) + 0.5
    expected = (2 / math.log2(3) + 0.5) / (2 + 1 / math.log2(3) + 0.5)
    assert ndcg_at_k(GAINS, ideal, 3) == pytest.approx(expected)
    assert ndcg_at_k(np.array([2.0, 1.0, 1.0]), ideal, 3) == pytest.approx(1.0)


def test_ndcg_is_nan_without_relevant_items():
    assert math.isnan(ndcg_at_k(GAINS, np.zeros(2), 3))


def test_stale_leak_at_k():
    stale = np.array([False, False, True])
    assert stale_leak_at_k(stale, 2) == 0.0
    assert stale_leak_at_k(stale, 3) == 1.0


def test_session_recall_counts_distinct_answer_sessions():
    bits = np.array([1, 0, 1, 4])  # answer sessions 0 and 2 (of 3)
    assert session_recall_at_k(bits, 3) == pytest.approx(2 / 3)
    assert session_recall_at_k(bits, 3, k=2) == pytest.approx(1 / 3)
    assert math.isnan(session_recall_at_k(bits, 0))


def test_budget_fill():
    assert budget_fill(150, 200) == pytest.approx(0.75)
    assert math.isnan(budget_fill(150, None))
    assert math.isnan(budget_fill(150, np.inf))


def test_tokens_saved_by_consolidation():
    assert tokens_saved(1200, 90) == 1110


def test_metrics_broadcast_over_batches():
    batch = np.stack([GAINS, GAINS[::-1]])
    assert hit_at_k(batch, 1).tolist() == [0.0, 0.0]
    assert reciprocal_rank(batch).tolist() == [0.5, 0.5]
    assert recall_at_k(batch, np.array([2, 4]), 2).tolist() == [0.5, 0.25]


def test_ranked_metrics_leave_hit_and_rr_undefined_when_nothing_is_relevant():
    out = ranked_metrics(np.zeros((1, 3)), np.array([[False, True, False]]), 0, np.zeros((1, 1)))
    assert math.isnan(out["hit"][0]) and math.isnan(out["rr"][0])
    assert out["stale_leak"][0] == 1.0


def test_aggregate_means_per_group_and_category_with_mrr():
    frame = pd.DataFrame({"point": [0, 0, 1, 1], "category": ["a", "b", "a", "b"],
                          "hit": [1.0, 0.0, 1.0, 1.0], "rr": [1.0, np.nan, 0.5, 0.25]})
    per_point = aggregate(frame, by=["point"])
    assert per_point["hit"].tolist() == [0.5, 1.0]
    assert per_point["mrr"].tolist() == [1.0, 0.375]  # NaN skipped
    assert per_point["probes"].tolist() == [2, 2]
    by_cat = aggregate(frame, by=["point"], category=True)
    assert len(by_cat) == 4 and set(by_cat["category"]) == {"a", "b"}


def test_an_empty_list_finds_nothing():
    empty = np.zeros((2, 0))
    assert reciprocal_rank(empty).tolist() == [0.0, 0.0]
    assert hit_at_k(empty).tolist() == [0.0, 0.0]
