"""Who masks with whom: all pairs (Bonawitz et al. 2017) or the SecAgg+ neighbour graph (Bell et al. 2020).

SecAgg+ graph: a Harary graph H(k, n) over a random relabelling of the participants — arrange them on a
ring in a pseudo-random order and join each to the k/2 nearest on each side. The order comes from the
public, coordinator-signed round seed (AES-CTR keys sorted), so every device and the aggregator agree on the
graph without talking, and no one can choose its position in advance. Degree k = O(log n) suffices
(Bell et al.: k ~ 40 for n = 1,000 with 1/3 dropouts and 1/3 corrupt devices at 2^-40 failure).
"""
from __future__ import annotations

import numpy as np

from .crypto import hkdf
from .prg import expand_uint64


class NeighbourGraph:
    """Neighbourhoods of one round. ``degree == 0`` (or >= n - 1) means all pairs."""

    def __init__(self, participants: tuple[int, ...], round_seed: bytes, degree: int):
        self.participants = participants
        n = len(participants)
        self.complete = degree == 0 or degree >= n - 1
        self.degree = n - 1 if self.complete else degree
        if not self.complete:
            if degree % 2:
                raise ValueError("the SecAgg+ degree must be even")
            keys = expand_uint64(hkdf(round_seed, b"graph"), n)
            order = np.argsort(keys, kind="stable")
            self._ring = [participants[i] for i in order]
            self._position = {d: p for p, d in enumerate(self._ring)}
        self._members = frozenset(participants)

    def neighbours(self, device: int) -> frozenset[int]:
        """The devices ``device`` masks with and shares its secrets with (never itself)."""
        if device not in self._members:
            raise KeyError(device)
        if self.complete:
            return self._members - {device}
        n, p, half = len(self._ring), self._position[device], self.degree // 2
        return frozenset(self._ring[(p + o) % n] for o in range(-half, half + 1) if o)


def default_threshold(holders: int) -> int:
    """Shamir threshold t = floor(h/2) + 1 for h holders (a device's k neighbours and itself): a strict
    majority, so two disjoint groups of holders can never both reconstruct, while up to about half may
    drop out (with h = 3: any one of three)."""
    return holders // 2 + 1
