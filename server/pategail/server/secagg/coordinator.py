"""The coordinator's side of secure aggregation: enrol devices, sign round configurations, verify results.

The coordinator holds the only secrets the aggregator must not have: its Ed25519 signing key and each
round's checksum key. It receives the aggregate (Σ D + noise and Σ D² + noise) and nothing else.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.config import COORDINATOR, DevicePublicKeys, KeyDirectory, RoundConfig
from pategail.sdk.secagg.client import survivor_digest
from pategail.sdk.secagg.errors import ImplausibleAggregate, MessageRejected, TamperDetected
from pategail.sdk.secagg.checksum import key_commitment
from pategail.sdk.secagg.fixedpoint import SCALE, decode, plausible_range
from pategail.sdk.secagg.graph import secure_threshold
from pategail.sdk.secagg.messages import AggregateResult, SurvivorAck, from_bitmap
from pategail.sdk.secagg.prg import P61

from .checksum import seal_envelope, verify_aggregate
from .config import SecureRoundConfig


def round_config(config: SecureRoundConfig, participants: tuple[int, ...], num_queries: int, aggregator: int, *,
                 round_seed: bytes, envelope_public: bytes, checksum_commitment: bytes) -> RoundConfig:
    """The RoundConfig of ``config`` over the sorted ``participants`` (the threshold filled in when unset)."""
    n, degree = len(participants), config.degree
    threshold = config.threshold if config.threshold is not None else secure_threshold(n, degree, config.colluders)
    return RoundConfig(round_id=config.round_id, participants=participants, num_queries=num_queries,
                       n_min=config.n_min, threshold=threshold, degree=degree,
                       sum_noise_scale=float(config.sum_noise_scale),
                       sq_sum_noise_scale=float(config.sq_sum_noise_scale), round_seed=round_seed,
                       envelope_public=envelope_public, colluders=config.colluders, aggregator=aggregator,
                       mechanism=config.mechanism, block=config.block, clip_norm=float(config.clip_norm),
                       checksum_commitment=checksum_commitment)


@dataclass(frozen=True)
class RoundStart:
    """What the coordinator sends out for one round (via the aggregator)."""

    config: bytes
    """The signed RoundConfig frame, the same for everyone."""
    envelopes: dict[int, bytes]
    """device id -> its sealed checksum-key envelope."""


@dataclass(frozen=True, eq=False)
class VerifiedAggregate:
    """The noisy sums, checked. Shapes: (M,) float64 in value units."""

    round_id: int
    sum: np.ndarray
    sq_sum: np.ndarray
    survivors: tuple[int, ...]

    @property
    def n_survivors(self) -> int:
        return len(self.survivors)


class SecAggCoordinator:
    """Signs round configurations and checks aggregates; ``enroll`` builds the public key directory."""

    def __init__(self, signing_key: Ed25519PrivateKey | None = None):
        self._signing = signing_key or Ed25519PrivateKey.generate()
        self._devices: dict[int, DevicePublicKeys] = {}
        self._rounds: dict[int, tuple[RoundConfig, bytes, dict[int, int]]] = {}
        self._last_round = -1

    @property
    def directory(self) -> KeyDirectory:
        """The public key directory every party holds."""
        return KeyDirectory(crypto.public_bytes(self._signing), self._devices)

    def enroll(self, device_id: int, keys: DevicePublicKeys) -> None:
        """Register a device's long-term public keys (out of band, e.g. at app install)."""
        if not 0 <= device_id < COORDINATOR:
            raise ValueError("device ids are 32-bit and not 0xFFFFFFFF")
        try:
            crypto.check_x25519_public(keys.envelope)
        except MessageRejected as err:
            raise ValueError(f"device {device_id}: envelope key refused ({err})") from None
        self._devices[device_id] = keys

    def new_round(self, config: SecureRoundConfig, participants: Iterable[int], num_queries: int,
                  aggregator: int = COORDINATOR) -> RoundStart:
        """Sign the RoundConfig of ``config`` over ``participants`` (``num_queries`` values each, aggregated
        by ``aggregator``) and seal a fresh checksum key and offset to every participant."""
        round_id = config.round_id
        if round_id <= self._last_round:
            raise ValueError(f"round ids must increase ({round_id} <= {self._last_round})")
        participants = tuple(sorted(participants))
        if missing := [d for d in participants if d not in self._devices]:
            raise ValueError(f"devices not enrolled: {missing[:5]}")
        ephemeral = X25519PrivateKey.generate()
        key = os.urandom(32)
        cfg = round_config(config, participants, num_queries, aggregator, round_seed=os.urandom(32),
                           envelope_public=crypto.public_bytes(ephemeral), checksum_commitment=key_commitment(key))
        offsets = {d: secrets.randbelow(P61) for d in participants}  # k_u: secret from the aggregator
        envelopes = {d: seal_envelope(ephemeral, self._devices[d].envelope, round_id, cfg.digest, d, key,
                                      offsets[d]) for d in participants}
        self._rounds[round_id] = (cfg, key, offsets)
        self._last_round = round_id
        return RoundStart(cfg.to_signed_bytes(self._signing.sign), envelopes)

    def verify(self, aggregate: bytes) -> VerifiedAggregate:
        """Check the aggregate's round, survivor count, range and keyed checksum; decode the noisy sums.

        Raises TamperDetected on a checksum/range mismatch, a survivor set the devices did not sign (fewer
        than ``certificate_size`` signatures) or below n_min (an aggregate exists, so the attempt counts,
        whatever it claims), MessageRejected on
        malformed bytes or an unknown/finished round (a replayed aggregate).
        """
        msg = AggregateResult.decode(aggregate)
        if msg.round_id not in self._rounds:
            raise MessageRejected(f"aggregate for unknown or already verified round {msg.round_id}")
        cfg, key, offsets = self._rounds.pop(msg.round_id)  # one verification per round: no retrying forgeries
        if msg.config_digest != cfg.digest:
            raise TamperDetected(f"round {cfg.round_id}: aggregate for another configuration of this round")
        survivors = from_bitmap(msg.survivors_bitmap, cfg.participants)
        if len(survivors) < cfg.n_min:   # an unmasked aggregate the round must not have produced: it counts
            raise TamperDetected(f"round {cfg.round_id}: aggregate over {len(survivors)} devices, below "
                                 f"n_min={cfg.n_min}")
        self._check_survivors_signed(cfg, msg, frozenset(survivors))
        if msg.sums.shape != (2 * cfg.num_queries,):
            raise MessageRejected("aggregate of the wrong length")
        sums = verify_aggregate(msg.sums, msg.checksum, key, sum(offsets[u] for u in survivors) % P61, cfg.round_id)
        m = cfg.num_queries
        _check_plausible(cfg, sums, len(survivors))
        values = decode(sums)
        return VerifiedAggregate(msg.round_id, values[:m], values[m:], survivors)

    def _check_survivors_signed(self, cfg: RoundConfig, msg: AggregateResult, survivors: frozenset[int]) -> None:
        """The claimed survivor set must be the one the devices signed in the consistency check: every ack
        carried is a valid signature of a claimed survivor on this bitmap, and at least
        ``cfg.certificate_size`` distinct survivors signed — the certificate a device needs before it unmasks,
        so this is the one survivor set of the round honest devices revealed shares for. (The affine checksum
        binds it again.)"""
        digest = survivor_digest(cfg.digest, msg.survivors_bitmap)
        directory = self.directory
        signers: set[int] = set()
        for raw in msg.acks:
            try:
                ack = SurvivorAck.decode(raw, directory)
            except MessageRejected as err:
                raise TamperDetected(f"round {cfg.round_id}: a survivor acknowledgement is invalid ({err})") from None
            if (ack.round_id, ack.config_digest, ack.digest) != (cfg.round_id, cfg.digest, digest) \
                    or ack.sender not in survivors:
                raise TamperDetected(f"round {cfg.round_id}: the survivor set is not the one device {ack.sender} "
                                     "signed")
            signers.add(ack.sender)
        if len(signers) < cfg.certificate_size:
            raise TamperDetected(f"round {cfg.round_id}: only {len(signers)} survivors signed the survivor set, "
                                 f"{cfg.certificate_size} needed")


def _check_plausible(cfg: RoundConfig, sums: np.ndarray, n_survivors: int) -> None:
    """Every released Σ D and Σ D² must lie in [0, n] widened by the noise's bound (false alarm < 2^-40 per
    round): the checksum cannot see a device that skipped its own clipping (it knows its checksum secrets)."""
    m = cfg.num_queries
    noise = cfg.noise
    for name, part, scale, data in zip(("sum", "sq_sum"), (sums[:m], sums[m:]),
                                       (cfg.sum_noise_scale, cfg.sq_sum_noise_scale), noise.entry_ranges(cfg)):
        lo, hi = plausible_range(n_survivors, scale * SCALE, cfg.noise_divisor, 2 * m, bound=noise.noise_bound,
                                 data_range=data)
        bad = np.flatnonzero((part < lo) | (part > hi))
        if bad.size:
            i = int(bad[0])
            raise ImplausibleAggregate(
                f"round {cfg.round_id}: released {name}[{i}] = {part[i] / SCALE:.6g} lies outside the plausible "
                f"[{lo / SCALE:.6g}, {hi / SCALE:.6g}] for {n_survivors} survivors ({bad.size} coordinates): a "
                "device skipped its clipping or the aggregate was altered; nothing released")
