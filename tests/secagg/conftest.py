"""Fixtures for the secure-aggregation tests: enrolled devices whose noise shares are recorded."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from pategail.sdk.secagg.noise import discrete_laplace_share
from pategail.sdk.secagg import DeviceIdentity, DevicePublicKeys, SecAggClient
from pategail.server.secagg.coordinator import SecAggCoordinator


class RecordingNoise:
    """Wraps the real CSPRNG sampler and keeps each device's shares, to check the sum exactly."""

    def __init__(self):
        self.shares: dict[int, list[np.ndarray]] = defaultdict(list)
        self.calls: dict[int, list[tuple[float, int, int]]] = defaultdict(list)  # (scale_quanta, n_min, size)

    def for_device(self, device_id: int):
        def sample(scale_quanta, n_min, size):
            share = discrete_laplace_share(scale_quanta, n_min, size)
            self.calls[device_id].append((scale_quanta, n_min, size))
            self.shares[device_id].append(share)
            return share
        return sample


@pytest.fixture
def federation():
    """make(n) -> (coordinator, clients, recorder) for devices with ids 100..100+n-1 (``policy``: the devices'
    floors on a signed configuration, default DevicePolicy())."""
    def make(n: int, policy=None):
        coordinator, recorder = SecAggCoordinator(), RecordingNoise()
        identities = {d: DeviceIdentity.generate() for d in range(100, 100 + n)}
        for d, ident in identities.items():
            coordinator.enroll(d, DevicePublicKeys(ident.signing_public, ident.envelope_public))
        clients = [SecAggClient(d, ident, coordinator.directory, noise_sampler=recorder.for_device(d),
                                policy=policy)
                   for d, ident in identities.items()]
        recorder.identities = identities
        return coordinator, clients, recorder
    return make


@pytest.fixture
def rng():
    return np.random.default_rng(20230207)
