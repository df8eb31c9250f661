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
from pategail.sdk.bundle import load_bundle
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
        bundle = load_bundle(bundle_dir)                      # verified once, not once per device
        assert bundle.environment is not None
        for i, user in enumerate(users):
            device = Device(self.root / f"device-{i:05d}", i, rng=np.random.default_rng([seed, i]))
            if len(device.store.days()) == 0:                 # a restarted device keeps its store
                device.add_days(dataset.user_days(int(user)) if population is None
                                else population.device_days(dataset, i))
            if device.bundle is None or (device.bundle.sha256 != bundle.sha256
                                         and not _released_from(device, bundle.environment.cells)):
                device.install_bundle(bundle_dir)
            self._rest(device)
            self.devices[i] = device
        self.device_ids = tuple(self.devices)
        log.info("%d emulated devices in %s", len(self.devices), self.root)

    def move_to_table(self, released: np.ndarray, bundle_dir: Path) -> None:
        """The run's privately released cell table is published as ``bundle_dir`` (the bundle on it, carrying
        the public map and the cell each square moves to): every device installs it and from then on uses its
        days moved onto the table (they stay on the public map in its store). ``released`` is what the
        population fleet needs; an SDK device reads everything from the bundle."""
        for device in self.devices.values():
            device.install_bundle(bundle_dir)
            if len(device.bundle.environment.cells) != len(released):      # type: ignore[union-attr]
                raise PategailError(f"{bundle_dir}: the bundle is not on the released table of {len(released)} "
                                    "squares")
            self._rest(device)
        log.info("%d emulated devices took the bundle on the released table of %d squares", len(self.devices),
                 len(released))

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


def _released_from(device: Device, public_map: np.ndarray) -> bool:
    """The device (restarted in a resumed run) already holds the bundle on a cell table released from
    ``public_map``: it keeps it (and its discriminator), and takes the run's released table again."""
    env = device.bundle.environment if device.bundle is not None else None
    return env is not None and env.universe is not None and np.array_equal(env.universe, public_map)
