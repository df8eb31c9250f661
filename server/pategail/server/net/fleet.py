"""The devices of a served run as the coordinator sees them: the same byte-level
:class:`~pategail.server.fleet.Fleet` as the emulator's, carried by the service's mailboxes.

A request goes to every device at once and waits ``deadline_s`` at most; a secure sum runs the same driver
as in-process (:func:`pategail.server.secagg.round.drive_secure_round`), each of its five steps one exchange
of signed orders and replies — the existing secure-aggregation frames, relayed unchanged. The coordinator
aggregates (``aggregator="coordinator"``): devices reach only the service, never each other.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from pategail.server.errors import PategailError
from pategail.sdk.net.frames import WORK_BUNDLE, WORK_REQUEST
from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.server.secagg.round import drive_secure_round

from .hub import Hub

log = logging.getLogger(__name__)


class DeviceUnavailable(Exception):
    """A device did not answer a request within the deadline."""


class NetworkFleet:
    """The frozen roster's devices, reached through ``hub``; every exchange waits ``deadline_s`` at most."""

    def __init__(self, devices: dict[int, DevicePublicKeys], hub: Hub, deadline_s: float,
                 on_release: Callable[[int], None] | None = None,
                 publish_bundle: Callable[[Path], str] | None = None):
        self._keys = dict(devices)
        self.device_ids = tuple(sorted(devices))
        self.hub = hub
        self.deadline_s = float(deadline_s)
        self.on_release = on_release
        """Called with the number of participants after each secure sum (the service's status)."""
        self.publish_bundle = publish_bundle
        """The service's :meth:`~pategail.server.net.service.Service.publish_bundle` (a released cell table)."""

    def public_keys(self) -> dict[int, DevicePublicKeys]:
        return dict(self._keys)

    def describe(self) -> dict:
        """report.json's ``fleet`` entry."""
        return {"kind": "network", "devices": len(self.device_ids), "secure_aggregation": "the real protocol",
                "deadline_s": self.deadline_s}

    def request(self, device_id: int, message: bytes) -> bytes:
        reply = self.request_all([device_id], message)[device_id]
        if reply is None:
            raise DeviceUnavailable(f"device {device_id} did not answer within {self.deadline_s:g} s")
        return reply

    def request_all(self, device_ids: Sequence[int], message: bytes) -> dict[int, bytes | None]:
        """The same request to every device at once: reply per device, None where none came in time."""
        replies = self.hub.exchange(WORK_REQUEST, {d: (message,) for d in device_ids}, self.deadline_s)
        return {d: replies.get(d) for d in device_ids}

    def move_to_table(self, released: np.ndarray, bundle_dir: Path) -> None:
        """The run's privately released cell table is published as ``bundle_dir``: the service serves it from
        now on (``publish_bundle``, the service's) and every device is ordered to install it (its days stay on
        the public map and are read through the table: :meth:`pategail.sdk.device.Device.days`). A device
        that does not confirm within the deadline keeps the public map's bundle, which answers no request of the
        rest of the run: it drops out of every round, as a device that stopped would."""
        if self.publish_bundle is None:
            raise PategailError("this fleet cannot publish a bundle (no service was given to it)")
        sha256 = self.publish_bundle(Path(bundle_dir))
        replies = self.hub.exchange(WORK_BUNDLE, {d: (sha256.encode("ascii"),) for d in self.device_ids},
                                    self.deadline_s)
        took = sorted(replies)          # a device's Pong: it installed that very bundle (else an empty reply)
        log.info("the bundle on the released table of %d squares (%s): %d of %d devices installed it", len(released),
                 sha256[:12], len(took), len(self.device_ids))
        if not took:
            raise PategailError("no device installed the bundle on the released cell table within "
                                f"{self.deadline_s:g} s")

    def secure_sum(self, participants: Sequence[int], config, coordinator, rng: np.random.Generator,
                   num_queries: int):
        if config.aggregator != "coordinator":
            raise PategailError("a served run aggregates at the coordinator: set aggregator to \"coordinator\"")
        result = drive_secure_round(_Exchange(self.hub, self.deadline_s), list(participants), config, rng,
                                    coordinator=coordinator, num_queries=num_queries)
        if self.on_release is not None:
            self.on_release(result.n_survivors)
        return result


class _Exchange:
    """One secure-aggregation step as one exchange of orders; device CPU is not observable from here."""

    def __init__(self, hub: Hub, deadline_s: float):
        self.hub, self.deadline_s = hub, deadline_s
        self.device_cpu_s: dict[int, float] = {}

    def __call__(self, step: str, inboxes: dict[int, tuple[bytes, ...]]) -> dict[int, bytes]:
        return self.hub.exchange(step, inboxes, self.deadline_s)
