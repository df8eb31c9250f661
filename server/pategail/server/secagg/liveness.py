"""Whether a secure-aggregation round completes under a dropout schedule, from the protocol's rules alone.

The real round (:func:`pategail.server.secagg.round.run_secure_round`) costs about 30 s at n = 1,000 on one
core; which devices answer each step and whether every secret can be recovered depends only on the neighbour
graph, the dropout schedule and the checks each party applies. :func:`round_completes` applies exactly those
checks (the test suite compares it with real rounds), so the completion rate of a setting can be measured over
thousands of rounds (``benchmarks/secagg_liveness.py``).

The rules, step by step (U1 ⊇ U2 ⊇ U3 ⊇ U4 ⊇ U5 as in Bonawitz et al. 2017):

- every participant advertises keys (U1); those not dropping after it send their shares (U2);
- a device still there receives the shares of its neighbours in U2 and sends its masked input only with at
  least t − 1 of them (U3); fewer than n_min inputs and the round aborts;
- devices of U3 still there acknowledge U3 (U4);
- devices of U4 still there unmask if U4 holds ``certificate_size`` devices and t − 1 of their neighbours (U5);
- the aggregator needs, for each device of U3, t of its holders (itself and its neighbours) in U5, and for
  each device of U2 not in U3, t of its neighbours in U5; the coordinator needs the certificate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pategail.sdk.secagg.graph import NeighbourGraph, certificate_size

if TYPE_CHECKING:
    from .round import Dropouts


@dataclass(frozen=True)
class Outcome:
    """How one simulated round ended: ``complete``, or the step at which it stopped (``reason``)."""

    complete: bool
    reason: str
    survivors: int


def round_completes(graph: NeighbourGraph, threshold: int, n_min: int, dropouts: Dropouts,
                    colluders: int = 0) -> Outcome:
    """The outcome of a round over ``graph.participants`` with Shamir ``threshold`` and ``n_min`` when the
    devices of ``dropouts`` (a :class:`~pategail.server.secagg.round.Dropouts`) stop after their step."""
    everyone = set(graph.participants)
    cert = certificate_size(len(everyone), colluders)
    nb = {d: graph.neighbours(d) for d in everyone}
    u2 = everyone - dropouts.after_advertise
    if len(u2) < n_min:
        return Outcome(False, "shares", len(u2))
    alive = u2 - dropouts.after_share_keys
    u3 = {d for d in alive if len(nb[d] & u2) + 1 >= threshold}
    if len(u3) < n_min:
        return Outcome(False, "inputs", len(u3))
    u4 = u3 - dropouts.after_masked_input
    u5 = {d for d in u4 - dropouts.after_consistency if len(u4) >= cert and len(nb[d] & u4) + 1 >= threshold}
    if len(u4) < cert:
        return Outcome(False, "certificate", len(u3))
    for d in u3:
        if len((nb[d] | {d}) & u5) < threshold:
            return Outcome(False, "self-mask", len(u3))
    for d in u2 - u3:
        if len(nb[d] & u5) < threshold:
            return Outcome(False, "mask key", len(u3))
    return Outcome(True, "", len(u3))
