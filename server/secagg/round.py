"""Run one secure noisy aggregation round in-process, every message passing through bytes.

This is the driver the emulator and the tests use: coordinator, aggregator and devices are separate
objects that talk only through serialised messages, as over a network, and a dropout schedule says who
stops answering after which step. Per-device CPU time, bytes up/down and aggregator time are measured.

The aggregator is the coordinator or, with ``aggregator="device"``, a device drawn at random (with the
injected ``rng``: the choice is public, not secret). That device sits the round out as a contributor — it
must not hold the round's checksum key — so its scores are not in the sum.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from pategail.sdk.secagg.client import SecAggClient
from pategail.sdk.secagg.config import COORDINATOR
from pategail.sdk.secagg.errors import SecAggAbort, SecAggError

from .aggregator import Aggregator
from .coordinator import SecAggCoordinator

log = logging.getLogger(__name__)
STAGES = ("after_advertise", "after_share_keys", "after_masked_input", "after_consistency")


@dataclass(frozen=True)
class SecureRoundConfig:
    """The coordinator's choices for one round (noise scales in value units, on the sums)."""

    round_id: int
    """Strictly increasing round number."""
    n_min: int
    """Fewest contributors for which the round releases anything; noise shares are sized for it."""
    sum_noise_scale: float = 0.0
    """Discrete-Laplace scale of the total noise on each Σ D (see privacy.calibration.sum_noise_scales)."""
    sq_sum_noise_scale: float = 0.0
    """The same for each Σ D²."""
    degree: int = 0
    """SecAgg+ neighbours per device (even); 0 = all pairs."""
    threshold: int | None = None
    """Shamir threshold; None = a strict majority of a neighbourhood."""
    aggregator: str = "coordinator"
    """"coordinator" or "device" (a device drawn at random each round)."""
    colluders: int = 0
    """t: devices that may collude with the coordinator; noise shares are sized for n_min - t."""

    def __post_init__(self):
        if self.aggregator not in ("coordinator", "device"):
            raise ValueError("aggregator must be 'coordinator' or 'device'")


@dataclass(frozen=True)
class Dropouts:
    """Devices that stop answering after a step (their last message was delivered)."""

    after_advertise: frozenset[int] = frozenset()
    after_share_keys: frozenset[int] = frozenset()
    after_masked_input: frozenset[int] = frozenset()
    after_consistency: frozenset[int] = frozenset()

    @classmethod
    def random(cls, device_ids: Sequence[int], fraction: float, rng: np.random.Generator) -> "Dropouts":
        """round(fraction * n) devices drawn with ``rng``, spread evenly over the four steps."""
        chosen = rng.permutation(np.asarray(device_ids))[:round(fraction * len(device_ids))].tolist()
        return cls(*(frozenset(chosen[i::4]) for i in range(4)))


@dataclass(frozen=True)
class RoundStats:
    """Costs of one round, per device id."""

    bytes_up: dict[int, int]
    bytes_down: dict[int, int]
    device_cpu_s: dict[int, float]
    aggregator_cpu_s: float
    coordinator_cpu_s: float
    rejected: tuple[str, ...] = field(default=())


@dataclass(frozen=True, eq=False)
class AggregateResult:
    """The released noisy sums. ``sum`` and ``sq_sum``: (M,) float64, Σ D + noise and Σ D² + noise."""

    sum: np.ndarray
    sq_sum: np.ndarray
    n_survivors: int
    survivors: tuple[int, ...]
    aggregator: int
    stats: RoundStats


def run_secure_round(clients: Sequence[SecAggClient], values: np.ndarray | None, config: SecureRoundConfig,
                     rng: np.random.Generator, *, coordinator: SecAggCoordinator,
                     dropouts: Dropouts | None = None, adversary=None,
                     num_queries: int | None = None) -> AggregateResult:
    """One full round over ``clients`` (values[i] are the scores of clients[i], shape (n, M)).

    ``values=None``: the clients hold their own vectors (device endpoints, ``Device.secagg_endpoint``), whose
    ``masked_input(share_delivery)`` takes no scores; then ``num_queries`` (M) is required.

    ``adversary(phase, aggregator, replies)``, if given, sees the network: it is called after each step's
    replies reached the aggregator (phase "advertise", "share", "input", "ack", "unmask"; ``replies`` maps
    device id -> bytes it sent) and may inject messages into the aggregator; with phase "aggregate" it gets
    {COORDINATOR: result bytes} and may return altered bytes to deliver to the coordinator instead.

    Raises SecAggAbort when fewer than ``config.n_min`` devices survive (nothing is released) and
    TamperDetected when the coordinator's checksum fails.
    """
    if values is None:
        if num_queries is None or num_queries < 1:
            raise ValueError("values=None needs num_queries (M, the length of the devices' vectors)")
        by_id = {c.device_id: (c, None) for c in clients}
    else:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[0] != len(clients):
            raise ValueError(f"values must have shape (len(clients), M), got {values.shape}")
        if num_queries is not None and num_queries != values.shape[1]:
            raise ValueError(f"num_queries={num_queries} but values has {values.shape[1]} columns")
        num_queries = values.shape[1]
        by_id = {c.device_id: (c, values[i]) for i, c in enumerate(clients)}
    agg_id = COORDINATOR if config.aggregator == "coordinator" else int(rng.choice(sorted(by_id)))
    participants = sorted(set(by_id) - {agg_id})
    dropouts = dropouts or Dropouts()
    up = dict.fromkeys(participants, 0)
    down = dict.fromkeys(participants, 0)
    cpu = dict.fromkeys(participants, 0.0)
    agg_cpu = [0.0]

    def on_aggregator(fn, *args):
        t = time.thread_time()
        try:
            return fn(*args)
        finally:
            agg_cpu[0] += time.thread_time() - t

    t0 = time.thread_time()
    start = coordinator.new_round(config.round_id, participants, num_queries, config.n_min,
                                  config.sum_noise_scale, config.sq_sum_noise_scale, config.degree,
                                  config.threshold, agg_id, config.colluders)
    coord_cpu = time.thread_time() - t0
    agg = on_aggregator(Aggregator, start.config, coordinator.directory)
    alive = list(participants)
    rejected: list[str] = []

    def step(make_inbox, call, receive, stage, phase):
        """Deliver each live device its inbox, run its step, hand the reply to the aggregator."""
        nonlocal alive
        still, replies = [], {}
        for d in alive:
            inbox = on_aggregator(make_inbox, d)
            down[d] += sum(len(b) for b in inbox)
            t = time.thread_time()
            try:
                reply = call(by_id[d], *inbox)
            except SecAggError as err:  # the device gives up: from the aggregator's view, a dropout
                log.info("device %d stopped: %s", d, err)
                continue
            finally:
                cpu[d] += time.thread_time() - t
            up[d] += len(reply)
            replies[d] = reply
            try:
                on_aggregator(receive, reply)
            except SecAggError as err:
                rejected.append(f"device {d}: {err}")
                continue
            if stage is None or d not in getattr(dropouts, stage):
                still.append(d)
        alive = still
        if adversary is not None:
            adversary(phase, agg, replies)

    step(lambda d: (start.config, start.envelopes[d]), lambda cv, c, e: cv[0].start_round(c, e),
         agg.receive_advertise, STAGES[0],
         "advertise")
    on_aggregator(agg.close_advertise)
    step(lambda d: (agg.key_broadcast(d),), lambda cv, b: cv[0].share_keys(b), agg.receive_shares, STAGES[1], "share")
    on_aggregator(agg.close_shares)
    step(lambda d: (agg.share_delivery(d),),
         lambda cv, s: cv[0].masked_input(s) if cv[1] is None else cv[0].masked_input(s, cv[1]),
         agg.receive_masked_input, STAGES[2], "input")
    on_aggregator(agg.close_masked_input)
    survivors_msg = on_aggregator(agg.survivor_set)
    step(lambda d: (survivors_msg,), lambda cv, s: cv[0].consistency_check(s), agg.receive_ack, STAGES[3], "ack")
    on_aggregator(agg.close_acks)
    step(lambda d: (agg.ack_set(d),), lambda cv, a: cv[0].unmask(a), agg.receive_unmask, None, "unmask")
    result = on_aggregator(agg.finish)
    if adversary is not None:
        result = adversary("aggregate", agg, {COORDINATOR: result}) or result
    t0 = time.thread_time()
    verified = coordinator.verify(result)
    coord_cpu += time.thread_time() - t0
    if verified.n_survivors < config.n_min:  # verify() already enforces it; kept as the last word
        raise SecAggAbort("below n_min")
    stats = RoundStats(up, down, cpu, agg_cpu[0], coord_cpu, tuple(rejected))
    return AggregateResult(verified.sum, verified.sq_sum, verified.n_survivors, verified.survivors, agg_id, stats)


def enroll_clients(coordinator: SecAggCoordinator, device_ids: Sequence[int], **client_kwargs) -> list[SecAggClient]:
    """Fresh identities for ``device_ids``, enrolled with ``coordinator``; one SecAggClient each (emulator)."""
    from pategail.sdk.secagg.config import DevicePublicKeys
    from pategail.sdk.secagg.crypto import DeviceIdentity

    identities = {d: DeviceIdentity.generate() for d in device_ids}
    for d, ident in identities.items():
        coordinator.enroll(d, DevicePublicKeys(ident.signing_public, ident.envelope_public))
    directory = coordinator.directory
    return [SecAggClient(d, identities[d], directory, **client_kwargs) for d in device_ids]
