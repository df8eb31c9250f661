"""A malicious aggregator for the adversarial tests: it drives honest ``SecAggClient``s through the public
protocol, choosing what each device is delivered and shown, then tries to open what it collected.

Everything it sends is something a real aggregator can send: relayed device-signed frames, share deliveries
and survivor sets (unsigned aggregator messages). It never touches a client's private state; it only reads
the replies, exactly as a network aggregator would. ``open_sum`` is the attack's payoff: the sum of the
inputs of a group of devices recovered from masked inputs and revealed shares, or None where a needed secret
is missing.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.secagg import SecAggError, crypto, shamir
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.fixedpoint import encode
from pategail.sdk.secagg.graph import NeighbourGraph
from pategail.sdk.secagg.messages import (KIND_ACK_SET, KIND_KEY_BROADCAST, AdvertiseKeys, MaskedInput,
                                          RelayedFrames, ShareDelivery, ShareKeys, SurvivorAck, SurvivorSet,
                                          UnmaskShares, to_bitmap)
from pategail.sdk.secagg.prg import add_mask, expand_mask
from pategail.server.secagg.config import SecureRoundConfig
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

M = 6
NOISE = 0.01


class MaliciousAggregator:
    """One round over ``n`` honest devices with SecAgg+ ``degree`` (0: all pairs), steered by the test."""

    def __init__(self, federation, n: int, degree: int, n_min: int, rng: np.random.Generator, **round_args):
        self.coordinator, clients, self.recorder = federation(n, **round_args.pop("federation_args", {}))
        self.clients = {c.device_id: c for c in clients}
        self.ids = sorted(self.clients)
        self.values = {d: rng.random(M) for d in self.ids}
        config = SecureRoundConfig(round_id=1, n_min=n_min, degree=degree, sum_noise_scale=NOISE,
                                   sq_sum_noise_scale=NOISE, **round_args)
        start = self.coordinator.new_round(config, self.ids, M)
        self.cfg = RoundConfig.from_signed_bytes(start.config, self.coordinator.directory.coordinator)
        self.digest = self.cfg.digest
        self.graph = NeighbourGraph(self.cfg.participants, self.cfg.round_seed, self.cfg.degree)
        self._x = {d: i + 1 for i, d in enumerate(self.cfg.participants)}
        self.adverts = {d: self.clients[d].start_round(start.config, start.envelopes[d]) for d in self.ids}
        self.s_public = {d: AdvertiseKeys.decode(a, self.coordinator.directory).s_public
                         for d, a in self.adverts.items()}
        self.shares: dict[int, dict[int, bytes]] = {}
        for d in self.ids:
            broadcast = RelayedFrames(KIND_KEY_BROADCAST, 1, self.digest,
                                      tuple(self.adverts[v] for v in sorted(self.graph.neighbours(d))))
            self.shares[d] = dict(ShareKeys.decode(self.clients[d].share_keys(broadcast.encode()),
                                                   self.coordinator.directory).shares)
        self.delivered: dict[int, set[int]] = {}
        self.inputs: dict[int, np.ndarray] = {}
        self.acks: dict[int, tuple[bytes, bytes]] = {}       # device -> (its view's bitmap, its signed ack)
        self.revealed: dict[str, dict[int, list[tuple[int, int]]]] = {"b": {}, "s": {}}
        self.refusals: dict[int, str] = {}

    def neighbours(self, d: int) -> set[int]:
        return set(self.graph.neighbours(d))

    def ring(self) -> list[int]:
        """The SecAgg+ ring order (neighbours are the degree/2 nearest on each side)."""
        return list(self.graph._ring)

    # -- the protocol, steered --------------------------------------------------------------------------------
    def deliver(self, senders_of: dict[int, set[int]] | None = None) -> None:
        """Give each device the shares of ``senders_of[d]`` (default: all its neighbours) and collect the masked
        inputs of those that accept."""
        for d in self.ids:
            senders = self.neighbours(d) if senders_of is None or d not in senders_of else senders_of[d]
            delivery = ShareDelivery(1, self.digest, d, tuple((v, self.shares[v][d]) for v in sorted(senders)))
            try:
                reply = self.clients[d].masked_input(delivery.encode(), self.values[d])
            except SecAggError as err:
                self.refusals[d] = f"input: {err}"
                continue
            self.delivered[d] = set(senders)
            self.inputs[d] = MaskedInput.decode(reply, self.coordinator.directory).vector

    def show(self, view_of) -> None:
        """Show each device that sent its input the survivor set ``view_of(d)``; collect acknowledgements."""
        for d in list(self.inputs):
            bitmap = to_bitmap(sorted(view_of(d)), self.cfg.participants)
            try:
                self.acks[d] = (bitmap, self.clients[d].consistency_check(SurvivorSet(1, self.digest, bitmap).encode()))
            except SecAggError as err:
                self.refusals[d] = f"ack: {err}"

    def unmask(self) -> None:
        """Give each device every acknowledgement of the view it signed (neighbours first), collect shares."""
        for d, (bitmap, _) in self.acks.items():
            same = [v for v, (b, _) in self.acks.items() if b == bitmap and v != d]
            same.sort(key=lambda v: (v not in self.neighbours(d), v))
            frames = tuple(self.acks[v][1] for v in same)
            try:
                reply = self.clients[d].unmask(RelayedFrames(KIND_ACK_SET, 1, self.digest, frames).encode())
            except SecAggError as err:
                self.refusals[d] = f"unmask: {err}"
                continue
            msg = UnmaskShares.decode(reply, self.coordinator.directory)
            for which, pairs in (("b", msg.b_shares), ("s", msg.s_shares)):
                for owner, y in pairs:
                    self.revealed[which].setdefault(owner, []).append((self._x[d], shamir.y_from_bytes(y)))

    # -- the payoff --------------------------------------------------------------------------------------------
    def secret(self, which: str, owner: int) -> bytes | None:
        shares = self.revealed[which].get(owner, [])
        if len(shares) < self.cfg.threshold:
            return None
        return shamir.reconstruct(shares, self.cfg.threshold)

    def open_sum(self, group) -> np.ndarray | None:
        """Σ over ``group`` of the devices' encoded inputs plus noise shares (int64, 2M words), recovered from
        the masked inputs and the revealed shares alone; None when a needed secret was not revealed."""
        group = set(group)
        if not group <= self.inputs.keys():
            return None
        m2 = 2 * M
        total = np.zeros(m2 + 1, dtype=np.uint64)
        for u in group:
            np.add(total[:-1], self.inputs[u][:-1], out=total[:-1])
            b = self.secret("b", u)
            if b is None:
                return None
            add_mask(total, expand_mask(b, m2), -1)
            for p in self.delivered[u]:
                if p in group and u in self.delivered.get(p, ()):
                    continue                                   # the pair's masks cancel inside the group
                seed = self._pair_seed(u, p)
                if seed is None:
                    return None
                add_mask(total, expand_mask(seed, m2), -1 if u < p else +1)
        return total[:-1].astype(np.int64)

    def _pair_seed(self, u: int, p: int) -> bytes | None:
        for owner, other in ((u, p), (p, u)):
            key = self.secret("s", owner)
            if key is not None:
                return crypto.mask_seed(X25519PrivateKey.from_private_bytes(key), self.s_public[other], self.digest,
                                        owner, other)
        return None

    def true_sum(self, group) -> np.ndarray:
        """What ``open_sum`` recovers when the attack works: the devices' encoded values and noise shares."""
        total = np.zeros(2 * M, dtype=np.int64)
        for u in group:
            noise_sum, noise_sq = self.recorder.shares[u][-2:]
            v = self.values[u]
            total += np.concatenate([encode(v) + noise_sum, encode(v * v) + noise_sq])
        return total


def acked_signers(agg: MaliciousAggregator, bitmap: bytes) -> set[int]:
    return {d for d, (b, _) in agg.acks.items() if b == bitmap}


__all__ = ["MaliciousAggregator", "M", "SurvivorAck", "acked_signers"]
