"""Populations for scale studies: N devices built from a data set's users by resampling whole users.

Device i holds the days of ``users[i]``, a user drawn with replacement (so a data set of 1,000 users gives a
population of 100,000 devices with about 100 copies of each user), optionally only a random share of that
user's days (drawn per device, so two copies of one user differ). Every table made from such a run says
"resampled population": the devices are not independent people.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.server.errors import PategailError


@dataclass(frozen=True, eq=False)
class Population:
    """Which days each of ``len(users)`` devices holds."""

    users: np.ndarray
    """int (N,): the source user of each device."""
    day_share: float | None
    """None: each device holds all of its user's days; else a random share of them (at least one day)."""
    seed: int
    """Seed of the day subsets (device i's subset comes from (seed, i) alone)."""
    source_users: int
    """Users of the data set the devices were drawn from."""
    resampled: bool = True
    """False: one device per distinct user (no resampling)."""

    def __len__(self) -> int:
        return len(self.users)

    def day_indices(self, i: int, n_days: int) -> np.ndarray | None:
        """Which of its user's ``n_days`` days device ``i`` holds (sorted), or None for all of them."""
        if self.day_share is None:
            return None
        k = max(1, round(self.day_share * n_days))
        return np.sort(np.random.default_rng([self.seed, 0x5E, int(i)]).choice(n_days, k, replace=False))

    def device_days(self, dataset, i: int) -> np.ndarray:
        """The days device ``i`` holds."""
        return self.devices_days(dataset, i, i + 1)[0]

    def devices_days(self, dataset, lo: int, hi: int) -> list[np.ndarray]:
        """The days of devices ``lo``..``hi`` − 1; devices holding all of one user's days share one array (a
        copy each would be 1.3 GB at 100,000 devices of this project's GeoLife data)."""
        whole: dict[int, np.ndarray] = {}
        out = []
        for i in range(lo, hi):
            user = int(self.users[i])
            if user not in whole:
                whole[user] = dataset.user_days(user)
            subset = self.day_indices(i, len(whole[user]))
            out.append(whole[user] if subset is None else whole[user][subset])
        return out

    @property
    def method(self) -> str:
        if not self.resampled:
            return "one device per user"
        whole = "whole users drawn with replacement"
        return whole if self.day_share is None else f"{whole}, each device a random {self.day_share:g} of its days"

    @property
    def max_copies(self) -> int:
        """The most devices holding one user's days (group privacy: that user's guarantee is the one of a group
        of this many devices)."""
        return int(np.bincount(self.users).max()) if len(self.users) else 0

    def describe(self) -> dict:
        """report.json's ``population`` entry."""
        return {"devices": len(self.users), "source_users": self.source_users, "method": self.method}


def resample_population(users: np.ndarray, n_devices: int, seed: int, day_share: float | None = None) -> Population:
    """``n_devices`` devices from ``users`` drawn with replacement (seeded), each holding its user's days or a
    random ``day_share`` of them."""
    if n_devices < 1:
        raise PategailError(f"--population must be at least 1, got {n_devices}")
    if day_share is not None and not 0 < day_share <= 1:
        raise PategailError(f"--population-days must be in (0, 1], got {day_share}")
    users = np.sort(np.asarray(users))
    drawn = np.random.default_rng([seed, 0x909]).choice(users, n_devices, replace=True)
    return Population(drawn.astype(np.int64), day_share, seed, len(users))


def one_device_per_user(users: np.ndarray, seed: int, source_users: int) -> Population:
    """Device i holds all the days of ``users[i]`` (the SDK emulator's devices; no resampling)."""
    return Population(np.asarray(users, dtype=np.int64), None, seed, source_users, resampled=False)
