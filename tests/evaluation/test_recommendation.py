"""Location recommendation: Recall/NDCG by hand, the ALS row update against the closed form, query users."""
import numpy as np
import pytest
from scipy import sparse

from pategail.data.dataset import Dataset
from pategail.utility.config import RecommendationConfig
from pategail.utility.recommendation import (_solve_rows, implicit_als, ndcg_at_k, query_users, recall_at_k,
                                             recommendation_experiment, top_k, visit_matrix)


def test_recall_and_ndcg_by_hand():
    rec, relevant = np.array([5, 2, 9]), np.array([2, 7])
    assert recall_at_k(rec, relevant) == 0.5
    # one hit at rank 2: DCG = 1/log2(3); ideal: two hits at ranks 1, 2 = 1 + 1/log2(3)
    assert ndcg_at_k(rec, relevant) == pytest.approx((1 / np.log2(3)) / (1 + 1 / np.log2(3)))
    assert ndcg_at_k(np.array([2, 7, 1]), relevant) == pytest.approx(1.0)


def test_top_k_skips_excluded_and_breaks_ties_by_id():
    assert top_k(np.array([0.5, 0.9, 0.9, 0.1, 0.7]), exclude=np.array([1]), k=3).tolist() == [2, 4, 0]


def test_visit_matrix_counts_slots_per_row():
    m = visit_matrix(np.array([[0, 0, 2], [2, 2, 2], [1, 0, 0]]), np.array([0, 1, 0]), 2, 3).toarray()
    assert m.tolist() == [[4, 1, 1], [0, 0, 3]]


def test_row_update_is_the_weighted_least_squares_solution():
    rng = np.random.default_rng(0)
    counts = sparse.csr_matrix(np.array([[3.0, 0, 1, 0, 0], [0, 0, 0, 0, 0], [1, 2, 0, 0, 5]]))
    items = rng.normal(size=(5, 2))
    config = RecommendationConfig(factors=2, regularization=0.3, alpha=2.0)
    got = _solve_rows(counts, items, config)
    for u in range(3):
        r = counts.toarray()[u]
        c = 1 + 2.0 * np.log1p(r)
        p = (r > 0).astype(float)
        want = np.linalg.solve(items.T @ (c[:, None] * items) + 0.3 * np.eye(2), items.T @ (c * p))
        np.testing.assert_allclose(got[u], want, atol=1e-10)


def test_als_ranks_a_co_visited_cell_first():
    # rows that visit cell 0 also visit cell 1; the query row visited only cell 0
    days = np.array([[0, 1, 1, 3]] * 6 + [[2, 3, 3, 4]] * 6 + [[0, 0, 0, 0]])
    counts = visit_matrix(days, np.arange(13), 13, 5)
    users, items = implicit_als(counts, RecommendationConfig(factors=4, iterations=15))
    assert top_k(items @ users[12], exclude=np.array([0]), k=1).tolist() == [1]


def _dataset(holdout=True):
    rng = np.random.default_rng(0)
    cells = np.column_stack([39.9 + rng.random(400) * 0.1, 116.3 + rng.random(400) * 0.1])
    train = rng.integers(0, 400, (12, 48))
    extra = {}
    if holdout:
        extra = dict(holdout_days=rng.integers(0, 400, (7, 48)), holdout_users=np.array([5, 5, 5, 6, 6, 6, 7]))
    return Dataset(cells=cells, train_days=train, train_users=np.repeat([0, 1, 2], 4), test_days=train[:3],
                   test_users=np.full(3, -1), **extra)


def test_query_users_split_held_out_users_in_time():
    q = query_users(_dataset())
    assert q.source == "holdout" and q.users.tolist() == [5, 6]        # user 7 has one day: no target
    ds = _dataset()
    assert np.array_equal(q.history[0], ds.holdout_days[:2]) and np.array_equal(q.target[0], ds.holdout_days[2:3])
    assert query_users(_dataset(holdout=False)) is None
    assert recommendation_experiment(_dataset(holdout=False), np.zeros((1, 48), int),
                                     RecommendationConfig())["available"] is False


def test_experiment_has_three_arms():
    res = recommendation_experiment(_dataset(), np.zeros((4, 48), int), RecommendationConfig(iterations=2))
    assert set(res["arms"]) == {"real", "synthetic", "real+synthetic"} and res["query_users"] == 2
    assert all(a["users"] == 2 and 0 <= a["recall"] <= 1 and 0 <= a["ndcg"] <= 1 for a in res["arms"].values())
