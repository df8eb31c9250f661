"""The device's side of a secure-aggregation round: its :class:`~pategail.sdk.secagg.SecAggClient` driven
with the device's pending vector, which the caller never supplies or sees."""
from __future__ import annotations

import numpy as np

from pategail.sdk.secagg.client import SecAggClient
from pategail.sdk.secagg.errors import ProtocolError


class PendingVector:
    """The vector the next secure aggregation will upload (masked): the clipped scores of the last
    RoundRequest or the environment contribution of the last InitialStatesRequest. Uploaded at most once."""

    def __init__(self):
        self._vector: np.ndarray | None = None

    def set(self, vector: np.ndarray | None) -> None:
        self._vector = vector

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


class SecAggEndpoint:
    """:class:`~pategail.sdk.secagg.SecAggClient`'s five steps for one device, where ``masked_input`` takes no
    scores: it uploads the device's pending vector (and clears it once the upload is made). A device without
    a pending vector, or one whose length is not the round's, raises ProtocolError (a dropout)."""

    def __init__(self, device_id: int, client: SecAggClient, pending: PendingVector):
        self.device_id = device_id
        self._client = client
        self._pending = pending

    def start_round(self, config: bytes, envelope: bytes) -> bytes:
        return self._client.start_round(config, envelope)

    def share_keys(self, key_broadcast: bytes) -> bytes:
        return self._client.share_keys(key_broadcast)

    def masked_input(self, share_delivery: bytes) -> bytes:
        scores = self._pending.take()
        try:
            reply = self._client.masked_input(share_delivery, scores)
        except ValueError as err:                    # wrong length: the client's state is unchanged
            raise ProtocolError(str(err)) from None
        self._pending.set(None)                      # uploaded once: a second noisy copy would weaken the DP
        return reply

    def consistency_check(self, survivor_set: bytes) -> bytes:
        return self._client.consistency_check(survivor_set)

    def unmask(self, ack_set: bytes) -> bytes:
        return self._client.unmask(ack_set)
