"""The coordinator-signed configuration of one round, and the public-key directory (the PKI).

Everything a device relies on for its privacy is in ``RoundConfig`` and is signed by the coordinator:
``n_min`` (no device unmasks when fewer survive, and noise shares are sized for n_min - ``colluders``), the
noise scales, the
Shamir threshold, the neighbour degree and the public round seed that fixes the neighbour graph. The
aggregator relays the signed bytes and cannot change them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from . import crypto
from .errors import MessageRejected
from .fixedpoint import FRAC_BITS, MAX_DEVICES, MAX_NOISE_SCALE_QUANTA, SAFE_ABS_SUM, SCALE
from .graph import certificate_size
from .mechanisms import Mechanism, mechanism, mechanism_by_tag
from .wire import Reader, Signer, Writer, frame, unframe

KIND_CONFIG = 1
COORDINATOR = 0xFFFFFFFF
"""Aggregator id meaning "the coordinator aggregates this round"."""


@dataclass(frozen=True)
class DevicePublicKeys:
    """A device's long-term public keys as registered with the coordinator (raw 32-byte keys)."""

    signing: bytes
    """Ed25519 identity key: verifies every message the device sends."""
    envelope: bytes
    """X25519 key the coordinator seals the per-round checksum key to."""


@dataclass(frozen=True)
class KeyDirectory:
    """The PKI every party holds: the coordinator's signing key and each enrolled device's public keys."""

    coordinator: bytes
    devices: Mapping[int, DevicePublicKeys] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", MappingProxyType(dict(self.devices)))

    def signing_key(self, device: int) -> bytes:
        try:
            return self.devices[device].signing
        except KeyError:
            raise MessageRejected(f"unknown device {device}") from None


@dataclass(frozen=True)
class RoundConfig:
    """One round's public parameters. Shapes: a device uploads 2 * num_queries data words + 1 checksum word."""

    round_id: int
    """Strictly increasing per coordinator; binds every message and key of the round."""
    participants: tuple[int, ...]
    """Sorted ids of the devices asked to contribute (the aggregator device, if any, is not among them)."""
    num_queries: int
    """M: scored (s, a) pairs; a device sends Σ-contributions D and D² for each."""
    n_min: int
    """Fewest surviving contributors for which anything is released; noise shares are sized for it."""
    threshold: int
    """Shamir threshold t: shares of a device's secrets needed to recover them (held by its neighbours
    and itself)."""
    degree: int
    """Neighbours per device in the SecAgg+ graph (even); 0 = all pairs."""
    sum_noise_scale: float
    """Discrete-Laplace scale b, in value units, of the total noise on each Σ_u D_u(s, a) (0 = none)."""
    sq_sum_noise_scale: float
    """The same for each Σ_u D_u(s, a)²."""
    round_seed: bytes
    """32 public random bytes chosen by the coordinator: fixes the neighbour graph."""
    envelope_public: bytes
    """The coordinator's ephemeral X25519 key of this round, for the checksum-key envelopes."""
    colluders: int = 0
    """t: devices that may collude with the coordinator (it learns their noise shares and can subtract
    them). Noise shares are sized for n_min - t honest survivors, so the noise the others add alone reaches
    the target; t = 0 trusts every device to keep its share secret."""
    aggregator: int = COORDINATOR
    """Who aggregates: ``COORDINATOR`` or the id of the device chosen for this round."""
    frac_bits: int = FRAC_BITS
    """Fixed-point fractional bits (must equal the SDK's)."""
    mechanism: str = "laplace"
    """``laplace``: each device uploads its clipped values D and D² (data slots 0..M−1 and M..2M−1) with
    discrete-Laplace shares of ``sum_noise_scale`` / ``sq_sum_noise_scale``. ``gaussian``: it uploads ONE
    vector of M values (slots 0..M−1; slots M..2M−1 stay zero, no Σ D² is released), L2-clipped to
    ``clip_norm``, with distributed discrete Gaussian shares of total standard deviation ``sum_noise_scale``.
    Signed like every other field, so a device knows which guarantee it is asked for."""
    block: int = 0
    """Gaussian mechanism: 0 = the pending vector as it is (entries in [0, 1], the environment release); K =
    the pending per-decision scores (47 per generated day) centred (D − ½) and averaged over blocks of K
    decisions of a day (``pategail.sdk.contribution.Granularity``); ``DELTA_BLOCK`` = a signed vector as it is
    (entries in [−1, 1]: a device's model delta over its clip norm)."""
    clip_norm: float = 0.0
    """Gaussian mechanism: the L2 norm (value units) a device clips its vector to — the sensitivity."""
    checksum_commitment: bytes = bytes(32)
    """SHA-256 of the round's checksum key K (:func:`pategail.sdk.secagg.checksum.key_commitment`): every
    device checks the key in its envelope against it, so a coordinator cannot hand one device its own key
    (the aggregate's checksum would then carry ⟨r_u, x_u⟩ under weights only that device has — 61 bits of its
    vector)."""

    def __post_init__(self) -> None:
        p, n = self.participants, len(self.participants)
        if list(p) != sorted(set(p)) or n < 1 or n > MAX_DEVICES:
            raise ValueError(f"participants must be 1..{MAX_DEVICES} sorted distinct ids")
        if self.aggregator in p:
            raise ValueError("the aggregator device cannot also contribute (it would learn the checksum key)")
        if not 1 <= self.n_min <= n:
            raise ValueError(f"n_min={self.n_min} must be in [1, {n}]")
        if not 0 <= self.colluders < self.n_min:
            raise ValueError(f"colluders={self.colluders} must be in [0, n_min)")
        if self.degree < 0 or self.degree % 2:
            raise ValueError("degree must be 0 (all pairs) or even")
        if not 1 <= self.threshold <= self.holders:
            raise ValueError(f"threshold {self.threshold} must be in [1, {self.holders}]")
        if not 1 <= self.num_queries <= 1 << 22:
            raise ValueError("num_queries out of range")
        if self.frac_bits != FRAC_BITS:
            raise ValueError(f"frac_bits {self.frac_bits} != SDK's {FRAC_BITS}")
        if len(self.round_seed) != 32 or len(self.envelope_public) != 32 or len(self.checksum_commitment) != 32:
            raise ValueError("round_seed, envelope_public and checksum_commitment are 32 bytes")
        self.noise.check_round(self)
        for scale in (self.sum_noise_scale, self.sq_sum_noise_scale):
            q = scale * SCALE
            if not (q == 0 or 1 <= q <= MAX_NOISE_SCALE_QUANTA):
                raise ValueError(f"noise scale {scale} outside [2^-{FRAC_BITS}, 2^{50 - FRAC_BITS}] or 0")
            if n * SCALE + self.noise.noise_bound(n, q, self.noise_divisor) >= SAFE_ABS_SUM:
                raise ValueError("sums could wrap around Z_2^64 with these parameters")

    @property
    def noise(self) -> Mechanism:
        """The round's privacy mechanism (``pategail.sdk.secagg.mechanisms``)."""
        return mechanism(self.mechanism)

    @property
    def holders(self) -> int:
        """How many devices hold shares of one device's secrets: its neighbours and itself."""
        n = len(self.participants)
        return n if self.degree == 0 or self.degree >= n - 1 else self.degree + 1

    @property
    def certificate_size(self) -> int:
        """Participants that must sign one survivor set before an honest device reveals any share
        (:func:`pategail.sdk.secagg.graph.certificate_size`)."""
        return certificate_size(len(self.participants), self.colluders)

    @property
    def noise_divisor(self) -> int:
        """How many devices' noise shares add up to the target noise: n_min - colluders."""
        return self.n_min - self.colluders

    @property
    def vector_length(self) -> int:
        """Words of a masked upload: 2M data slots (Σ D then Σ D²) and one checksum slot."""
        return 2 * self.num_queries + 1

    def body(self) -> bytes:
        w = Writer().u64(self.round_id).u32s(self.participants).u32(self.num_queries).u32(self.n_min)
        w.u32(self.threshold).u32(self.degree).f64(self.sum_noise_scale).f64(self.sq_sum_noise_scale)
        w.raw(self.round_seed).raw(self.envelope_public).u32(self.colluders).u32(self.aggregator)
        w.u8(self.frac_bits).raw(self.checksum_commitment)
        if self.noise.wire_tag is not None:    # a trailer: Laplace configurations end here
            w.u8(self.noise.wire_tag).u8(self.block).f64(self.clip_norm)
        return w.bytes()

    @property
    def digest(self) -> bytes:
        """SHA-256 of the configuration (its signed body): every message and key of the round is bound to it."""
        return hashlib.sha256(b"pategail-secagg/round-config" + self.body()).digest()

    def to_signed_bytes(self, sign: Signer) -> bytes:
        """The signed frame; ``sign`` is the coordinator's Ed25519 signing function."""
        return frame(KIND_CONFIG, self.body(), sign)

    @classmethod
    def from_signed_bytes(cls, data: bytes, coordinator_public: bytes) -> "RoundConfig":
        """Parse and verify the coordinator's signature; anything wrong raises MessageRejected."""
        body, signed, sig = unframe(data, KIND_CONFIG)
        if not crypto.verify(coordinator_public, sig, signed):
            raise MessageRejected("round configuration not signed by the coordinator")
        r = Reader(body)
        fields: dict[str, Any] = dict(round_id=r.u64(), participants=r.u32s(), num_queries=r.u32(), n_min=r.u32(),
                      threshold=r.u32(), degree=r.u32(), sum_noise_scale=r.f64(), sq_sum_noise_scale=r.f64(),
                      round_seed=r.raw(32), envelope_public=r.raw(32), colluders=r.u32(), aggregator=r.u32(),
                      frac_bits=r.u8(), checksum_commitment=r.raw(32))
        if r.remaining():
            try:
                name = mechanism_by_tag(r.u8()).name
            except ValueError:
                raise MessageRejected("round configuration with an unknown mechanism") from None
            fields.update(mechanism=name, block=r.u8(), clip_norm=r.f64())
        r.done()
        try:
            return cls(**fields)
        except ValueError as err:
            raise MessageRejected(f"invalid round configuration: {err}") from None
