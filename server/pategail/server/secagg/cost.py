"""The bytes each device sends and receives in one secure-aggregation round, without running the round.

The round's real messages (the signed configuration, the checksum envelope, the five steps' frames) are encoded
at their true shapes with throwaway keys, and each device is counted what :func:`drive_secure_round
<pategail.server.secagg.round.drive_secure_round>` counts for it: every frame the aggregator delivers to it
(down) and every reply it sends (up). A frame whose body lists k fixed-size entries grows by the same number of
bytes per entry, so lists are encoded with 0 and 1 entries and extended — the cost of a round of 100,000
devices is the cost of encoding one configuration.

:func:`round_bytes`: nobody drops out, and every contributor gets the same count: each has ``degree``
neighbours (all others in a complete graph), reveals the b-share of itself and each neighbour, and is sent
max(degree, certificate size − 1) acknowledgements.

:func:`dropout_round_bytes`: some contributors drop out before their masked input. They are counted too —
what they received and sent before they stopped, as a real round's ``RoundStats`` counts them. A survivor's
bytes depend on how many of its neighbours dropped (the neighbour graph follows from the round seed): it
reveals the mask-key share of each dropped neighbour instead of its b-share, and is relayed fewer of its
neighbours' acknowledgements (the certificate is topped up from other survivors).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.config import COORDINATOR, RoundConfig
from pategail.sdk.secagg.errors import AbortAfterUnmask, SecAggAbort
from pategail.sdk.secagg.graph import NeighbourGraph
from pategail.sdk.secagg.messages import (KIND_ACK_SET, KIND_KEY_BROADCAST, AdvertiseKeys, MaskedInput,
                                          RelayedFrames, ShareDelivery, ShareKeys, SurvivorAck, SurvivorSet,
                                          UnmaskShares, to_bitmap)
from pategail.sdk.secagg.shamir import SHARE_BYTES

from .aggregator import SHARE_BLOB
from .checksum import seal_envelope
from .config import SecureRoundConfig
from .coordinator import round_config

DROP_STAGES = ("after_advertise", "after_share_keys")
"""When a device of :func:`dropout_round_bytes` stops: the :class:`~pategail.server.secagg.round.Dropouts`
stages before the masked input."""


@dataclass(frozen=True)
class DeviceBytes:
    """What one contributor of a round sends (``up``) and receives (``down``), in bytes."""

    up: int
    down: int


@dataclass(frozen=True)
class _Lengths:
    """The length of each frame of a round of one shape; ``(empty, per entry)`` for the frames listing entries."""

    config: int                      # the signed configuration and the device's checksum envelope
    advert: int
    key_broadcast: tuple[int, int]
    share_keys: tuple[int, int]
    share_delivery: tuple[int, int]
    masked_input: int
    survivor_set: int
    ack: int
    ack_set: tuple[int, int]
    unmask: tuple[int, int, int]     # empty, per b-share, per s-share
    degree: int
    threshold: int
    certificate: int


def _entries(make: Callable[[int], bytes]) -> tuple[int, int]:
    """(length of ``make(0)``, bytes per entry) of a frame ``make(k)`` listing k entries of one fixed size."""
    empty = len(make(0))
    return empty, len(make(1)) - empty


def _listing(lengths: tuple[int, int], k: int | np.ndarray) -> int | np.ndarray:
    return lengths[0] + k * lengths[1]


def round_bytes(config: SecureRoundConfig, n_contributors: int, num_queries: int) -> DeviceBytes:
    """Bytes per contributor of one round of ``config`` over ``n_contributors`` devices (the aggregator
    device, with ``aggregator="device"``, is not one of them and is not counted) with ``num_queries`` (M)
    values each and no dropouts. Raises ValueError for a configuration the coordinator would not sign."""
    return _round_bytes(dataclasses.replace(config, round_id=0), n_contributors, num_queries)


@lru_cache(maxsize=64)
def _round_bytes(config: SecureRoundConfig, n: int, m: int) -> DeviceBytes:
    size = _lengths(config, n, m)
    acks_relayed = max(size.degree, size.certificate - 1)
    down = (size.config + _listing(size.key_broadcast, size.degree) + _listing(size.share_delivery, size.degree)
            + size.survivor_set + _listing(size.ack_set, acks_relayed))
    up = (size.advert + _listing(size.share_keys, size.degree) + size.masked_input + size.ack
          + size.unmask[0] + (size.degree + 1) * size.unmask[1])
    return DeviceBytes(int(up), int(down))


def dropout_round_bytes(config: SecureRoundConfig, participants: Sequence[int], num_queries: int,
                        dropped: Iterable[int], round_seed: bytes,
                        stage: str = "after_share_keys") -> dict[int, DeviceBytes]:
    """Bytes of each of ``participants`` (the contributors: the aggregator device, with ``aggregator="device"``,
    is not one of them) in one round of ``config`` with ``num_queries`` (M) values each, in which the devices
    ``dropped`` stop after ``stage`` (one of :data:`DROP_STAGES`: after advertising their keys, or after
    sending their shares too) and the others finish. The neighbour graph is the one ``round_seed`` (the signed
    configuration's) gives. The dropped devices are counted what they received and sent before they stopped.

    Raises SecAggAbort when the real round would release nothing (fewer than n_min survivors, a survivor set
    too small to certify, a survivor with fewer than t − 1 surviving neighbours, or a dropped device's mask
    key with fewer than t surviving holders) — AbortAfterUnmask when, with a device aggregator, some survivors
    had already revealed their shares — and ValueError for an unknown stage or a dropped device that is not a
    participant, or a configuration the coordinator would not sign."""
    if stage not in DROP_STAGES:
        raise ValueError(f"stage must be one of {DROP_STAGES}, got {stage!r}")
    participants = tuple(sorted(participants))
    gone = frozenset(dropped)
    if not gone <= set(participants):
        raise ValueError(f"dropped devices that are not participants: {sorted(gone - set(participants))[:5]}")
    size = _lengths(dataclasses.replace(config, round_id=0), len(participants), num_queries)
    graph = NeighbourGraph(participants, round_seed, size.degree)
    is_gone = np.array([d in gone for d in participants])
    live = graph.count_neighbours_in(d for d in participants if d not in gone)
    _check_unmasks(config, size, graph, is_gone, live, stage)
    early = stage == "after_advertise"
    dropped_down = size.config + (0 if early else _listing(size.key_broadcast, size.degree))
    dropped_up = size.advert + (0 if early else _listing(size.share_keys, size.degree))
    delivered = live if early else size.degree           # shares from the neighbours that sent theirs
    down = (size.config + _listing(size.key_broadcast, size.degree) + _listing(size.share_delivery, delivered)
            + size.survivor_set + _listing(size.ack_set, np.maximum(live, size.certificate - 1)))
    up = (size.advert + _listing(size.share_keys, size.degree) + size.masked_input + size.ack + size.unmask[0]
          + (live + 1) * size.unmask[1] + (0 if early else size.degree - live) * size.unmask[2])
    down, up = np.where(is_gone, dropped_down, down), np.where(is_gone, dropped_up, up)
    return {d: DeviceBytes(int(u), int(w)) for d, u, w in zip(participants, up.tolist(), down.tolist())}


def _check_unmasks(config: SecureRoundConfig, size: _Lengths, graph: NeighbourGraph, is_gone: np.ndarray,
                   live: np.ndarray, stage: str) -> None:
    """Raise what the real round raises when the devices ``is_gone`` (in participant order) stop after
    ``stage`` and leave it unable to finish; ``live``: each participant's neighbours that did not drop. The
    rules are :func:`~pategail.server.secagg.liveness.round_completes`'s, on counts of neighbours."""
    t = size.threshold
    shared = live if stage == "after_advertise" else np.full_like(live, size.degree)
    masked = ~is_gone & (shared + 1 >= t)           # a device masks with at least t − 1 neighbours' shares
    if masked.sum() < config.n_min:
        raise SecAggAbort(f"{masked.sum()} devices sent their masked input, fewer than n_min = {config.n_min}: "
                          "nothing is released")
    if not masked[~is_gone].all():
        live = graph.count_neighbours_in(np.asarray(graph.participants)[masked].tolist())
    unmasked = masked & (masked.sum() >= size.certificate) & (live + 1 >= t)
    if (masked == ~is_gone).all() and (unmasked == masked).all() and (
            stage == "after_advertise" or (live[is_gone] >= t).all()):
        return
    why = (f"{masked.sum()} survivors cannot certify the survivor set ({size.certificate} signatures needed)"
           if masked.sum() < size.certificate else f"a device's secret has fewer than t = {t} surviving holders")
    error = AbortAfterUnmask if unmasked.any() and config.aggregator != "coordinator" else SecAggAbort
    raise error(f"the round cannot be unmasked: {why}")


@lru_cache(maxsize=64)
def _lengths(config: SecureRoundConfig, n: int, m: int) -> _Lengths:
    participants = tuple(range(n))
    aggregator = COORDINATOR if config.aggregator == "coordinator" else n
    ephemeral, identity = X25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    cfg: RoundConfig = round_config(config, participants, m, aggregator, round_seed=bytes(32),
                                    envelope_public=crypto.public_bytes(ephemeral), checksum_commitment=bytes(32))
    digest, rid, sign = cfg.digest, cfg.round_id, identity.sign
    device_key = crypto.public_bytes(X25519PrivateKey.generate())
    envelope = seal_envelope(ephemeral, device_key, rid, digest, 0, bytes(32), 0)
    advert = AdvertiseKeys(rid, digest, 0, bytes(32), bytes(32)).encode(sign)
    ack = SurvivorAck(rid, digest, 0, bytes(32)).encode(sign)
    blob, share = bytes(SHARE_BLOB), bytes(SHARE_BYTES)
    unmask_empty, per_b = _entries(lambda k: UnmaskShares(rid, digest, 0, ((1, share),) * k, ()).encode(sign))
    per_s = _entries(lambda k: UnmaskShares(rid, digest, 0, (), ((1, share),) * k).encode(sign))[1]
    return _Lengths(
        config=len(cfg.to_signed_bytes(sign)) + len(envelope), advert=len(advert),
        key_broadcast=_entries(lambda k: RelayedFrames(KIND_KEY_BROADCAST, rid, digest, (advert,) * k).encode()),
        share_keys=_entries(lambda k: ShareKeys(rid, digest, 0, ((1, blob),) * k).encode(sign)),
        share_delivery=_entries(lambda k: ShareDelivery(rid, digest, 0, ((1, blob),) * k).encode()),
        masked_input=len(MaskedInput(rid, digest, 0, np.zeros(cfg.vector_length, dtype=np.uint64)).encode(sign)),
        survivor_set=len(SurvivorSet(rid, digest, to_bitmap(participants, participants)).encode()), ack=len(ack),
        ack_set=_entries(lambda k: RelayedFrames(KIND_ACK_SET, rid, digest, (ack,) * k).encode()),
        unmask=(unmask_empty, per_b, per_s), degree=NeighbourGraph(participants, cfg.round_seed, cfg.degree).degree,
        threshold=cfg.threshold, certificate=cfg.certificate_size)
