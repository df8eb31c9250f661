"""Who masks with whom: all pairs (Bonawitz et al. 2017) or the SecAgg+ neighbour graph (Bell et al. 2020).

SecAgg+ graph: a Harary graph H(k, n) over a random relabelling of the participants — arrange them on a
ring in a pseudo-random order and join each to the k/2 nearest on each side. The order comes from the
public, coordinator-signed round seed (AES-CTR keys sorted), so every device and the aggregator agree on the
graph without talking, and no one can choose its position in advance. Degree k = O(log n) suffices
(Bell et al.: k ~ 40 for n = 1,000 with 1/3 dropouts and 1/3 corrupt devices at 2^-40 failure).
"""
from __future__ import annotations

import math
from typing import Iterable

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
            self._order = order = np.argsort(keys, kind="stable")
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

    def count_neighbours_in(self, members: Iterable[int]) -> np.ndarray:
        """How many of each participant's neighbours are in ``members``: int64 (n,), in participant order
        (a ring's windows are summed at once, so a round of 100,000 costs milliseconds)."""
        members = frozenset(members)
        inside = np.array([d in members for d in self.participants], dtype=np.int64)
        if self.complete:
            return int(inside.sum()) - inside
        half = self.degree // 2
        on_ring = inside[self._order]
        ends = np.concatenate(([0], np.cumsum(np.concatenate((on_ring[-half:], on_ring, on_ring[:half])))))
        counts = np.empty_like(inside)
        counts[self._order] = ends[2 * half + 1:] - ends[:-2 * half - 1] - on_ring
        return counts


def is_complete(n: int, degree: int) -> bool:
    """Whether a round of ``n`` participants at ``degree`` masks all pairs (degree 0 or at least n − 1)."""
    return degree == 0 or degree >= n - 1


def secure_threshold(n: int, degree: int, colluders: int = 0) -> int:
    """The Shamir threshold t of a round of ``n`` participants at ``degree`` (0: all pairs) when up to
    ``colluders`` devices (c) side with the aggregator. Devices refuse any lower threshold
    (:class:`~pategail.sdk.secagg.policy.DevicePolicy`). The argument, which the checks of
    :class:`~pategail.sdk.secagg.client.SecAggClient` make hold:

    (a) An honest device reveals shares only under a survivor set U3 that :func:`certificate_size`
        participants signed, so all honest devices that reveal anything agree on one U3, and reveal for
        each device its b-secret (it is in U3) or its s-secret (it is not), never both.
    (b) An honest device sends its masked input only after receiving shares from at least t − 1
        neighbours (D_u, the neighbours it masks with), and acknowledges U3 only if every neighbour in U3
        is in D_u. So two honest members of U3 that acknowledged and are neighbours masked with each other.
    (c) The aggregator can open an honest member u of U3 only with its b-secret: t of its holders (its k
        neighbours and itself) revealing, i.e. acknowledged members of U3 or colluders.

    - All pairs (k = n − 1): a device that acknowledged masked with every member of U3, so the
      acknowledged survivors form one clique, tied by unknown masks to every honest member of U3: only the
      sum over all honest members of U3 opens. A survivor u that did not acknowledge (alone, or with others
      like it) can be opened apart from them only through its holders outside D_u: at most
      (n − 1) − (t − 1) + c of them, fewer than t when 2t > n + c. Hence t = ⌊(n + c)/2⌋ + 1.
    - SecAgg+ ring (H(k, n) over a public random order): acknowledged survivors split into parts only at
      a run of at least k/2 consecutive ring positions holding no acknowledged survivor. The member u of a
      part next to such a run has all its k/2 neighbours on that side in the run; its b-secret can be
      revealed by u, its k/2 neighbours on the other side and the colluders: at most k/2 + 1 + c holders.
      A survivor that did not acknowledge is tied to every acknowledged neighbour it has (that neighbour
      masked with it); left out of the sum, it sits in a run of at least k + 1 positions without an
      acknowledged survivor, whose edge device is bounded as above; opened on its own (or with others like
      it), it has at most k − (t − 1) + c holders outside D_u. All stay below t when

          t ≥ k/2 + 2 + c        (which implies 2t > k + 1 + c),

      so the only sum the aggregator can open is the one over all honest survivors of the certified U3,
      at least n_min − c inputs. The threshold must fit the k + 1 holders: k ≥ 2c + 2. A strict majority,
      k/2 + 1, is one short (for c = 0): a window of k/2 + 1 consecutive devices is a clique whose end
      devices have exactly k/2 + 1 holders inside it, so its sum could be opened on its own.

    An exhaustive search of the aggregator's choices (integer programming over deliveries, survivor sets,
    acknowledgements and reveals, every device check included) found no other openable group for n = 3..14,
    every even degree and c ≤ 2, and found the attacks above once t is one lower; the "+ c" may be more than
    is needed, which costs only liveness.

    Liveness is what this costs: a device's secrets are recovered only if t of its holders are still there
    at the end of the round (:func:`round_failure_bound`)."""
    if is_complete(n, degree):
        return (n + colluders) // 2 + 1
    return degree // 2 + 2 + colluders


def certificate_size(n: int, colluders: int = 0) -> int:
    """How many participants must have signed one survivor set before an honest device reveals any share:
    ⌊(n + c)/2⌋ + 1. An honest device signs one survivor set a round, and c colluders may sign any number,
    so two different sets would need 2·T ≤ n + c signatures between them: with 2·T > n + c at most one
    survivor set per round is certified, whatever views the aggregator shows (the two-view split attack)."""
    return (n + colluders) // 2 + 1


def _binomial_cdf(x: int, k: int, p: float) -> float:
    """P[Bin(k, p) <= x], summed in log space (k up to thousands without underflow)."""
    if x < 0:
        return 0.0
    if x >= k:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1) + i * lp + (k - i) * lq
             for i in range(x + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in terms))


def round_failure_bound(n: int, degree: int, dropout: float, colluders: int = 0) -> float:
    """Union bound on the chance that a round of ``n`` devices at ``degree`` cannot be unmasked when each
    device drops out independently with probability ``dropout`` before the end: some device has fewer than
    t − 1 of its k neighbours left (its own share and t − 1 others are needed)."""
    k = n - 1 if is_complete(n, degree) else degree
    t = secure_threshold(n, degree, colluders)
    return min(1.0, n * _binomial_cdf(t - 2, k, 1.0 - dropout))


def secagg_plus_degree(n: int, dropout: float, colluders: int = 0, failure: float = 1e-3) -> int:
    """The smallest even SecAgg+ degree k whose rounds fail from dropouts with probability at most
    ``failure`` (:func:`round_failure_bound`) when each device drops with probability ``dropout``, with
    ``colluders`` devices on the aggregator's side (k ≥ 2c + 2 so that the threshold fits); 0 (all pairs)
    when no degree below n − 1 does. Bell et al. (2020) size k from the dropout and corruption rates the
    same way: k grows like log n / (½ − δ)² for a dropout rate δ < ½."""
    if not 0.0 <= dropout < 0.5:
        raise ValueError(f"dropout must be in [0, 0.5), got {dropout}")
    k = max(4, 2 * colluders + 2)
    k += k % 2
    while k < n - 1:
        if round_failure_bound(n, k, dropout, colluders) <= failure:
            return k
        k += 2
    return 0
