"""Membership inference: AUC, accuracy and intervals by hand; users as the unit; a planted leak is caught."""
import numpy as np
import pytest

from pategail.attacks.blackbox import blackbox_features, day_distances_km
from pategail.attacks.membership import (AttackConfig, accuracy, attack_sample, bootstrap_interval,
                                         membership_attack, roc_auc, roc_points)
from pategail.sdk.geo import haversine_km


def test_auc_by_hand():
    # positives 0.9, 0.4; negatives 0.5, 0.4: pairs (0.9>0.5) 1, (0.9>0.4) 1, (0.4<0.5) 0, (0.4=0.4) 1/2
    assert roc_auc([0.9, 0.4, 0.5, 0.4], [1, 1, 0, 0]) == pytest.approx(2.5 / 4)
    assert roc_auc([1, 2, 3], [0, 1, 1]) == 1.0 and roc_auc([1, 2, 3], [1, 0, 0]) == 0.0
    with pytest.raises(ValueError):
        roc_auc([1, 2], [1, 1])


def test_accuracy_and_roc_points_by_hand():
    assert accuracy([0.9, 0.4, 0.6, 0.1], [1, 1, 0, 0]) == 0.5
    fpr, tpr = roc_points([0.9, 0.4, 0.6, 0.1], [1, 1, 0, 0])
    assert fpr == [0.0, 0.0, 0.5, 0.5, 1.0] and tpr == [0.0, 0.5, 0.5, 1.0, 1.0]


def test_bootstrap_interval_brackets_the_estimate_and_is_degenerate_when_perfect():
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(1, 1, 30), rng.normal(0, 1, 30)])
    labels = np.r_[np.ones(30), np.zeros(30)]
    lo, hi = bootstrap_interval(scores, labels, roc_auc, np.random.default_rng(1), 500, 0.95)
    assert lo < roc_auc(scores, labels) < hi and hi - lo < 0.4
    assert bootstrap_interval([2, 3, 0, 1], [1, 1, 0, 0], roc_auc, np.random.default_rng(1), 50, 0.9) == (1.0, 1.0)


def test_attack_sample_balances_users_and_caps_days():
    member_users = np.repeat([0, 1, 2, 3], [5, 30, 2, 8])
    nonmember_users = np.repeat([7, 8], [40, 3])
    days_m = np.arange(len(member_users))[:, None] * np.ones((1, 4), int)
    days_n = 1000 + np.arange(len(nonmember_users))[:, None] * np.ones((1, 4), int)
    days, users, labels = attack_sample(days_m, member_users, days_n, nonmember_users, 10, np.random.default_rng(0))
    assert len(np.unique(users[labels == 1])) == 2 and set(users[labels == 0]) == {7, 8}
    assert np.bincount(users).max() <= 10 and (users == 8).sum() == 3
    # each day stays with its user
    assert all(member_users[d[0]] == u for d, u, label in zip(days, users, labels) if label == 1)
    with pytest.raises(ValueError, match="--holdout-users"):
        attack_sample(days_m, member_users, days_n[:3], nonmember_users[:3] * 0 + 7, 10, np.random.default_rng(0))


def test_day_distance_by_hand():
    cells = np.array([[39.90, 116.40], [39.91, 116.40], [40.00, 116.50]])
    d = day_distances_km(np.array([[0, 0, 1]]), np.array([[0, 1, 2], [0, 0, 1]]), cells)
    expected = (0 + haversine_km(39.90, 116.40, 39.91, 116.40) + haversine_km(39.91, 116.40, 40.00, 116.50)) / 3
    assert d[0, 0] == pytest.approx(expected, rel=1e-5) and d[0, 1] == pytest.approx(0, abs=1e-6)


def _population(rng, n_users=16, days_per_user=6, n_cells=300):
    """Users who each move between their own few cells (so days of one user resemble each other)."""
    users, days = [], []
    for u in range(n_users):
        own = rng.choice(n_cells, 4, replace=False)
        days.append(own[rng.integers(0, 4, (days_per_user, 48))])
        users.append(np.full(days_per_user, u))
    return np.concatenate(days), np.concatenate(users)


def test_planted_leak_gives_black_box_auc_near_one_and_chance_without_leak():
    rng = np.random.default_rng(0)
    days, users = _population(rng, n_users=48, days_per_user=4)
    cells = np.column_stack([39.9 + rng.random(300) * 0.2, 116.3 + rng.random(300) * 0.2])
    members, nonmembers = users < 16, (users >= 16) & (users < 32)    # users 32..47 belong to neither
    sample = attack_sample(days[members], users[members], days[nonmembers], users[nonmembers], 20,
                           np.random.default_rng(1))
    config = AttackConfig(n_folds=4, n_estimators=50, n_bootstrap=200)
    leak = membership_attack(blackbox_features(sample[0], days[members], cells), sample[1], sample[2], config,
                             np.random.default_rng(2))
    assert leak["auc"] >= 0.95 and leak["accuracy"] >= 0.85 and leak["users"] == {"members": 16, "nonmembers": 16}
    assert leak["auc_interval"][0] >= 0.8
    # synthetic days that copy users who are neither members nor non-members: nothing to find
    fair = membership_attack(blackbox_features(sample[0], days[users >= 32], cells), sample[1], sample[2], config,
                             np.random.default_rng(2))
    assert fair["auc_interval"][0] < 0.5 < fair["auc_interval"][1] and abs(fair["auc"] - 0.5) < 0.25
