"""The bytes one device sends and receives in one secure-aggregation round, without running the round.

:func:`round_bytes` encodes the round's real messages (the signed configuration, the checksum envelope, the
five steps' frames) at their true shapes with throwaway keys, and counts what :func:`drive_secure_round
<pategail.server.secagg.round.drive_secure_round>` counts for a device when nobody drops out: every frame the
aggregator delivers to it (down) and every reply it sends (up). With no dropouts every contributor gets the
same count: each has ``degree`` neighbours (all others in a complete graph), reveals the b-share of itself and
each neighbour, and is sent max(degree, certificate size − 1) acknowledgements. A frame whose body lists k
fixed-size entries grows by the same number of bytes per entry, so lists are encoded with 0 and 1 entries and
extended — the cost of a round of 100,000 devices is the cost of encoding one configuration.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.config import COORDINATOR
from pategail.sdk.secagg.graph import NeighbourGraph
from pategail.sdk.secagg.messages import (KIND_ACK_SET, KIND_KEY_BROADCAST, AdvertiseKeys, MaskedInput,
                                          RelayedFrames, ShareDelivery, ShareKeys, SurvivorAck, SurvivorSet,
                                          UnmaskShares, to_bitmap)
from pategail.sdk.secagg.shamir import SHARE_BYTES

from .aggregator import SHARE_BLOB
from .checksum import seal_envelope
from .config import SecureRoundConfig
from .coordinator import round_config


@dataclass(frozen=True)
class DeviceBytes:
    """What one contributor of a round sends (``up``) and receives (``down``), in bytes."""

    up: int
    down: int


def _entries(make: Callable[[int], bytes], k: int) -> int:
    """Length of ``make(k)``, a frame listing k entries of one fixed size."""
    empty = len(make(0))
    return empty + k * (len(make(1)) - empty)


def round_bytes(config: SecureRoundConfig, n_contributors: int, num_queries: int) -> DeviceBytes:
    """Bytes per contributor of one round of ``config`` over ``n_contributors`` devices (the aggregator
    device, with ``aggregator="device"``, is not one of them and is not counted) with ``num_queries`` (M)
    values each and no dropouts. Raises ValueError for a configuration the coordinator would not sign."""
    return _round_bytes(dataclasses.replace(config, round_id=0), n_contributors, num_queries)


@lru_cache(maxsize=64)
def _round_bytes(config: SecureRoundConfig, n: int, m: int) -> DeviceBytes:
    participants = tuple(range(n))
    aggregator = COORDINATOR if config.aggregator == "coordinator" else n
    ephemeral, identity = X25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    cfg = round_config(config, participants, m, aggregator, round_seed=bytes(32),
                       envelope_public=crypto.public_bytes(ephemeral), checksum_commitment=bytes(32))
    digest, rid, sign = cfg.digest, cfg.round_id, identity.sign
    degree = NeighbourGraph(participants, cfg.round_seed, cfg.degree).degree
    acks_relayed = max(degree, cfg.certificate_size - 1)
    device_key = crypto.public_bytes(X25519PrivateKey.generate())
    envelope = seal_envelope(ephemeral, device_key, rid, digest, 0, bytes(32), 0)
    advert = AdvertiseKeys(rid, digest, 0, bytes(32), bytes(32)).encode(sign)
    ack = SurvivorAck(rid, digest, 0, bytes(32)).encode(sign)
    blob, share = bytes(SHARE_BLOB), bytes(SHARE_BYTES)
    down = (len(cfg.to_signed_bytes(sign)) + len(envelope)
            + _entries(lambda k: RelayedFrames(KIND_KEY_BROADCAST, rid, digest, (advert,) * k).encode(), degree)
            + _entries(lambda k: ShareDelivery(rid, digest, 0, ((1, blob),) * k).encode(), degree)
            + len(SurvivorSet(rid, digest, to_bitmap(participants, participants)).encode())
            + _entries(lambda k: RelayedFrames(KIND_ACK_SET, rid, digest, (ack,) * k).encode(), acks_relayed))
    up = (len(advert)
          + _entries(lambda k: ShareKeys(rid, digest, 0, ((1, blob),) * k).encode(sign), degree)
          + len(MaskedInput(rid, digest, 0, np.zeros(cfg.vector_length, dtype=np.uint64)).encode(sign))
          + len(ack)
          + _entries(lambda k: UnmaskShares(rid, digest, 0, ((1, share),) * k, ()).encode(sign), degree + 1))
    return DeviceBytes(up, down)
