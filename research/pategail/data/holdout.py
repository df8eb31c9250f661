"""Held-out users: whole users kept out of training, the non-members of the membership-inference attacks.

A membership attack asks whether a *user* (a device) took part in training, so its non-members must be
users whose days no device ever held — not merely later days of training users. ``pategail data
prepare --holdout-users FRACTION`` moves every training day of round(FRACTION × users) users, drawn with a
seeded generator, out of ``train_days`` into ``holdout_days``; the data set records which users they were
(``holdout_users.npy`` and ``dataset.json`` → ``holdout``). The test split is left as it is: test days are
never training data, whoever they belong to.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from pategail.data.dataset import Dataset
from pategail.server.errors import DataError


def choose_holdout_users(users: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted ids of round(fraction × len(users)) users (halves up) drawn without replacement; at least one
    when ``fraction`` > 0 and at most all but one (someone must train). ``fraction`` in [0, 1)."""
    if not 0 <= fraction < 1:
        raise DataError(f"--holdout-users {fraction}: must be at least 0 and below 1")
    users = np.unique(users)
    if fraction == 0:
        return users[:0]
    if len(users) < 2:
        raise DataError(f"--holdout-users {fraction}: the data set has {len(users)} user; holding users out "
                        "needs at least 2 (one to train, one held out)")
    n = min(len(users) - 1, max(1, int(np.floor(fraction * len(users) + 0.5))))
    return np.sort(rng.choice(users, size=n, replace=False))


def hold_out_users(dataset: Dataset, fraction: float, seed: int = 0) -> Dataset:
    """The data set with the training days of round(fraction × users) users (seeded draw) moved to
    ``holdout_days`` / ``holdout_users``; ``meta["holdout"]`` records the fraction, the seed and the users.
    User ids are kept (not renumbered), so ``source_user_ids`` still names every user."""
    held = choose_holdout_users(dataset.users, fraction, np.random.default_rng([seed, 0x40D]))
    if len(held) == 0:
        return dataset
    out = np.isin(dataset.train_users, held)
    meta = {**dataset.meta, "holdout": {"fraction": fraction, "seed": seed, "users": [int(u) for u in held],
                                        "days": int(out.sum())}}
    return dataclasses.replace(dataset, train_days=dataset.train_days[~out], train_users=dataset.train_users[~out],
                               holdout_days=dataset.train_days[out], holdout_users=dataset.train_users[out],
                               meta=meta)
