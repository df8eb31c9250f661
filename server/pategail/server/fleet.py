"""The devices as the coordinator sees them: ids, enrolled public keys, a request/reply byte channel and one
secure sum per release — never a data set, never a device object. The emulator
(:class:`pategail.emulator.EmulatedFleet`) is one implementation, the devices behind the HTTP service
(:class:`pategail.server.net.fleet.NetworkFleet`) another, a population simulation a third; the coordinator's
code is the same for all of them. A fleet may also offer ``request_all(device_ids, message)`` to reach many
devices at once (:func:`request_all` uses it when present); the protocol does not require it."""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.server.secagg.config import SecureRoundConfig
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.round import AggregateResult


class Fleet(Protocol):
    """The devices as the coordinator sees them."""

    device_ids: tuple[int, ...]

    def public_keys(self) -> dict[int, DevicePublicKeys]:
        """Each device's long-term signing and envelope public keys (enrolment)."""

    def request(self, device_id: int, message: bytes) -> bytes:
        """Deliver one device-protocol message, return the device's reply."""

    def secure_sum(self, participants: Sequence[int], config: SecureRoundConfig, coordinator: SecAggCoordinator,
                   rng: np.random.Generator, num_queries: int) -> AggregateResult:
        """One secure noisy sum of the ``num_queries``-long vectors the ``participants`` hold pending (set by
        the round or initial-states request they acknowledged). ``coordinator`` signs the round's
        configuration and verifies the result; ``rng`` draws public choices (the aggregating device).
        Raises SecAggAbort (nothing released) below ``config.n_min`` and TamperDetected on a failed check."""

    def describe(self) -> dict:
        """What report.json says of the fleet: its ``kind`` (sdk, population, network) and what it simulates."""


def request_all(fleet: Fleet, device_ids: Sequence[int], message: bytes) -> dict[int, bytes | None]:
    """The same request to every device: all at once where the fleet can (``fleet.request_all``, a network
    fleet, whose answer is None for a device that did not reply in time), one after the other otherwise."""
    many = getattr(fleet, "request_all", None)
    if many is not None:
        return many(device_ids, message)
    return {d: fleet.request(d, message) for d in device_ids}
