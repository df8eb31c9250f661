"""Replay of earlier generated pairs in the personal discriminator's training (issue 19).

Adversarial training cycles when each discriminator forgets the generated modes it has already beaten: the
policy returns to them a few rounds later and is rewarded again (Shrivastava et al. 2017 keep a history of
generated samples against this). A device that replays keeps a bounded buffer of the generated
(state, action) pairs it was asked to score in its last ``rounds`` rounds — ``pairs_per_round`` of each,
drawn at random from the request — and takes ``round(share · n_generated)`` of the generated half of every
minibatch from it (labelled generated, as ever); the rest still comes from the current request.

The buffer holds only the coordinator's synthetic days, never the owner's; it stays on the device with the
discriminator's checkpoint (:mod:`pategail.sdk.checkpoint`) so a replayed round starts from the buffer it
first started from. Off unless the bundle's manifest declares ``discriminator.replay``
{"share", "rounds", "pairs_per_round"}. Torch-free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pategail.sdk.features import N_PAIR_FEATURES


@dataclass(frozen=True)
class ReplaySettings:
    """How a device replays earlier generated pairs (the manifest's ``discriminator.replay``)."""

    share: float
    """Share of each minibatch's generated pairs drawn from the buffer, in (0, 1)."""
    rounds: int
    """Earlier rounds the buffer spans (>= 1): the oldest round's pairs leave when a newer one is added."""
    pairs_per_round: int
    """Pairs of each round's request kept in the buffer (fewer when the request has fewer)."""

    def __post_init__(self) -> None:
        if not 0 < self.share < 1:
            raise ValueError(f"replay share must be in (0, 1), got {self.share}")
        if self.rounds < 1 or self.pairs_per_round < 1:
            raise ValueError("replay rounds and pairs_per_round must be >= 1")

    @property
    def capacity(self) -> int:
        return self.rounds * self.pairs_per_round

    def to_manifest(self) -> dict[str, Any]:
        return {"share": self.share, "rounds": self.rounds, "pairs_per_round": self.pairs_per_round}

    @classmethod
    def from_manifest(cls, section: dict[str, Any] | None) -> "ReplaySettings | None":
        """The settings of a manifest's ``discriminator.replay`` (None when absent). ValueError, TypeError or
        KeyError when malformed."""
        if section is None:
            return None
        if not isinstance(section, dict):
            raise TypeError("discriminator.replay must be an object")
        return cls(float(section["share"]), int(section["rounds"]), int(section["pairs_per_round"]))


def empty_buffer() -> np.ndarray:
    """float32 (0, N_PAIR_FEATURES): a buffer before the first round."""
    return np.empty((0, N_PAIR_FEATURES), dtype=np.float32)


def replayed_count(n_generated: int, share: float, buffered: int) -> int:
    """Generated pairs of a minibatch taken from the buffer: round(share · n_generated), none while it is empty.
    At least one pair of the current request is always kept (a round trains against its own policy)."""
    if buffered == 0 or n_generated < 2:
        return 0
    return int(min(n_generated - 1, max(1, round(share * n_generated))))


def remember(buffer: np.ndarray, negatives: np.ndarray, settings: ReplaySettings,
             rng: np.random.Generator) -> np.ndarray:
    """The buffer after a round: ``settings.pairs_per_round`` rows of ``negatives`` (float32 (m, 15), the
    round's generated pairs) drawn without replacement, appended; the oldest rows dropped beyond
    ``settings.capacity``. Pure apart from ``rng``."""
    keep = min(settings.pairs_per_round, len(negatives))
    new = negatives[np.sort(rng.choice(len(negatives), keep, replace=False))]
    return np.concatenate([buffer, new.astype(np.float32)])[-settings.capacity:]


def validate_buffer(buffer: np.ndarray, settings: ReplaySettings) -> np.ndarray:
    """``buffer`` as float32 (n, 15) with n <= capacity and finite values; ValueError otherwise."""
    arr = np.asarray(buffer)
    if arr.ndim != 2 or arr.shape[1] != N_PAIR_FEATURES or arr.dtype != np.float32:
        raise ValueError(f"expected float32 (n, {N_PAIR_FEATURES}), got {arr.dtype} {arr.shape}")
    if len(arr) > settings.capacity or not np.isfinite(arr).all():
        raise ValueError(f"{len(arr)} rows (capacity {settings.capacity}) or non-finite values")
    return arr
