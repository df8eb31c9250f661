"""The devices as the coordinator sees them: ids, enrolled public keys, a request/reply byte channel and
secure-aggregation endpoints — never a data set. The emulator (:class:`pategail.emulator.EmulatedFleet`)
is one implementation; a network transport or a population of fleets is another."""
from __future__ import annotations

from typing import Protocol, Sequence

from pategail.sdk.secagg.config import DevicePublicKeys


class Fleet(Protocol):
    """The devices as the coordinator sees them."""

    device_ids: tuple[int, ...]

    def public_keys(self) -> dict[int, DevicePublicKeys]:
        """Each device's long-term signing and envelope public keys (enrolment)."""

    def request(self, device_id: int, message: bytes) -> bytes:
        """Deliver one device-protocol message, return the device's reply."""

    def secagg_endpoints(self, device_ids: Sequence[int], directory) -> list:
        """The devices' secure-aggregation endpoints (each brings its own pending vector); ``directory`` is
        the public-key directory the coordinator distributes to them."""
