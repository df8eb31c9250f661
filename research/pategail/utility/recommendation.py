"""Location recommendation (the paper's second application): implicit-feedback matrix factorisation fitted
on visit counts of real, synthetic or both kinds of days, judged on real users' later visits.

The users recommended to ("query users") are real users whose later days nobody trained on: users held out
of training (``--holdout-users``; each one's first days are its history, its last days the target), or,
when the data set has none but knows the users of its test days, the training users with their test days
as the target. The factorisation is fitted on the query users' histories (one row each) plus the arm's
days (one row per day): (a) the real training days, (b) the synthetic days, (c) both. For each query user,
the ten best-scored cells not in its history are recommended; the relevant cells are those the target days
visit and the history never did. Recall@10 = hits / relevant; NDCG@10 = DCG / ideal DCG with binary gains.

The factorisation is weighted ALS for implicit feedback (Hu, Koren and Volinsky 2008): preference
p = [count > 0], confidence c = 1 + α·log(1 + count), loss Σ c (p − xᵀy)² + λ(‖x‖² + ‖y‖²), solved
row by row in closed form. Written here in numpy (small, and tested against the closed form).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import sparse

from pategail.utility.config import RecommendationConfig

ARMS = ("real", "synthetic", "real+synthetic")
HISTORY_SHARE = 0.7
"""A held-out query user's first 70% of days (at least one) are its history, the rest its target."""


def visit_matrix(days: np.ndarray, rows: np.ndarray, n_rows: int, n_cells: int) -> sparse.csr_matrix:
    """csr (n_rows, n_cells): slots spent in each cell by each row; ``rows[i]`` is day i's row."""
    days = np.asarray(days, dtype=np.int64)
    r = np.repeat(np.asarray(rows, dtype=np.int64), days.shape[1])
    return sparse.csr_matrix((np.ones(r.size), (r, days.ravel())), shape=(n_rows, n_cells))


def _solve_rows(counts: sparse.csr_matrix, fixed: np.ndarray, config: RecommendationConfig) -> np.ndarray:
    """One half-sweep: for every row u, argmin_x Σ_i c_ui (p_ui − xᵀy_i)² + λ‖x‖² with the other table
    ``fixed`` (y_i its rows): x = (YᵀY + Yᵀ(C_u − I)Y + λI)⁻¹ Yᵀ C_u p_u, summing only over visited items."""
    gram = fixed.T @ fixed + config.regularization * np.eye(fixed.shape[1])
    out = np.zeros((counts.shape[0], fixed.shape[1]))
    for u in range(counts.shape[0]):
        lo, hi = counts.indptr[u], counts.indptr[u + 1]
        if lo == hi:
            continue                                    # no visits: the solution is 0
        items = counts.indices[lo:hi]
        conf = 1.0 + config.alpha * np.log1p(counts.data[lo:hi])
        y = fixed[items]
        a = gram + (y.T * (conf - 1.0)) @ y
        out[u] = np.linalg.solve(a, y.T @ conf)
    return out


def implicit_als(counts: sparse.csr_matrix, config: RecommendationConfig) -> tuple[np.ndarray, np.ndarray]:
    """Row factors (n_rows, f) and column factors (n_cols, f) of weighted ALS on visit ``counts``."""
    counts = sparse.csr_matrix(counts, dtype=np.float64)
    rng = np.random.default_rng([config.seed, 0xA15])
    items = rng.normal(scale=0.1, size=(counts.shape[1], config.factors))
    transposed = counts.T.tocsr()
    users = np.zeros((counts.shape[0], config.factors))
    for _ in range(config.iterations):
        users = _solve_rows(counts, items, config)
        items = _solve_rows(transposed, users, config)
    return users, items


def top_k(scores: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
    """The k best-scored columns of one row, best first, never one of ``exclude``; ties by column id."""
    scores = np.asarray(scores, dtype=float).copy()
    scores[np.asarray(exclude, dtype=np.int64)] = -np.inf
    order = np.lexsort((np.arange(len(scores)), -scores))
    return order[:k]


def recall_at_k(recommended: np.ndarray, relevant: np.ndarray) -> float:
    """|recommended ∩ relevant| / |relevant|."""
    return float(len(np.intersect1d(recommended, relevant)) / len(relevant))


def ndcg_at_k(recommended: np.ndarray, relevant: np.ndarray) -> float:
    """Σ_{hits at 1-based rank r} 1/log2(r + 1), divided by the same sum for min(k, |relevant|) hits."""
    hit = np.isin(recommended, relevant)
    dcg = float(np.sum(hit / np.log2(np.arange(2, len(recommended) + 2))))
    ideal = float(np.sum(1 / np.log2(np.arange(2, min(len(recommended), len(relevant)) + 2))))
    return dcg / ideal


@dataclass(frozen=True)
class QueryUsers:
    """Real users to recommend to. history / target: lists of int (n_days_u, T) per user; source: which
    split they came from ("holdout" or "test")."""

    users: np.ndarray
    history: list
    target: list
    source: str


def query_users(dataset) -> QueryUsers | None:
    """Held-out users split in time (first ``HISTORY_SHARE`` of days → history), else training users with
    their test days as target (when test days have users), else None."""
    if dataset.holdout_days is not None and len(dataset.holdout_days):
        ids, history, target = [], [], []
        for user in dataset.heldout_users:
            days = dataset.holdout_days[dataset.holdout_users == user]
            if len(days) < 2:
                continue
            cut = min(len(days) - 1, max(1, int(round(HISTORY_SHARE * len(days)))))
            ids.append(user)
            history.append(days[:cut])
            target.append(days[cut:])
        return QueryUsers(np.asarray(ids), history, target, "holdout") if ids else None
    known = dataset.test_users >= 0
    if known.any():
        ids = [u for u in np.unique(dataset.test_users[known]) if u in set(dataset.users.tolist())]
        return QueryUsers(np.asarray(ids), [dataset.user_days(u) for u in ids],
                          [dataset.test_days[dataset.test_users == u] for u in ids], "test")
    return None


def evaluate_arm(queries: QueryUsers, arm_days: np.ndarray, n_cells: int, config: RecommendationConfig) -> dict:
    """Fit on the query users' histories (rows 0..q-1) plus ``arm_days`` (a row each); mean Recall@k and
    NDCG@k over query users with at least one new cell in their target."""
    q = len(queries.users)
    hist_rows = np.concatenate([np.full(len(h), i) for i, h in enumerate(queries.history)])
    rows = np.concatenate([hist_rows, q + np.arange(len(arm_days))])
    days = np.concatenate([np.concatenate(queries.history), arm_days]) if len(arm_days) else np.concatenate(
        queries.history)
    counts = visit_matrix(days, rows, q + len(arm_days), n_cells)
    user_f, item_f = implicit_als(counts, config)
    recalls, ndcgs = [], []
    for i in range(q):
        seen = np.unique(queries.history[i])
        relevant = np.setdiff1d(np.unique(queries.target[i]), seen)
        if len(relevant) == 0:
            continue
        recommended = top_k(item_f @ user_f[i], seen, config.k)
        recalls.append(recall_at_k(recommended, relevant))
        ndcgs.append(ndcg_at_k(recommended, relevant))
    return {"recall": float(np.mean(recalls)) if recalls else None,
            "ndcg": float(np.mean(ndcgs)) if ndcgs else None, "users": len(recalls)}


def recommendation_experiment(dataset, synthetic_days: np.ndarray, config: RecommendationConfig) -> dict:
    """The three arms; ``{"available": False, "reason": ...}`` when the data set has no query users."""
    queries = query_users(dataset)
    if queries is None:
        return {"available": False,
                "reason": "no real users with unseen later days: prepare the data set with --holdout-users"}
    arms = {"real": dataset.train_days, "synthetic": synthetic_days,
            "real+synthetic": np.concatenate([dataset.train_days, synthetic_days])}
    scores = {name: evaluate_arm(queries, days, dataset.n_cells, config) for name, days in arms.items()}
    return {"available": True, "arms": scores, "k": config.k, "query_users": int(len(queries.users)),
            "query_source": queries.source, "config": asdict(config)}
