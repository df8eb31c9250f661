"""Drive one secure noisy aggregation round, every message passing through bytes.

:func:`drive_secure_round` is the aggregator's and the coordinator's side of the five steps; how the frames
reach the devices is an :class:`Exchange`: in this process (:func:`run_secure_round`, what the emulator's
fleet and the tests use: coordinator, aggregator and devices are separate objects that talk only through
serialised messages) or over the network (the service's fleet). A dropout schedule says who stops answering
after which step. Per-device CPU time, bytes up/down and aggregator time are measured.

The aggregator is the coordinator or, with ``aggregator="device"``, a device drawn at random (with the
injected ``rng``: the choice is public, not secret). That device sits the round out as a contributor — it
must not hold the round's checksum key — so its scores are not in the sum.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from pategail.sdk.secagg.client import SecAggClient
from pategail.sdk.secagg.config import COORDINATOR
from pategail.sdk.secagg.errors import AbortAfterUnmask, SecAggAbort, SecAggError
from pategail.sdk.secagg_endpoint import SECAGG_STEPS, SecAggEndpoint

from .aggregator import Aggregator
from .config import SecureRoundConfig
from .coordinator import SecAggCoordinator

log = logging.getLogger(__name__)
_T = TypeVar("_T")
Adversary = Callable[[str, Aggregator, dict[int, bytes]], "bytes | None"]
"""``adversary(phase, aggregator, replies)`` of :func:`drive_secure_round`."""
STAGES = ("after_advertise", "after_share_keys", "after_masked_input", "after_consistency")


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


class Exchange(Protocol):
    """How one step's frames reach the devices and their replies come back: in this process (the clients'
    methods, :class:`InProcessExchange`) or over a network (:class:`pategail.server.net.fleet.NetworkFleet`)."""

    def __call__(self, step: str, inboxes: dict[int, tuple[bytes, ...]]) -> dict[int, bytes]:
        """Deliver ``inboxes[d]`` to device d for ``step`` (one of :data:`SECAGG_STEPS`); return the replies of
        the devices that answered (a device that stopped or did not answer in time is absent)."""

    device_cpu_s: dict[int, float]
    """CPU seconds each device spent so far in this round (empty where it cannot be measured)."""


class InProcessExchange:
    """The devices are objects in this process: ``by_id[d] = (client, values or None)``; a client with values
    None is a device endpoint that uploads its own pending vector."""

    _METHODS = dict(zip(SECAGG_STEPS, ("start_round", "share_keys", "masked_input", "consistency_check", "unmask")))

    def __init__(self, by_id: Mapping[int, tuple[Any, np.ndarray | None]]):
        self.by_id = by_id
        self.device_cpu_s: dict[int, float] = {}

    def __call__(self, step: str, inboxes: dict[int, tuple[bytes, ...]]) -> dict[int, bytes]:
        replies = {}
        for d, inbox in inboxes.items():
            client, values = self.by_id[d]
            args = inbox + ((values,) if step == "input" and values is not None else ())
            t = time.thread_time()
            try:
                replies[d] = getattr(client, self._METHODS[step])(*args)
            except SecAggError as err:  # the device gives up: from the aggregator's view, a dropout
                log.info("device %d stopped: %s", d, err)
            finally:
                self.device_cpu_s[d] = self.device_cpu_s.get(d, 0.0) + time.thread_time() - t
        return replies


def run_secure_round(clients: Sequence[SecAggClient | SecAggEndpoint], values: np.ndarray | None,
                     config: SecureRoundConfig, rng: np.random.Generator, *, coordinator: SecAggCoordinator,
                     dropouts: Dropouts | None = None, adversary: Adversary | None = None,
                     num_queries: int | None = None) -> AggregateResult:
    """One full round over ``clients`` in this process (values[i] are the scores of clients[i], shape (n, M)).

    ``values=None``: the clients hold their own vectors (device endpoints, ``Device.secagg_endpoint``), whose
    ``masked_input(share_delivery)`` takes no scores; then ``num_queries`` (M) is required. See
    :func:`drive_secure_round` for ``dropouts``, ``adversary`` and what is raised.
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
    return drive_secure_round(InProcessExchange(by_id), sorted(by_id), config, rng, coordinator=coordinator,
                              num_queries=num_queries, dropouts=dropouts, adversary=adversary)


def drive_secure_round(exchange: Exchange, devices: Sequence[int], config: SecureRoundConfig,
                       rng: np.random.Generator, *, coordinator: SecAggCoordinator, num_queries: int,
                       dropouts: Dropouts | None = None, adversary: Adversary | None = None) -> AggregateResult:
    """One full round over ``devices``, the aggregator's and the coordinator's side here, the devices' behind
    ``exchange``; every frame is bytes. A ``dropouts`` schedule makes devices stop answering after a step.

    ``adversary(phase, aggregator, replies)``, if given, sees the network: it is called after each step's
    replies reached the aggregator (phase "advertise", "share", "input", "ack", "unmask"; ``replies`` maps
    device id -> bytes it sent) and may inject messages into the aggregator; with phase "aggregate" it gets
    {COORDINATOR: result bytes} and may return altered bytes to deliver to the coordinator instead.

    Raises SecAggAbort when fewer than ``config.n_min`` devices survive (nothing is released),
    AbortAfterUnmask when a device aggregator stops after devices revealed their shares to it, and
    TamperDetected when the coordinator's checks of the aggregate fail (both count as a release).
    """
    agg_id = COORDINATOR if config.aggregator == "coordinator" else int(rng.choice(sorted(devices)))
    participants = sorted(set(devices) - {agg_id})
    dropouts = dropouts or Dropouts()
    up = dict.fromkeys(participants, 0)
    down = dict.fromkeys(participants, 0)
    agg_cpu = [0.0]

    def on_aggregator(fn: Callable[..., _T], *args: object) -> _T:
        t = time.thread_time()
        try:
            return fn(*args)
        finally:
            agg_cpu[0] += time.thread_time() - t

    t0 = time.thread_time()
    start = coordinator.new_round(config, participants, num_queries, agg_id)
    coord_cpu = time.thread_time() - t0
    agg = on_aggregator(Aggregator, start.config, coordinator.directory)
    alive = list(participants)
    rejected: list[str] = []

    def step(make_inbox: Callable[[int], tuple[bytes, ...]], receive: Callable[[bytes], object], stage: str | None,
             phase: str) -> None:
        """Deliver each live device its inbox, run its step, hand the replies to the aggregator."""
        nonlocal alive
        inboxes = {d: on_aggregator(make_inbox, d) for d in alive}
        for d, inbox in inboxes.items():
            down[d] += sum(len(b) for b in inbox)
        answered = exchange(phase, inboxes)
        still, replies = [], {}
        for d in alive:
            if d not in answered:
                continue
            reply = replies[d] = answered[d]
            up[d] += len(reply)
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

    step(lambda d: (start.config, start.envelopes[d]), agg.receive_advertise, STAGES[0], "advertise")
    on_aggregator(agg.close_advertise)
    step(lambda d: (agg.key_broadcast(d),), agg.receive_shares, STAGES[1], "share")
    on_aggregator(agg.close_shares)
    step(lambda d: (agg.share_delivery(d),), agg.receive_masked_input, STAGES[2], "input")
    on_aggregator(agg.close_masked_input)
    survivors_msg = on_aggregator(agg.survivor_set)
    step(lambda d: (survivors_msg,), agg.receive_ack, STAGES[3], "ack")
    on_aggregator(agg.close_acks)
    step(lambda d: (agg.ack_set(d),), agg.receive_unmask, None, "unmask")
    try:
        result = on_aggregator(agg.finish)
    except SecAggAbort as err:
        if agg.unmasks and agg_id != COORDINATOR:
            # shares went to an aggregator the coordinator cannot check: it may have opened the sum
            raise AbortAfterUnmask(f"{err} (after {len(agg.unmasks)} devices revealed their shares to device "
                                   f"{agg_id}: the attempt counts)") from err
        raise
    if adversary is not None:
        result = adversary("aggregate", agg, {COORDINATOR: result}) or result
    t0 = time.thread_time()
    verified = coordinator.verify(result)     # after unmasking, every failure is TamperDetected: it counts
    coord_cpu += time.thread_time() - t0
    cpu = {d: exchange.device_cpu_s.get(d, 0.0) for d in participants}
    stats = RoundStats(up, down, cpu, agg_cpu[0], coord_cpu, tuple(rejected))
    return AggregateResult(verified.sum, verified.sq_sum, verified.n_survivors, verified.survivors, agg_id, stats)


def enroll_clients(coordinator: SecAggCoordinator, device_ids: Sequence[int],
                   **client_kwargs: Any) -> list[SecAggClient]:
    """Fresh identities for ``device_ids``, enrolled with ``coordinator``; one SecAggClient each (emulator)."""
    from pategail.sdk.secagg.config import DevicePublicKeys
    from pategail.sdk.secagg.crypto import DeviceIdentity

    identities = {d: DeviceIdentity.generate() for d in device_ids}
    for d, ident in identities.items():
        coordinator.enroll(d, DevicePublicKeys(ident.signing_public, ident.envelope_public))
    directory = coordinator.directory
    return [SecAggClient(d, identities[d], directory, **client_kwargs) for d in device_ids]
