"""Membership inference by users: the protocol both attacks share (the paper's MIA).

The question is whether a *user* was a training device, so members and non-members are users: members hold
training days, non-members are users kept out of training entirely (``--holdout-users``). As in the paper,
as many member users as non-member users are drawn, each day gets a feature vector (white-box: the
published policy's per-step log-probabilities; black-box: distances to the closest synthetic days), a random
forest learns member vs non-member days, and k-fold cross-validation scores every day by a forest that never
saw its user (folds are grouped by user, so the forest cannot recognise a user's other days). A user's score
is the mean of its days' scores. Reported: the AUC and the accuracy (score > ½) over users, with bootstrap
percentile intervals (users resampled within each class), and the AUC over days for reference.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class AttackConfig:
    """Budget and protocol of the membership attacks."""

    days_per_user: int = 20
    """At most this many days of each attacked user (drawn at random): bounds the cost, and keeps users with
    hundreds of days from dominating the forest."""
    n_folds: int = 5
    """Cross-validation folds (the paper: five), grouped by user; fewer when a class has fewer users."""
    n_estimators: int = 200
    """Trees of the random forest."""
    n_bootstrap: int = 1000
    """Bootstrap resamples of the users for the intervals."""
    confidence: float = 0.95
    """Coverage of the percentile intervals."""

    def __post_init__(self):
        if self.days_per_user < 1 or self.n_folds < 2 or self.n_estimators < 1 or self.n_bootstrap < 1:
            raise ValueError("days_per_user, n_estimators and n_bootstrap must be >= 1 and n_folds >= 2")
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must be in (0, 1)")


def roc_auc(scores, labels) -> float:
    """Area under the ROC curve = P(score of a random positive > score of a random negative), ties ½
    (the Mann–Whitney statistic). labels: 1 = member. Needs both classes."""
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels).astype(bool)
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("roc_auc needs at least one member and one non-member")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def accuracy(scores, labels, threshold: float = 0.5) -> float:
    """Share of users classified right when "member" means score > threshold."""
    return float(np.mean((np.asarray(scores) > threshold) == np.asarray(labels).astype(bool)))


def roc_points(scores, labels) -> tuple[list[float], list[float]]:
    """(false-positive rates, true-positive rates) of every threshold, from (0, 0) to (1, 1)."""
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels).astype(bool)
    thresholds = np.unique(scores)[::-1]
    fpr = [0.0] + [float(np.mean(scores[~labels] >= t)) for t in thresholds]
    tpr = [0.0] + [float(np.mean(scores[labels] >= t)) for t in thresholds]
    return fpr, tpr


def bootstrap_interval(scores, labels, statistic: Callable, rng: np.random.Generator, n_resamples: int,
                       confidence: float) -> tuple[float, float]:
    """Percentile interval of ``statistic(scores, labels)`` over resamples that redraw the members and the
    non-members separately, with replacement (so every resample has both classes)."""
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels).astype(bool)
    pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
    values = np.empty(n_resamples)
    for b in range(n_resamples):
        idx = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        values[b] = statistic(scores[idx], labels[idx])
    tail = (1 - confidence) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


def attack_sample(member_days: np.ndarray, member_users: np.ndarray, nonmember_days: np.ndarray,
                  nonmember_users: np.ndarray, days_per_user: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The attacked days: as many member users as non-member users (the smaller class decides), drawn at
    random, and at most ``days_per_user`` random days of each. Returns (days (n, T), user (n,), label (n,)
    with 1 = member), ordered by label then user."""
    member_ids, nonmember_ids = np.unique(member_users), np.unique(nonmember_users)
    n = min(len(member_ids), len(nonmember_ids))
    if n < 2:
        raise ValueError(f"a membership attack needs at least 2 member and 2 non-member users; the data set has "
                         f"{len(member_ids)} and {len(nonmember_ids)} (prepare it with --holdout-users)")
    days_out, users_out, labels_out = [], [], []
    for label, days, users, ids in ((1, member_days, member_users, member_ids),
                                    (0, nonmember_days, nonmember_users, nonmember_ids)):
        for user in np.sort(rng.choice(ids, n, replace=False)):
            rows = np.flatnonzero(users == user)
            if len(rows) > days_per_user:
                rows = np.sort(rng.choice(rows, days_per_user, replace=False))
            days_out.append(days[rows])
            users_out.append(np.full(len(rows), user))
            labels_out.append(np.full(len(rows), label))
    return np.concatenate(days_out), np.concatenate(users_out), np.concatenate(labels_out).astype(np.int8)


def cross_validated_day_scores(features: np.ndarray, users: np.ndarray, labels: np.ndarray, config: AttackConfig,
                               rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """P(member) of every day from a random forest trained on the other folds (folds grouped by user and
    stratified by label). Returns (scores (n_days,), folds used)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedGroupKFold

    per_class = min(len(np.unique(users[labels == 1])), len(np.unique(users[labels == 0])))
    k = min(config.n_folds, per_class)
    folds = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=int(rng.integers(2**31)))
    scores = np.empty(len(labels))
    for train, test in folds.split(features, labels, groups=users):
        # class_weight: members and non-members count equally even when their users hold unequal days
        forest = RandomForestClassifier(n_estimators=config.n_estimators, class_weight="balanced", n_jobs=1,
                                        random_state=int(rng.integers(2**31)))
        forest.fit(features[train], labels[train])
        scores[test] = forest.predict_proba(features[test])[:, list(forest.classes_).index(1)]
    return scores, k


def membership_attack(features: np.ndarray, users: np.ndarray, labels: np.ndarray, config: AttackConfig,
                      rng: np.random.Generator) -> dict:
    """Run the protocol on per-day ``features`` (n_days, F) of the days of :func:`attack_sample`.

    Returns {"auc", "auc_interval", "accuracy", "accuracy_interval", "auc_days", "users" {"members",
    "nonmembers"}, "days", "folds", "roc" {"fpr", "tpr"}}; scores are per user (mean of the user's days)."""
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int8)
    day_scores, k = cross_validated_day_scores(features, users, labels, config, rng)
    ids, inverse = np.unique(users, return_inverse=True)
    user_scores = np.bincount(inverse, weights=day_scores) / np.bincount(inverse)
    user_labels = np.zeros(len(ids), dtype=np.int8)
    user_labels[inverse] = labels
    lo_auc, hi_auc = bootstrap_interval(user_scores, user_labels, roc_auc, rng, config.n_bootstrap,
                                        config.confidence)
    lo_acc, hi_acc = bootstrap_interval(user_scores, user_labels, accuracy, rng, config.n_bootstrap,
                                        config.confidence)
    fpr, tpr = roc_points(user_scores, user_labels)
    return {"auc": roc_auc(user_scores, user_labels), "auc_interval": [lo_auc, hi_auc],
            "accuracy": accuracy(user_scores, user_labels), "accuracy_interval": [lo_acc, hi_acc],
            "auc_days": roc_auc(day_scores, labels),
            "users": {"members": int(user_labels.sum()), "nonmembers": int(len(ids) - user_labels.sum())},
            "days": int(len(labels)), "folds": k, "confidence": config.confidence,
            "roc": {"fpr": fpr, "tpr": tpr}}
