"""The device's side of one secure-aggregation round (Bonawitz et al. 2017; SecAgg+ graph optional).

A device object owns one ``SecAggClient``. Each call takes the bytes the aggregator sent and returns the
bytes to send back; a call that raises leaves the client's state unchanged:

    start_round(signed_config, envelope[, environment]) -> AdvertiseKeys  (verify config, policy, budget; open
                                                                          envelope)
    share_keys(key_broadcast)            -> ShareKeys          (t-of-k shares of b_u and s_u, encrypted)
    masked_input(share_delivery, scores) -> MaskedInput        (at least t − 1 neighbours' shares, else abort;
                                                                clip, noise share, checksum, mask; ledger)
    consistency_check(survivor_set)      -> SurvivorAck        (sign U3 once; abort below n_min)
    unmask(ack_set)                      -> UnmaskShares       (only under U3 certified by a majority of the
                                                                participants: b shares of survivors, s shares
                                                                of dropouts)

``scores`` are the device's D_u(s, a) for the round's M queries, shape (M,), float; the client clips them
to [0, 1] itself and uploads both D and D² (computed from the clipped D): data slots 0..M-1 carry D,
M..2M-1 carry D², slot 2M the checksum. ``environment=True`` (the device's environment vector is pending):
in a Laplace round the vector is L1-clipped on the device (``mechanisms.laplace_environment_input``) and the
release is accounted as one Laplace vector query of its L1 sensitivity (``Mechanism.round_release``).

Never both secrets: a device signs exactly one survivor set per round and derives what it reveals from it
(b_v for v in U3, the mask key s_v for v not in U3), keeping a record that refuses any request for the
other secret of a device it already revealed one of.

What the checks add up to — an aggregator together with at most ``colluders`` devices opens no sum but the
one over all honest survivors of one survivor set — is argued in
:func:`pategail.sdk.secagg.graph.secure_threshold`; each check below names the step of that argument it
carries.
"""
from __future__ import annotations

import enum
import hashlib
import hmac
import os
import struct
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.contribution import ENV_L1_BOUND

from . import crypto, shamir
from .checksum import checksum, envelope_aad, envelope_key, key_commitment, unpack_secrets, weights
from .config import KeyDirectory, RoundConfig
from .errors import MessageRejected, ProtocolError, RefusedUnmask, SecAggAbort
from .fixedpoint import SCALE, to_ring
from .graph import NeighbourGraph
from .ledger import PrivacyLedger
from .messages import (KIND_ACK_SET, KIND_KEY_BROADCAST, AdvertiseKeys, ChecksumEnvelope, MaskedInput, RelayedFrames,
                       RoundMessage, ShareDelivery, ShareKeys, SurvivorAck, SurvivorSet, UnmaskShares, from_bitmap)
from .policy import DevicePolicy
from .prg import add_mask, expand_mask
from .replay import RoundLog

_SHARE_HEAD = struct.Struct(">QII")


class Phase(enum.Enum):
    IDLE = 0
    ADVERTISED = 1
    SHARED = 2
    MASKED = 3
    ACKED = 4
    DONE = 5


@dataclass
class _Round:
    config: RoundConfig
    digest: bytes  # RoundConfig.digest: binds every message and key of the round
    neighbours: frozenset[int]
    checksum_key: bytes
    checksum_offset: int  # k_u of the affine checksum: known to this device and the coordinator only
    c_key: X25519PrivateKey
    s_key: X25519PrivateKey
    b_seed: bytes
    peers: dict[int, AdvertiseKeys] = field(default_factory=dict)  # U1 ∩ N(u)
    own_share: tuple[bytes, bytes] = (b"", b"")
    c_secrets: dict[int, bytes] = field(default_factory=dict)  # X25519(c_u, c_v), for both directions
    held: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # U2 ∩ N(u): (b share, s share)
    survivors: frozenset[int] = frozenset()
    ack_bitmap: bytes = b""
    ack: bytes = b""
    response: bytes = b""
    revealed: dict[int, str] = field(default_factory=dict)
    environment: bool = False  # the upload is the device's environment vector (one vector query)
    env_l1_bound: float = ENV_L1_BOUND  # ... L1-clipped to this in a Laplace round


def survivor_digest(config_digest: bytes, bitmap: bytes) -> bytes:
    """What a device signs in the consistency check: SHA-256 over the round configuration's digest and the U3
    bitmap (the coordinator checks the same digest on the aggregate's bitmap)."""
    return hashlib.sha256(b"pategail-secagg-v2/survivors" + config_digest + bitmap).digest()


class SecAggClient:
    """One device's protocol state machine.

    ``noise_sampler(scale_quanta, divisor, size) -> int64`` is the source of its noise share, divisor =
    n_min - colluders (default None: ``Mechanism.noise_share`` of the round's signed mechanism, CSPRNG; tests
    pass one to record shares).
    ``round_log`` keeps the last round accepted per coordinator key; give it a path so it survives restarts.
    ``policy`` holds the device's floors on a signed configuration (``policy.DevicePolicy``), ``ledger`` its
    own privacy ledger (``ledger.PrivacyLedger``); both are checked before the device sends anything."""

    def __init__(self, device_id: int, identity: crypto.DeviceIdentity, directory: KeyDirectory,
                 noise_sampler: Callable[[float, int, int], np.ndarray] | None = None,
                 round_log: RoundLog | None = None, policy: DevicePolicy | None = None,
                 ledger: PrivacyLedger | None = None):
        self.device_id = device_id
        self._identity = identity
        self._directory = directory
        self._noise = noise_sampler
        self._round_log = round_log if round_log is not None else RoundLog()
        self.policy = policy if policy is not None else DevicePolicy()
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        self._round: _Round | None = None
        self.phase = Phase.IDLE

    # -- helpers -------------------------------------------------------------------------------------------
    def _expect(self, phase: Phase) -> _Round:
        if self.phase is not phase or self._round is None:
            raise ProtocolError(f"device {self.device_id}: expected phase {phase.name}, in {self.phase.name}")
        return self._round

    def _check_round(self, msg: RoundMessage) -> None:
        """``msg`` must belong to the current round and to its signed configuration (not merely its id)."""
        if self._round is None or msg.round_id != self._round.config.round_id:
            raise MessageRejected(f"message for round {msg.round_id}, not the current one")
        if msg.config_digest != self._round.digest:
            raise MessageRejected(f"message for another configuration of round {msg.round_id} (replay?)")

    def _sign(self, data: bytes) -> bytes:
        return self._identity.sign(data)

    def _x(self, device: int) -> int:
        assert self._round is not None
        return self._round.config.participants.index(device) + 1

    # -- protocol ------------------------------------------------------------------------------------------
    def start_round(self, signed_config: bytes, envelope: bytes, environment: bool = False,
                    env_l1_bound: float = ENV_L1_BOUND, cells: bool = False) -> bytes:
        """Verify the coordinator-signed config, open the checksum envelope, advertise fresh keys.
        ``environment``: the vector this round will upload is the device's environment vector, whose honest
        L1 norm is at most ``env_l1_bound`` (pategail.sdk.contribution.env_l1_bound); ``cells``: its visited
        vector (a cell-table release, held to the plan's floor for that release)."""
        cfg = RoundConfig.from_signed_bytes(signed_config, self._directory.coordinator)
        self._round_log.check(self._directory.coordinator, cfg.round_id)
        if self.device_id not in cfg.participants:
            raise ProtocolError(f"device {self.device_id} is not a participant of round {cfg.round_id}")
        self.policy.check(cfg, environment, env_l1_bound, cells)  # a signature says who chose it, not that it is safe
        self.ledger.check(cfg, environment, env_l1_bound)
        env = ChecksumEnvelope.decode(envelope)
        if (env.round_id, env.device) != (cfg.round_id, self.device_id):
            raise MessageRejected("checksum envelope for another round or device")
        digest = cfg.digest
        shared = crypto.agree(self._identity.envelope_key, cfg.envelope_public)
        key, offset = unpack_secrets(crypto.open_sealed(envelope_key(shared, digest, self.device_id),
                                                        env.sealed, envelope_aad(digest, self.device_id)))
        if not hmac.compare_digest(key_commitment(key), cfg.checksum_commitment):
            raise MessageRejected("the checksum key in the envelope is not the one the round configuration "
                                  "commits to")
        graph = NeighbourGraph(cfg.participants, cfg.round_seed, cfg.degree)
        r = _Round(cfg, digest, graph.neighbours(self.device_id), key, offset, X25519PrivateKey.generate(),
                   X25519PrivateKey.generate(), os.urandom(32), environment=bool(environment),
                   env_l1_bound=float(env_l1_bound))
        reply = AdvertiseKeys(cfg.round_id, digest, self.device_id, crypto.public_bytes(r.c_key),
                              crypto.public_bytes(r.s_key)).encode(self._sign)
        self._round_log.accept(self._directory.coordinator, cfg.round_id)  # on disk before anything is sent
        self._round, self.phase = r, Phase.ADVERTISED
        return reply

    def share_keys(self, key_broadcast: bytes) -> bytes:
        """Check the neighbours' signed keys; send each an encrypted share of b_u and of s_u's secret key."""
        r = self._expect(Phase.ADVERTISED)
        kb = RelayedFrames.decode(key_broadcast, KIND_KEY_BROADCAST)
        self._check_round(kb)
        peers: dict[int, AdvertiseKeys] = {}
        for raw in kb.frames:
            adv = AdvertiseKeys.decode(raw, self._directory)
            self._check_round(adv)
            if adv.sender not in r.neighbours or adv.sender in peers:
                raise ProtocolError(f"unexpected or repeated keys of device {adv.sender}")
            peers[adv.sender] = adv
        cfg = r.config
        if len(peers) + 1 < cfg.threshold:
            raise SecAggAbort(f"only {len(peers)} neighbours advertised keys; the threshold is {cfg.threshold}")
        holders = sorted([*peers, self.device_id])
        xs = [self._x(v) for v in holders]
        b_ys = shamir.split(r.b_seed, xs, cfg.threshold)
        s_ys = shamir.split(crypto.private_bytes(r.s_key), xs, cfg.threshold)
        shares = []
        for v, by, sy in zip(holders, b_ys, s_ys):
            if v == self.device_id:  # a device holds a share of its own secrets too (Bonawitz et al.)
                r.own_share = (shamir.y_to_bytes(by), shamir.y_to_bytes(sy))
                continue
            head = _SHARE_HEAD.pack(cfg.round_id, self.device_id, v)
            r.c_secrets[v] = crypto.agree(r.c_key, peers[v].c_public)
            key = crypto.share_key(r.c_secrets[v], r.digest, self.device_id, v)
            shares.append((v, crypto.seal(key, head + shamir.y_to_bytes(by) + shamir.y_to_bytes(sy), head)))
        r.peers, self.phase = peers, Phase.SHARED
        return ShareKeys(cfg.round_id, r.digest, self.device_id, tuple(shares)).encode(self._sign)

    def masked_input(self, share_delivery: bytes, scores: np.ndarray) -> bytes:
        """Decrypt the shares held for neighbours; upload y = x + noise + PRG(b_u) ± Σ PRG(s_uv)."""
        r = self._expect(Phase.SHARED)
        cfg = r.config
        sd = ShareDelivery.decode(share_delivery)
        self._check_round(sd)
        if sd.recipient != self.device_id:
            raise MessageRejected("share delivery addressed to another device")
        held = {}
        for v, blob in sd.shares:
            if v not in r.peers:
                raise ProtocolError(f"shares from device {v}, which is not a neighbour that advertised keys")
            head = _SHARE_HEAD.pack(cfg.round_id, v, self.device_id)
            key = crypto.share_key(r.c_secrets[v], r.digest, v, self.device_id)
            plain = crypto.open_sealed(key, blob, head)
            if len(plain) != len(head) + 2 * shamir.SHARE_BYTES or plain[:len(head)] != head:
                raise MessageRejected(f"malformed share from device {v}")
            held[v] = (plain[len(head):len(head) + shamir.SHARE_BYTES], plain[len(head) + shamir.SHARE_BYTES:])
        held[self.device_id] = r.own_share
        if len(held) < cfg.threshold:
            # masked with fewer than t − 1 neighbours, the input could be opened with the b-secret alone, which
            # the other neighbours would reveal (secure_threshold, step b); Bonawitz et al. abort here too
            raise SecAggAbort(f"shares from only {len(held) - 1} neighbours arrived; {cfg.threshold - 1} are "
                              "needed before this device masks its input")
        m, noise = cfg.num_queries, cfg.noise
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (noise.input_length(cfg, len(scores)),):
            raise ValueError(f"scores must have shape ({noise.input_length(cfg, len(scores))},), got {scores.shape}")
        x = noise.upload(scores, cfg, r.environment, r.env_l1_bound, lambda scale, size: self._draw(cfg, scale, size))
        y = np.empty(2 * m + 1, dtype=np.uint64)
        y[:-1] = to_ring(x)
        y[-1] = checksum(x, weights(r.checksum_key, 2 * m), r.checksum_offset)
        add_mask(y, expand_mask(r.b_seed, 2 * m), +1)
        for v in r.peers.keys() & held.keys():
            seed = crypto.mask_seed(r.s_key, r.peers[v].s_public, r.digest, self.device_id, v)
            add_mask(y, expand_mask(seed, 2 * m), +1 if self.device_id < v else -1)
        reply = MaskedInput(cfg.round_id, r.digest, self.device_id, y).encode(self._sign)
        # from the moment the input leaves, a release containing it may exist
        self.ledger.record(cfg, r.environment, r.env_l1_bound)
        r.held, self.phase = held, Phase.MASKED
        return reply

    def consistency_check(self, survivor_set: bytes) -> bytes:
        """Sign the survivor set U3 — once per round; refuse below n_min or if U3 is inconsistent."""
        if self.phase in (Phase.ACKED, Phase.DONE):
            ss = SurvivorSet.decode(survivor_set)
            self._check_round(ss)
            assert self._round is not None
            if ss.bitmap != self._round.ack_bitmap:
                raise RefusedUnmask("already acknowledged a different survivor set in this round")
            return self._round.ack
        r = self._expect(Phase.MASKED)
        cfg = r.config
        ss = SurvivorSet.decode(survivor_set)
        self._check_round(ss)
        survivors = frozenset(from_bitmap(ss.bitmap, cfg.participants))
        if self.device_id not in survivors:
            raise ProtocolError("the survivor set omits this device, which sent its masked input")
        if (survivors & r.neighbours) - set(r.held):     # secure_threshold, step b: it masked with all of them
            raise ProtocolError("the survivor set contains neighbours that never shared keys with this device")
        if len(survivors) < cfg.n_min:
            raise SecAggAbort(f"only {len(survivors)} devices survived, below n_min={cfg.n_min}: "
                              "refusing to help unmask")
        r.survivors, r.ack_bitmap = survivors, ss.bitmap
        r.ack = SurvivorAck(cfg.round_id, r.digest, self.device_id, survivor_digest(r.digest, ss.bitmap)).encode(
            self._sign)
        self.phase = Phase.ACKED
        return r.ack

    def unmask(self, ack_set: bytes) -> bytes:
        """Reveal one secret per held device, only under a certified survivor set: signatures on this device's
        U3 from ``cfg.certificate_size`` distinct survivors (so no other survivor set of the round can be
        certified: every honest device that reveals anything saw this one), t − 1 of them its neighbours."""
        if self.phase is Phase.DONE:
            assert self._round is not None
            return self._round.response
        r = self._expect(Phase.ACKED)
        cfg = r.config
        acks = RelayedFrames.decode(ack_set, KIND_ACK_SET)
        self._check_round(acks)
        digest = survivor_digest(r.digest, r.ack_bitmap)
        signers, neighbours = {self.device_id}, {self.device_id}
        for raw in acks.frames:
            if len(signers) >= cfg.certificate_size and len(neighbours) >= cfg.threshold:
                break  # enough valid signatures on our U3; checking more only costs time
            ack = SurvivorAck.decode(raw, self._directory)
            self._check_round(ack)
            if ack.sender not in r.survivors:
                raise ProtocolError(f"acknowledgement from device {ack.sender}, which is not a survivor")
            if ack.digest != digest:
                raise ProtocolError(f"device {ack.sender} saw a different survivor set")
            if ack.sender in signers:
                raise ProtocolError(f"two acknowledgements from device {ack.sender}")
            signers.add(ack.sender)
            if ack.sender in r.neighbours:
                neighbours.add(ack.sender)
        if len(signers) < cfg.certificate_size:      # secure_threshold, step a: one survivor set per round
            raise SecAggAbort(f"only {len(signers)} devices certified the survivor set; {cfg.certificate_size} "
                              "of the round's participants are needed")
        if len(neighbours) < cfg.threshold:
            raise SecAggAbort(f"only {len(neighbours)} neighbours confirmed the survivor set; "
                              f"{cfg.threshold} needed")
        b_shares: list[tuple[int, bytes]] = []
        s_shares: list[tuple[int, bytes]] = []
        for v, (b_y, s_y) in sorted(r.held.items()):
            alive = v in r.survivors
            self._reveal(v, "b" if alive else "s")
            (b_shares if alive else s_shares).append((v, b_y if alive else s_y))
        r.response = UnmaskShares(cfg.round_id, r.digest, self.device_id, tuple(b_shares), tuple(s_shares)).encode(
            self._sign)
        # a finished round needs only its stored replies (a repeated request gets them again): dropping the
        # shares, peers' keys and pairwise secrets keeps an idle device small (with all pairs, ~0.6 KiB a peer)
        r.held, r.peers, r.c_secrets, r.revealed = {}, {}, {}, {}
        self.phase = Phase.DONE
        return r.response

    def _draw(self, cfg: RoundConfig, scale: float, size: int) -> np.ndarray:
        """This device's noise share of ``size`` coordinates at the round's total ``scale`` (value units)."""
        if self._noise is None:
            return cfg.noise.noise_share(scale * SCALE, cfg.noise_divisor, size)
        return self._noise(scale * SCALE, cfg.noise_divisor, size)        # a test's sampler

    def _reveal(self, device: int, secret: str) -> None:
        """Record that a share of ``secret`` ('b' or 's') of ``device`` goes out; refuse the other one."""
        assert self._round is not None
        previous = self._round.revealed.setdefault(device, secret)
        if previous != secret:
            raise RefusedUnmask(f"refusing to reveal both secrets of device {device}")
