"""The device's side of a secure-aggregation round: the pending vector the masked upload carries (which the
caller never supplies or sees), the names of the round's steps, and an adapter with the client's method names
over :meth:`pategail.sdk.device.Device.secagg_step`."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pategail.sdk.contribution import ENV_L1_BOUND
from pategail.sdk.secagg.errors import ProtocolError

if TYPE_CHECKING:
    from pategail.sdk.device import Device
    from pategail.sdk.secagg.config import KeyDirectory


class PendingVector:
    """The vector the next secure aggregation will upload (masked): the clipped scores of the last
    RoundRequest, the environment contribution of the last InitialStatesRequest, the clipped model delta of the
    last FedAvgRequest or the visited vector of the last CellReleaseRequest. Uploaded at most once."""

    def __init__(self) -> None:
        self._vector: np.ndarray | None = None
        self.environment = False
        """The pending vector is the device's environment vector (a Laplace round releases it as one L1-clipped
        vector query: ``pategail.sdk.secagg.client``)."""
        self.env_l1_bound = ENV_L1_BOUND
        """The L1 bound of that environment vector's layout (pategail.sdk.contribution.env_l1_bound)."""
        self.cells = False
        """The pending vector is the device's visited vector of a cell-table release
        (:class:`~pategail.sdk.messages.CellReleaseRequest`)."""

    def set(self, vector: np.ndarray | None, environment: bool = False, env_l1_bound: float = ENV_L1_BOUND,
            cells: bool = False) -> None:
        self._vector, self.environment = vector, bool(environment and vector is not None)
        self.cells = bool(cells and vector is not None)
        self.env_l1_bound = float(env_l1_bound)

    def peek(self) -> np.ndarray | None:
        """A copy of the vector, or None."""
        return None if self._vector is None else self._vector.copy()

    def __len__(self) -> int:
        return 0 if self._vector is None else len(self._vector)

    def take(self) -> np.ndarray:
        """The vector, for the upload; ProtocolError (a dropout) when there is none."""
        if self._vector is None:
            raise ProtocolError("no pending vector: the device answered no RoundRequest or "
                                "InitialStatesRequest since its last upload")
        return self._vector


SECAGG_STEPS = ("advertise", "share", "input", "ack", "unmask")
"""The five steps of a secure-aggregation round, as :meth:`Device.secagg_step` names them."""
SECAGG_FRAMES = dict(zip(SECAGG_STEPS, (2, 1, 1, 1, 1)))
"""Frames each step's order carries: the signed configuration and the checksum envelope, then one frame."""


class SecAggEndpoint:
    """:class:`~pategail.sdk.secagg.SecAggClient`'s five step methods for one device, where ``masked_input``
    takes no scores: an adapter over the device's public :meth:`~pategail.sdk.device.Device.secagg_step`,
    which uploads the device's own pending vector."""

    def __init__(self, device: Device, directory: KeyDirectory) -> None:
        self.device_id = device.device_id
        self._device = device
        self._directory = directory

    def _step(self, step: str, *frames: bytes) -> bytes:
        return self._device.secagg_step(self._directory, step, *frames)

    def start_round(self, config: bytes, envelope: bytes) -> bytes:
        return self._step("advertise", config, envelope)

    def share_keys(self, key_broadcast: bytes) -> bytes:
        return self._step("share", key_broadcast)

    def masked_input(self, share_delivery: bytes) -> bytes:
        return self._step("input", share_delivery)

    def consistency_check(self, survivor_set: bytes) -> bytes:
        return self._step("ack", survivor_set)

    def unmask(self, ack_set: bytes) -> bytes:
        return self._step("unmask", ack_set)
