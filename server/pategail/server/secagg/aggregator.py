"""The aggregator: relays, validates, sums and unmasks — and holds nothing secret.

It needs only the coordinator-signed round configuration and the public key directory, so the coordinator
or any device chosen for the round can run it. It never sees an unmasked individual vector: it learns
b_u for survivors and s_v for dropouts (never both for one device — honest devices refuse), which cancel
the masks of the sum only. Every ``receive_*`` either accepts a message or raises MessageRejected and leaves
the state untouched; every ``close_*`` aborts the round (SecAggAbort) when fewer than n_min devices remain.
"""
from __future__ import annotations

import logging
from typing import Container, Mapping, Protocol

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import crypto, shamir
from pategail.sdk.secagg.client import survivor_digest
from pategail.sdk.secagg.config import KeyDirectory, RoundConfig
from pategail.sdk.secagg.errors import MessageRejected, SecAggAbort
from pategail.sdk.secagg.graph import NeighbourGraph
from pategail.sdk.secagg.messages import (KIND_ACK_SET, KIND_KEY_BROADCAST, AdvertiseKeys, AggregateResult,
                                          MaskedInput, RelayedFrames, RoundMessage, ShareDelivery, ShareKeys,
                                          SurvivorAck, SurvivorSet, UnmaskShares, to_bitmap)
from pategail.sdk.secagg.prg import P61, add_mask, expand_mask

log = logging.getLogger(__name__)
SHARE_BLOB = crypto.NONCE_BYTES + 16 + 16 + 2 * shamir.SHARE_BYTES  # nonce, header, two y's, GCM tag
_PHASES = ("advertise", "share", "input", "ack", "unmask", "done")


class _DeviceMessage(RoundMessage, Protocol):
    """A round's message a device signed."""

    @property
    def sender(self) -> int: ...


class Aggregator:
    """One round's aggregator. Sets: U1 advertised keys, U2 shared keys, U3 sent input, U4 acknowledged U3,
    U5 sent unmask shares (each a subset of the one before)."""

    def __init__(self, signed_config: bytes, directory: KeyDirectory):
        self.config = RoundConfig.from_signed_bytes(signed_config, directory.coordinator)
        self.digest = self.config.digest
        self._dir = directory
        self.graph = NeighbourGraph(self.config.participants, self.config.round_seed, self.config.degree)
        self._x = {d: i + 1 for i, d in enumerate(self.config.participants)}
        self.phase = "advertise"
        self.adverts: dict[int, tuple[AdvertiseKeys, bytes]] = {}
        self.shares: dict[int, dict[int, bytes]] = {}
        self.inputs: dict[int, np.ndarray] = {}
        self.acks: dict[int, bytes] = {}
        self.unmasks: dict[int, UnmaskShares] = {}
        self._bitmap = b""

    # -- validation ----------------------------------------------------------------------------------------
    def _accept(self, phase: str, msg: _DeviceMessage, seen: Container[int], allowed: Container[int]) -> None:
        if self.phase != phase:
            raise MessageRejected(f"{type(msg).__name__} arrived in phase {self.phase}")
        if msg.round_id != self.config.round_id:
            raise MessageRejected(f"message of round {msg.round_id} in round {self.config.round_id} (replay?)")
        if msg.config_digest != self.digest:
            raise MessageRejected(f"message for another configuration of round {msg.round_id} (replay?)")
        if msg.sender not in allowed:
            raise MessageRejected(f"device {msg.sender} may not send {type(msg).__name__} now")
        if msg.sender in seen:
            raise MessageRejected(f"duplicate {type(msg).__name__} from device {msg.sender} (replay?)")

    def _close(self, phase: str, members: Mapping[int, object], what: str) -> None:
        if self.phase != phase:
            raise SecAggAbort(f"cannot close phase {phase} in phase {self.phase}")
        if len(members) < self.config.n_min:
            self.phase = "aborted"
            raise SecAggAbort(f"only {len(members)} devices {what}, below n_min={self.config.n_min}; "
                              "the round releases nothing")
        self.phase = _PHASES[_PHASES.index(phase) + 1]

    def _live_neighbours(self, device: int, members: Container[int]) -> list[int]:
        return sorted(v for v in self.graph.neighbours(device) if v in members)

    # -- 0: AdvertiseKeys ----------------------------------------------------------------------------------
    def receive_advertise(self, data: bytes) -> None:
        msg = AdvertiseKeys.decode(data, self._dir)
        self._accept("advertise", msg, self.adverts, self._x)
        crypto.check_x25519_public(msg.c_public)   # a low-order key would stop every neighbour's exchange
        crypto.check_x25519_public(msg.s_public)
        self.adverts[msg.sender] = (msg, bytes(data))

    def close_advertise(self) -> None:
        self._close("advertise", self.adverts, "advertised keys")

    def key_broadcast(self, device: int) -> bytes:
        return RelayedFrames(KIND_KEY_BROADCAST, self.config.round_id, self.digest,
                             tuple(self.adverts[v][1] for v in self._live_neighbours(device, self.adverts))).encode()

    # -- 1: ShareKeys --------------------------------------------------------------------------------------
    def receive_shares(self, data: bytes) -> None:
        msg = ShareKeys.decode(data, self._dir)
        self._accept("share", msg, self.shares, self.adverts)
        expected = set(self._live_neighbours(msg.sender, self.adverts))
        if {v for v, _ in msg.shares} != expected:
            raise MessageRejected(f"device {msg.sender} did not send one share to each neighbour")
        if any(len(blob) != SHARE_BLOB for _, blob in msg.shares):
            raise MessageRejected("encrypted share of the wrong size")
        self.shares[msg.sender] = dict(msg.shares)

    def close_shares(self) -> None:
        self._close("share", self.shares, "shared their keys")

    def share_delivery(self, device: int) -> bytes:
        return ShareDelivery(self.config.round_id, self.digest, device, tuple(
            (v, self.shares[v][device]) for v in self._live_neighbours(device, self.shares))).encode()

    # -- 2: MaskedInput ------------------------------------------------------------------------------------
    def receive_masked_input(self, data: bytes) -> None:
        msg = MaskedInput.decode(data, self._dir)
        self._accept("input", msg, self.inputs, self.shares)
        if msg.vector.shape != (self.config.vector_length,):
            raise MessageRejected(f"masked vector of length {msg.vector.size}, expected {self.config.vector_length}")
        if int(msg.vector[-1]) >= P61:
            raise MessageRejected("checksum slot outside Z_p")
        self.inputs[msg.sender] = msg.vector

    def close_masked_input(self) -> None:
        self._close("input", self.inputs, "sent their masked input")
        self._bitmap = to_bitmap(self.inputs, self.config.participants)

    def survivor_set(self) -> bytes:
        return SurvivorSet(self.config.round_id, self.digest, self._bitmap).encode()

    # -- 3: ConsistencyCheck -------------------------------------------------------------------------------
    def receive_ack(self, data: bytes) -> None:
        msg = SurvivorAck.decode(data, self._dir)
        self._accept("ack", msg, self.acks, self.inputs)
        if msg.digest != survivor_digest(self.digest, self._bitmap):
            raise MessageRejected(f"device {msg.sender} acknowledged a different survivor set")
        self.acks[msg.sender] = bytes(data)

    def close_acks(self) -> None:
        self.phase = "unmask" if self.phase == "ack" else self.phase

    def ack_set(self, device: int) -> bytes:
        """The acknowledgements ``device`` needs before it unmasks: its neighbours' first, then others'
        until the certificate is complete (``RoundConfig.certificate_size`` signers, the device included)."""
        chosen = [v for v in self._live_neighbours(device, self.acks)]
        need = self.config.certificate_size - 1 - len(chosen)
        if need > 0:
            near = set(chosen) | {device}
            chosen += [v for v in sorted(self.acks) if v not in near][:need]
        return RelayedFrames(KIND_ACK_SET, self.config.round_id, self.digest,
                             tuple(self.acks[v] for v in chosen)).encode()

    # -- 4: Unmask -----------------------------------------------------------------------------------------
    def receive_unmask(self, data: bytes) -> None:
        msg = UnmaskShares.decode(data, self._dir)
        self._accept("unmask", msg, self.unmasks, self.acks)
        held = set(self._live_neighbours(msg.sender, self.shares)) | {msg.sender}
        if ({v for v, _ in msg.b_shares} != held & self.inputs.keys()
                or {v for v, _ in msg.s_shares} != held - self.inputs.keys()):
            raise MessageRejected(f"device {msg.sender} revealed shares inconsistent with the survivor set")
        try:
            for _, y in msg.b_shares + msg.s_shares:
                shamir.y_from_bytes(y)
        except ValueError as err:
            raise MessageRejected(str(err)) from None
        self.unmasks[msg.sender] = msg

    def _index_shares(self) -> dict[str, dict[int, list[tuple[int, int]]]]:
        """owner -> [(x of holder, y)] for the b- and s-secrets, from all unmask responses."""
        index: dict[str, dict[int, list[tuple[int, int]]]] = {"b": {}, "s": {}}
        for holder, msg in self.unmasks.items():
            for which, shares in (("b", msg.b_shares), ("s", msg.s_shares)):
                for v, y in shares:
                    index[which].setdefault(v, []).append((self._x[holder], shamir.y_from_bytes(y)))
        return index

    def _recover(self, index: dict[str, dict[int, list[tuple[int, int]]]], owner: int, which: str) -> bytes:
        shares = index[which].get(owner, [])
        if len(shares) < self.config.threshold:
            raise SecAggAbort(f"only {len(shares)} shares of device {owner}'s {which}-secret "
                              f"(threshold {self.config.threshold}); cannot unmask")
        return shamir.reconstruct(shares, self.config.threshold)

    def finish(self) -> bytes:
        """Unmask the sum; returns the AggregateResult bytes for the coordinator."""
        if self.phase != "unmask":
            raise SecAggAbort(f"cannot unmask in phase {self.phase}")
        cfg, m2, rid = self.config, 2 * self.config.num_queries, self.config.round_id
        total = np.zeros(cfg.vector_length, dtype=np.uint64)
        for y in self.inputs.values():
            np.add(total[:-1], y[:-1], out=total[:-1])
        total[-1] = np.uint64(sum(int(y[-1]) for y in self.inputs.values()) % P61)
        index = self._index_shares()
        for u in self.inputs:  # self-masks of the survivors
            add_mask(total, expand_mask(self._recover(index, u, "b"), m2), -1)
        for v in sorted(set(self.shares) - self.inputs.keys()):  # pairwise masks of dropped devices
            s_key = X25519PrivateKey.from_private_bytes(self._recover(index, v, "s"))
            if crypto.public_bytes(s_key) != self.adverts[v][0].s_public:
                raise SecAggAbort(f"recovered mask key of device {v} does not match its advertised key")
            for u in self._live_neighbours(v, self.inputs):
                seed = crypto.mask_seed(s_key, self.adverts[u][0].s_public, self.digest, v, u)
                add_mask(total, expand_mask(seed, m2), -1 if u < v else +1)
        self.phase = "done"
        log.debug("round %d unmasked: %d inputs, %d dropouts", rid, len(self.inputs),
                  len(self.shares) - len(self.inputs))
        return AggregateResult(rid, self.digest, self._bitmap, total[:-1].copy(), int(total[-1]),
                               tuple(self.acks[v] for v in sorted(self.acks))).encode()
