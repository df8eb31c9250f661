"""The desktop emulator of many devices: one SDK :class:`~pategail.sdk.device.Device` per user of a data set,
each in its own directory holding that user's training days — the stand-in for many phones.

This is the only place where the data set meets the devices: the coordinator gets an :class:`EmulatedFleet`,
which exposes device ids, public keys and byte channels, never the days.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from pategail.server.errors import PategailError
from pategail.sdk.device import Device
from pategail.sdk.messages import peek_round
from pategail.server.secagg.round import run_secure_round

log = logging.getLogger(__name__)


def choose_users(users: np.ndarray, n_devices: int | None, seed: int) -> np.ndarray:
    """``n_devices`` distinct users (all of them when None), chosen with a seeded generator."""
    if n_devices is None:
        return np.sort(users)
    if n_devices < 1:
        raise PategailError(f"--devices must be at least 1, got {n_devices}")
    if n_devices > len(users):
        raise PategailError(f"--devices {n_devices}: the data set has only {len(users)} users, and each device "
                            "holds one user's days")
    return np.sort(np.random.default_rng([seed, 0xD]).choice(users, n_devices, replace=False))


class InProcessFleet:
    """SDK devices in this process (``self.devices``: id -> Device), behind the byte-level :class:`Fleet`
    interface; the secure sums run through the in-process driver of the real protocol, every message as bytes."""

    devices: dict[int, Device]
    device_ids: tuple[int, ...]

    def public_keys(self):
        return {i: d.public_keys for i, d in self.devices.items()}

    def request(self, device_id: int, message: bytes) -> bytes:
        return self.devices[device_id].handle(message)

    def describe(self) -> dict:
        """report.json's ``fleet`` entry."""
        return {"kind": "sdk", "devices": len(self.devices), "secure_aggregation": "the real protocol"}

    def secure_sum(self, participants: Sequence[int], config, coordinator, rng: np.random.Generator,
                   num_queries: int):
        endpoints = [self.devices[i].secagg_endpoint(coordinator.directory) for i in participants]
        return run_secure_round(endpoints, None, config, rng, coordinator=coordinator, num_queries=num_queries)


class EmulatedFleet(InProcessFleet):
    """Devices in one process. Device i holds the days of ``users[i]`` (or ``population.device_days(dataset,
    i)`` when a resampled population is given); its directory is ``root/device-i``.

    Each device's minibatch generator is re-derived from (seed, device, round) at every round request, so a
    round replayed after a crash draws the same minibatches as the first time.

    Memory: a device's ONNX Runtime sessions are released after each request it answers (and after its set-up)
    and reopen from its files at the next one, with the same results (``Device.release_sessions``); so the
    process holds one device's sessions at a time, not every device's (about 1.3 MiB each, and what its
    allocator keeps around them). ``keep_sessions=True`` keeps them open instead (BENCHMARKS.md, "Memory of
    the SDK fleet", measures both).
    """

    def __init__(self, dataset, users: Sequence[int], root: Path, bundle_dir: Path, seed: int = 0, population=None,
                 keep_sessions: bool = False):
        self.root = Path(root)
        self.seed = seed
        self.keep_sessions = keep_sessions
        self.devices: dict[int, Device] = {}
        bundle_sha256 = _sha(bundle_dir)                      # verified once, not once per device
        for i, user in enumerate(users):
            device = Device(self.root / f"device-{i:05d}", i, rng=np.random.default_rng([seed, i]))
            if len(device.store.days()) == 0:                 # a restarted device keeps its store
                device.add_days(dataset.user_days(int(user)) if population is None
                                else population.device_days(dataset, i))
            if device.bundle is None or device.bundle.sha256 != bundle_sha256:
                device.install_bundle(bundle_dir)
            self._rest(device)
            self.devices[i] = device
        self.device_ids = tuple(self.devices)
        log.info("%d emulated devices in %s", len(self.devices), self.root)

    def request(self, device_id: int, message: bytes) -> bytes:
        device = self.devices[device_id]
        rnd = peek_round(message)
        device.rng = np.random.default_rng([self.seed, device_id, max(rnd, 0)])
        try:
            return device.handle(message)
        finally:
            self._rest(device)

    def _rest(self, device: Device) -> None:
        if not self.keep_sessions:
            device.release_sessions()


def _sha(bundle_dir: Path) -> str:
    from pategail.sdk.bundle import load_bundle
    return load_bundle(bundle_dir).sha256
