"""Write the cross-language test vectors of the Java core from the Python SDK (the reference).

    .venv/bin/python android-demo/vectors/generate.py            # every vector, from the committed bundle
    .venv/bin/python android-demo/vectors/generate.py --bundle   # export the bundle again first (needs torch)
    .venv/bin/python android-demo/vectors/generate.py --out DIR  # write elsewhere (the currency test does)

Everything comes from the SDK's public functions with fixed keys, seeds and data (the embedded data set's
first user): the bytes of every message type, the crypto primitives (HKDF with the project's info strings,
X25519, Ed25519, AES-GCM, AES-CTR masks with the checksum word, the low-order X25519 keys agreement refuses),
Shamir shares, fixed-point encoding, the neighbour graph, the secure thresholds and certificate sizes,
checksum-key commitments, signed configurations with envelopes the client must open or refuse, state and pair
features of real days, the environment contributions (the action-rate part too), one RoundRequest as the Python
device answers it (the losses and scores its ONNX Runtime training session produced), what the device's floors
decide on signed configurations under declared privacy plans (policy.json), and the network frames and request
signature between a device and the coordinator's service (net.json), the Gaussian mechanism (gaussian.json),
the PLD accountant of Laplace ledgers (pld.json) and a privately released cell table (cells.json). Where the SDK draws from the operating
system's CSPRNG (AES-GCM nonces, Shamir coefficients) the draws are replaced by a seeded stream while
generating, so the files are reproducible; the bundle (its manifest has a creation time) is made only with
``--bundle``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import struct
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_DATA = REPO / "data" / "default"
N_USER_DAYS = 6
N_GENERATED = 3
ROUND_K_STEPS = 5
ROUND_BATCH = 32
ROUND_SEED = 7


def hx(b: bytes) -> str:
    return bytes(b).hex()


@contextlib.contextmanager
def seeded_os_randomness(seed: int):
    """os.urandom and secrets.randbelow from a seeded stream (reproducible nonces and Shamir coefficients)."""
    import secrets

    rng = np.random.default_rng(seed)
    with mock.patch.object(os, "urandom", lambda n: rng.bytes(n)), \
            mock.patch.object(secrets, "randbelow", lambda q: int.from_bytes(rng.bytes(40), "big") % q):
        yield


def load_data():
    from pategail.data.dataset import load_dataset
    from pategail.data.prepare import prepare_dataset

    tmp = Path(tempfile.mkdtemp(prefix="android-vectors-"))
    prepare_dataset("pategail", DEFAULT_DATA, tmp / "data", allow_pickle=True)
    ds = load_dataset(tmp / "data")
    shutil.rmtree(tmp, ignore_errors=True)
    return ds


def export_bundle(out: Path, ds) -> None:
    """The bundle every vector refers to: the data set's cells, untrained models (seed 0), no initial states."""
    import torch

    from pategail.export.bundle import export_bundle as export
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
    from pategail.server.policy import Policy, PolicyConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        policy, discriminator = Policy(PolicyConfig(n_cells=ds.n_cells)), Discriminator()
    shutil.rmtree(out, ignore_errors=True)
    export(policy, discriminator, out,
           environment=Environment(cells=ds.cells, alpha=DEFAULT_ALPHA, candidates=DEFAULT_CANDIDATES))


# ---------------------------------------------------------------------------------------------------- crypto
def crypto_vectors() -> dict:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from pategail.sdk.secagg import checksum, crypto, fixedpoint, prg, shamir
    from pategail.sdk.secagg.client import survivor_digest
    from pategail.sdk.secagg.errors import MessageRejected
    from pategail.sdk.secagg.graph import NeighbourGraph, certificate_size, secure_threshold

    key = lambda i: bytes((i * 37 + j * 11) % 256 for j in range(32))  # noqa: E731 — fixed test keys
    x_a, x_b = X25519PrivateKey.from_private_bytes(key(1)), X25519PrivateKey.from_private_bytes(key(2))
    shared = crypto.agree(x_a, crypto.public_bytes(x_b))
    digest = key(99)  # stands for a round configuration's SHA-256 digest
    out: dict = {"x25519": [], "hkdf": [], "ed25519": [], "gcm": [], "masks": [], "checksum": [], "shamir": [],
                 "fixed_point": {}, "graph": [], "survivor_digest": [], "sum_bound": [], "config_digest": hx(digest)}
    for i in range(1, 4):
        a, b = X25519PrivateKey.from_private_bytes(key(i)), X25519PrivateKey.from_private_bytes(key(i + 10))
        out["x25519"].append({"private": hx(key(i)), "public": hx(crypto.public_bytes(a)),
                              "peer_public": hx(crypto.public_bytes(b)),
                              "shared": hx(crypto.agree(a, crypto.public_bytes(b))),
                              "mask_seed_u5_v3": hx(crypto.mask_seed(a, crypto.public_bytes(b), digest, 5, 3))})
    out["x25519_low_order"] = hx(bytes(32))        # the all-zero point: agreement must be refused
    # every low-order point (and their non-canonical encodings): the shared secret is all zero whatever the
    # private key, so agreement is refused (crypto.check_x25519_public); the list keeps those Python refuses
    p = 2**255 - 19
    low_order = [0, 1, p - 1, p, p + 1,
                 0x00b8495f16056286fdb1329ceb8d09da6ac49ff1fae35616aeb8413b7c7aebe0,
                 0x57119fd0dd4e22d8868e1c58c45c44045bef839c55b1d0b1248c50a3bc959c5f]
    low_order += [v + p for v in low_order[5:]] + [2**256 - 1 - 18, 2**256 - 1 - 17]
    refused = []
    for u in low_order:
        public = (u % 2**256).to_bytes(32, "little")
        try:
            crypto.check_x25519_public(public)
        except MessageRejected:
            refused.append(hx(public))
    out["x25519_low_order_points"] = refused
    for purpose, ctx in [(b"mask", (7, 1, 2)), (b"share", (7, 2, 1)), (b"envelope", (3, 100)),
                         (b"checksum-weights", ()), (b"graph", ()), (b"mask", (2**64 - 1, 0, 2**32 - 2))]:
        for salt in (None, digest):
            out["hkdf"].append({"secret": hx(shared), "purpose": purpose.decode(), "context": [str(c) for c in ctx],
                                "salt": None if salt is None else hx(salt),
                                "key": hx(crypto.hkdf(shared, purpose, *ctx, salt=salt))})
    out["share_key_s10_r11"] = hx(crypto.share_key(shared, digest, 10, 11))
    out["envelope_key_d10"] = hx(checksum.envelope_key(shared, digest, 10))
    out["envelope_aad_d10"] = hx(checksum.envelope_aad(digest, 10))
    out["envelope_secrets"] = {"key": hx(key(45)), "offset": str(2**61 - 2),
                               "plain": hx(checksum.pack_secrets(key(45), 2**61 - 2))}
    for i, msg in enumerate([b"", b"pategail", bytes(range(256))]):
        sk = Ed25519PrivateKey.from_private_bytes(key(20 + i))
        out["ed25519"].append({"private": hx(key(20 + i)), "public": hx(crypto.public_bytes(sk)), "data": hx(msg),
                               "signature": hx(sk.sign(msg))})
    with seeded_os_randomness(1):
        for i, (plain, aad) in enumerate([(b"share bytes" * 7, b"head"), (b"", b""), (bytes(66), b"x" * 16)]):
            k = key(30 + i)
            out["gcm"].append({"key": hx(k), "plaintext": hx(plain), "aad": hx(aad),
                               "sealed": hx(crypto.seal(k, plain, aad))})
    for i, n in enumerate([1, 3, 94, 1000]):
        seed = key(40 + i)
        out["masks"].append({"seed": hx(seed), "n_data": n,
                             "mask": [str(int(v)) for v in prg.expand_mask(seed, n).tolist()]})
    rng = np.random.default_rng(5)
    for n in (1, 8, 200):
        ck = key(50 + n % 7)
        w = checksum.weights(ck, n)
        values = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
        values[:2] = [2**63 - 1, -(2**63)][: min(2, n)] if n >= 2 else values[:1]
        offset = int(rng.integers(0, 2**61 - 1))
        out["checksum"].append({"key": hx(ck), "weights": [str(x) for x in w], "offset": str(offset),
                                "values": [str(int(v)) for v in values],
                                "checksum": str(checksum.checksum(values, w, offset))})
    acc = prg.expand_mask(key(60), 5)
    before = [str(int(v)) for v in acc.tolist()]
    prg.add_mask(acc, prg.expand_mask(key(61), 5), +1)
    plus = [str(int(v)) for v in acc.tolist()]
    prg.add_mask(acc, prg.expand_mask(key(62), 5), -1)
    out["add_mask"] = {"acc": before, "plus_seed": hx(key(61)), "minus_seed": hx(key(62)), "after_plus": plus,
                       "after_minus": [str(int(v)) for v in acc.tolist()]}
    with seeded_os_randomness(2):
        for secret, xs, t in [(key(70), [1, 2, 3], 2), (bytes(32), [1, 2, 3, 4, 5], 3), (b"\xff" * 32, [2, 7, 9, 11], 4)]:
            ys = shamir.split(secret, xs, t)
            out["shamir"].append({"secret": hx(secret), "threshold": t, "xs": xs,
                                  "ys": [hx(shamir.y_to_bytes(y)) for y in ys]})
    values = np.array([0.0, 1.0, 0.5, 1e-9, 0.3, 2.5, -0.1, 0.5 / 2**24, 1.5 / 2**24, 2.5 / 2**24, 0.999999999])
    out["fixed_point"] = {"values": values.tolist(), "encoded": [int(v) for v in fixedpoint.encode(values)]}
    for n, degree in [(5, 0), (10, 4), (31, 6), (4, 2)]:
        participants = tuple(range(100, 100 + 3 * n, 3))
        seed = key(80 + n)
        g = NeighbourGraph(participants, seed, degree)
        out["graph"].append({"participants": list(participants), "round_seed": hx(seed), "degree": degree,
                             "neighbours": {str(d): sorted(g.neighbours(d)) for d in participants},
                             "secure_threshold": secure_threshold(len(participants), degree)})
    out["thresholds"] = [{"n": n, "degree": degree, "colluders": c, "secure_threshold": secure_threshold(n, degree, c),
                          "certificate_size": certificate_size(n, c)}
                         for n in (1, 2, 3, 4, 5, 7, 10, 41, 1000) for degree in sorted({0, 2, 4, 40, n - 1, n})
                         for c in (0, 1, 3) if degree % 2 == 0 and c < n]
    out["key_commitment"] = [{"key": hx(k), "commitment": hx(checksum.key_commitment(k))}
                             for k in (bytes(32), key(45), b"\xff" * 32)]
    for cfg_digest, bitmap in [(digest, b"\xe0"), (key(98), b"\xff\x80")]:
        out["survivor_digest"].append({"config_digest": hx(cfg_digest), "bitmap": hx(bitmap),
                                       "digest": hx(survivor_digest(cfg_digest, bitmap))})
    for n, q, n_min in [(100, 2.0**24, 50), (100_000, 2.0**50, 1), (10, 0.0, 5), (1000, 12345.5, 700)]:
        out["sum_bound"].append({"n": n, "scale_quanta": q, "n_min": n_min, "bound": fixedpoint.sum_bound(n, q, n_min)})
    return out


# ---------------------------------------------------------------------------------------------- messages
def message_vectors(request: bytes) -> dict:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from pategail.sdk import messages as dm
    from pategail.sdk.net.frames import directory_to_bytes
    from pategail.sdk.secagg import crypto
    from pategail.sdk.secagg import messages as sm
    from pategail.sdk.secagg.checksum import key_commitment
    from pategail.sdk.secagg.config import DevicePublicKeys, KeyDirectory, RoundConfig

    key = lambda i: bytes((i * 53 + j * 7) % 256 for j in range(32))  # noqa: E731
    coordinator = Ed25519PrivateKey.from_private_bytes(key(0))
    devices = {d: (Ed25519PrivateKey.from_private_bytes(key(d)), X25519PrivateKey.from_private_bytes(key(d + 50)))
               for d in (3, 5, 8)}
    directory = KeyDirectory(crypto.public_bytes(coordinator),
                             {d: DevicePublicKeys(crypto.public_bytes(s), crypto.public_bytes(e))
                              for d, (s, e) in devices.items()})
    sign = {d: s.sign for d, (s, _) in devices.items()}
    out: dict = {"coordinator_private": hx(key(0)), "coordinator_public": hx(directory.coordinator),
                 "devices": {str(d): {"signing_private": hx(key(d)), "envelope_private": hx(key(d + 50)),
                                      "signing_public": hx(k.signing), "envelope_public": hx(k.envelope)}
                             for d, k in directory.devices.items()}}
    cfg = RoundConfig(round_id=12, participants=(3, 5, 8), num_queries=94, n_min=2, threshold=2, degree=0,
                      sum_noise_scale=0.25, sq_sum_noise_scale=0.5, round_seed=key(90), envelope_public=key(91),
                      colluders=1, aggregator=0xFFFFFFFF, checksum_commitment=key_commitment(key(89)))
    d = cfg.digest
    out["round_config"] = {"frame": hx(cfg.to_signed_bytes(coordinator.sign)), "round_id": 12,
                           "participants": [3, 5, 8], "num_queries": 94, "n_min": 2, "threshold": 2, "degree": 0,
                           "sum_noise_scale": 0.25, "sq_sum_noise_scale": 0.5, "round_seed": hx(key(90)),
                           "envelope_public": hx(key(91)), "colluders": 1, "aggregator": 0xFFFFFFFF,
                           "checksum_commitment": hx(key_commitment(key(89))), "digest": hx(d)}
    out["round_config_refused"] = {
        "wrong_signer": hx(cfg.to_signed_bytes(devices[3][0].sign)),
        "unsigned": hx(cfg.to_signed_bytes(None)),
    }
    out["start_round"] = start_round_vectors(key, coordinator, directory, devices)
    # the key directory as the coordinator signs it for the devices (pategail.sdk.net.frames)
    out["directory"] = {"coordinator_private": hx(key(0)), "device_ids": sorted(directory.devices),
                        "signed": hx(directory_to_bytes(directory, coordinator.sign))}
    vec = np.array([0, 1, 2**64 - 1, 2**63, 12345678901234567890, 2**61 - 2], dtype=np.uint64)
    adv = sm.AdvertiseKeys(12, d, 3, key(92), key(93))
    ack8 = sm.SurvivorAck(12, d, 8, key(98)).encode(sign[8])
    secagg = {
        "envelope": sm.ChecksumEnvelope(12, 5, key(94) + key(95)).encode(),
        "advertise": adv.encode(sign[3]),
        "key_broadcast": sm.RelayedFrames(sm.KIND_KEY_BROADCAST, 12, d, (
            adv.encode(sign[3]), sm.AdvertiseKeys(12, d, 8, key(96), key(97)).encode(sign[8]))).encode(),
        "share_keys": sm.ShareKeys(12, d, 5, ((3, key(1) + key(2)), (8, b"\x01" * 94))).encode(sign[5]),
        "share_delivery": sm.ShareDelivery(12, d, 5, ((3, b"abc"), (8, b""))).encode(),
        "masked_input": sm.MaskedInput(12, d, 8, vec).encode(sign[8]),
        "survivors": sm.SurvivorSet(12, d, sm.to_bitmap({3, 8}, (3, 5, 8))).encode(),
        "ack": sm.SurvivorAck(12, d, 3, key(98)).encode(sign[3]),
        "ack_set": sm.RelayedFrames(sm.KIND_ACK_SET, 12, d, (ack8,)).encode(),
        "unmask": sm.UnmaskShares(12, d, 5, ((3, b"\x02" * 33),), ((8, b"\x03" * 33),)).encode(sign[5]),
        "aggregate": sm.AggregateResult(12, d, b"\xa0", vec[:4], 2**61 - 5, (ack8,)).encode(),
    }
    out["secagg"] = {k: hx(v) for k, v in secagg.items()}
    out["masked_input_vector"] = [str(int(v)) for v in vec]
    bad_sig = bytearray(secagg["advertise"])
    bad_sig[-1] ^= 1
    out["secagg_refused"] = {
        "advertise_bad_signature": hx(bytes(bad_sig)),
        "advertise_unsigned": hx(sm.AdvertiseKeys(12, d, 3, key(92), key(93)).encode(None)),
        "advertise_same_keys": hx(sm.AdvertiseKeys(12, d, 3, key(92), key(92)).encode(sign[3])),
        "advertise_unknown_device": hx(sm.AdvertiseKeys(12, d, 4, key(92), key(93)).encode(sign[3])),
        "unmask_both_secrets": hx(sm.UnmaskShares(12, d, 5, ((3, b"\x02" * 33),), ((3, b"\x03" * 33),)).encode(sign[5])),
        "share_keys_duplicate": hx(sm.ShareKeys(12, d, 5, ((3, b"a"), (3, b"b"))).encode(sign[5])),
        "survivors_trailing": hx(secagg["survivors"][:-1] + b"\x00" + b"\x00"),
    }
    # device protocol: every type, then malformed frames with the ErrorReply code the device must give
    policy = b"\x08\x07not really onnx but bytes"
    device = {
        "policy_update": dm.PolicyUpdate.for_model(3, policy),
        "initial_states_request": dm.InitialStatesRequest(4),
        "ack_round": dm.Ack(5, "round_request", 141),
        "ack_policy": dm.Ack(0, "policy_update", 0),
        "ack_initial": dm.Ack(2**40, "initial_states_request", 8444),
        "cell_release_request": dm.CellReleaseRequest(2**33 + 5, 32),
        "ack_cells": dm.Ack(2**33 + 5, "cell_release_request", 4210),
        "error": dm.ErrorReply(dm.NO_ROUND, dm.MALFORMED, "not a device-protocol message"),
        "error_unicode": dm.ErrorReply(7, dm.CELL_RANGE, "days: values must be in [0, 4210) — ünïcödé"),
    }
    out["device"] = {k: hx(m.to_bytes()) for k, m in device.items()}
    out["device"]["round_request"] = hx(request)
    head = lambda kind, body, version=1: struct.pack(">4sBBI", b"PGDV", version, kind, len(body)) + body  # noqa: E731
    rr = dm.RoundRequest.from_bytes(request)
    refused = {
        "too_short": (b"PGDV\x01", dm.MALFORMED),
        "bad_magic": (b"XXXX" + request[4:], dm.MALFORMED),
        "version": (head(2, struct.pack(">q", 1), version=2), dm.VERSION),
        "unknown_kind": (head(9, struct.pack(">q", 1)), dm.MALFORMED),
        "bad_length": (request + b"\x00", dm.MALFORMED),
        "truncated_body": (head(2, request[10:-1]), dm.MALFORMED),
        "hash_not_hex": (head(1, struct.pack(">q", 1) + b"Z" * 64 + struct.pack(">I", 1) + b"x"), dm.MALFORMED),
        "negative_round": (head(3, struct.pack(">q", -5)), dm.MALFORMED),
        "too_many_steps": (head(2, struct.pack(">qIII", 1, 10_001, 4, 0)), dm.TOO_LARGE),
        "too_many_days": (head(2, struct.pack(">qIII", 1, 1, 4, 5000)), dm.TOO_LARGE),
        "batch_too_small": (head(2, request[10:18] + struct.pack(">I", 1) + struct.pack(">I", 1) + request[26:]),
                            dm.MALFORMED),
        "no_days": (head(2, struct.pack(">qIII", 1, 1, 4, 0)), dm.SHAPE),
        "cell_out_of_range": (head(2, request[10:30] + struct.pack("<i", 4210) + request[34:]), dm.CELL_RANGE),
        "bad_action": (request[:-1] + b"\x04", dm.MALFORMED),
        "ack_kind": (head(4, struct.pack(">qBI", 1, 4, 0)), dm.MALFORMED),
        "error_code": (head(5, struct.pack(">qI", 1, 3) + b"bad" + struct.pack(">I", 0)), dm.MALFORMED),
        "cells_no_max": (head(7, struct.pack(">q", 6)), dm.MALFORMED),
        "cells_zero_max": (head(7, struct.pack(">qI", 6, 0)), dm.MALFORMED),
        "cells_max_too_large": (head(7, struct.pack(">qI", 6, 2**31)), dm.MALFORMED),
        "cells_negative_round": (head(7, struct.pack(">qI", -2, 32)), dm.MALFORMED),
        "cells_trailing": (head(7, struct.pack(">qIB", 6, 32, 0)), dm.MALFORMED),
    }
    out["device_refused"] = {}
    for name, (frame, code) in refused.items():
        try:
            dm.from_bytes(frame, n_cells=4210)
        except dm.MessageError as err:
            if err.code != code:
                raise SystemExit(f"vector {name}: the SDK gives {err.code}, the vector says {code}")
            out["device_refused"][name] = {"frame": hx(frame), "code": code,
                                           "reply": hx(dm.ErrorReply.from_error(dm.peek_round(frame), err).to_bytes())}
        else:
            raise SystemExit(f"vector {name}: the SDK accepts it")
    cr = dm.CellReleaseRequest.from_bytes(device["cell_release_request"].to_bytes())
    out["cell_release_request_fields"] = {"round": cr.round, "max_cells": cr.max_cells}
    out["round_request_fields"] = {"round": rr.round, "k_steps": rr.k_steps, "batch_size": rr.batch_size,
                                   "n_days": len(rr.days), "days_row0": rr.days[0].tolist(), "homes": rr.homes.tolist(),
                                   "actions_row0": rr.actions[0].tolist()}
    return out


def start_round_vectors(key, coordinator, directory, devices) -> dict:
    """Signed configurations and checksum envelopes for device 5 that the Python client accepts or refuses at
    start_round, each for one reason: the key in the envelope is not the committed one; the threshold is
    below the secure threshold (all pairs, n = 3, one colluder: 3, and a strict majority would be 2)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from pategail.sdk.secagg import crypto
    from pategail.sdk.secagg.checksum import key_commitment
    from pategail.sdk.secagg.client import SecAggClient
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.errors import MessageRejected, RoundRefused
    from pategail.server.secagg.checksum import seal_envelope

    ephemeral = X25519PrivateKey.from_private_bytes(key(87))
    checksum_key, offset = key(88), 2**61 - 7

    def signed(round_id, colluders, threshold, sealed_key):
        cfg = RoundConfig(round_id=round_id, participants=(3, 5, 8), num_queries=4, n_min=2, threshold=threshold,
                          degree=0, sum_noise_scale=0.0, sq_sum_noise_scale=0.0, round_seed=key(86),
                          envelope_public=crypto.public_bytes(ephemeral), colluders=colluders,
                          aggregator=0xFFFFFFFF, checksum_commitment=key_commitment(checksum_key))
        envelope = seal_envelope(ephemeral, directory.devices[5].envelope, round_id, cfg.digest, 5, sealed_key,
                                 offset)
        return {"config": hx(cfg.to_signed_bytes(coordinator.sign)), "envelope": hx(envelope)}

    with seeded_os_randomness(3):
        out = {"checksum_key": hx(checksum_key), "offset": str(offset), "device": 5,
               "accepted": signed(20, 0, 2, checksum_key),
               "uncommitted_key": signed(21, 0, 2, key(85)),
               "threshold_below_floor": signed(22, 1, 2, checksum_key)}
    identity = crypto.DeviceIdentity(*devices[5])
    for name, want in (("accepted", None), ("uncommitted_key", MessageRejected),
                       ("threshold_below_floor", RoundRefused)):
        client = SecAggClient(5, identity, directory)
        try:
            client.start_round(bytes.fromhex(out[name]["config"]), bytes.fromhex(out[name]["envelope"]))
        except (MessageRejected, RoundRefused) as err:
            if want is None or not isinstance(err, want):
                raise SystemExit(f"start_round vector {name}: the SDK refuses it ({err})")
        else:
            if want is not None:
                raise SystemExit(f"start_round vector {name}: the SDK accepts it")
    return out


# ---------------------------------------------------------------------------------------------- network
def net_vectors() -> dict:
    """The frames between a device and the coordinator's service (pategail.sdk.net): a device's enrolment and
    Pong, the coordinator's Enrolled and Order, and a signed request (what is signed, the signature)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from pategail.sdk.net import auth
    from pategail.sdk.net.frames import ANY_ID, Enrolled, Enrolment, Order, Pong
    from pategail.sdk.secagg import crypto
    from pategail.sdk.secagg.config import DevicePublicKeys

    key = lambda i: bytes((i * 41 + j * 17) % 256 for j in range(32))  # noqa: E731
    coordinator = Ed25519PrivateKey.from_private_bytes(key(0))
    identity = crypto.DeviceIdentity(Ed25519PrivateKey.from_private_bytes(key(1)),
                                     X25519PrivateKey.from_private_bytes(key(2)))
    keys = DevicePublicKeys(identity.signing_public, identity.envelope_public)
    coordinator_public = crypto.public_bytes(coordinator)
    sha = "ab" * 32
    signed = auth.signed_bytes("POST", "/v1/reply", 7, 1_800_000_000_123_456_789, b"reply bytes")
    return {
        "coordinator_public": hx(coordinator_public), "signing_private": hx(key(1)), "envelope_private": hx(key(2)),
        "enrolment": hx(Enrolment(keys, 7).to_bytes(identity.sign)),
        "enrolment_any": hx(Enrolment(keys, ANY_ID).to_bytes(identity.sign)),
        "enrolled": hx(Enrolled(7, coordinator_public, sha).to_bytes(coordinator.sign)), "bundle_sha256": sha,
        "enrolled_by_device": hx(Enrolled(7, coordinator_public, sha).to_bytes(identity.sign)),
        "order": hx(Order(7, 123_456_789_012, "advertise", (b"config", b"envelope")).to_bytes(coordinator.sign)),
        "order_ping": hx(Order(7, 5, "ping", ()).to_bytes(coordinator.sign)),
        "order_other_device": hx(Order(8, 6, "request", (b"x",)).to_bytes(coordinator.sign)),
        "order_by_device": hx(Order(7, 7, "request", (b"x",)).to_bytes(identity.sign)),
        "pong": hx(Pong(7, 5).to_bytes(identity.sign)),
        "request": {"method": "POST", "path": "/v1/reply", "device": 7, "nonce": "1800000000123456789",
                    "body": hx(b"reply bytes"), "signed": hx(signed), "signature": hx(identity.sign(signed))},
    }


# ---------------------------------------------------------------------------------------------- device policy
def policy_vectors() -> dict:
    """Signed round configurations and what the Python device's floors (DevicePolicy of a declared plan, or
    none) make of each: accepted, or the refusal's one line, word for word."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.sdk.accounting import gaussian_sensitivity
    from pategail.sdk.secagg import crypto
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.errors import RoundRefused
    from pategail.sdk.secagg.policy import DeclaredPlan, DevicePolicy

    key = lambda i: bytes((i * 29 + j * 13) % 256 for j in range(32))  # noqa: E731
    coordinator = Ed25519PrivateKey.from_private_bytes(key(0))
    cells_only = DeclaredPlan(8.0, 1e-5, 0.0, 0.0, 0.6, colluders=1, mechanism="gaussian", cells_noise_multiplier=1.2)
    plans = {"laplace": DeclaredPlan(8.0, 1e-5, 2.0, 3.0, 0.6, colluders=1, env_noise_multiplier=0.4).to_manifest(),
             "gaussian": DeclaredPlan(8.0, 1e-5, 0.0, 0.0, 0.6, colluders=1, mechanism="gaussian",
                                      noise_multiplier=1.1, env_noise_multiplier=2.0).to_manifest(),
             # the plan of a bundle on a public map (the cell-table release alone), and a run's plan with it
             "cells_only": cells_only.to_manifest(),
             "gaussian_cells": replace(cells_only, noise_multiplier=1.1, env_noise_multiplier=2.0).to_manifest()}
    cases = [  # name, plan, (n_min, threshold, colluders, sum scale, sq-sum scale, M), environment, L1 bound
        ("reward_accepted", "laplace", (3, 4, 1, 2.0, 3.0, 94), False, 9.0),
        ("n_min_below_share", "laplace", (2, 4, 1, 2.0, 3.0, 94), False, 9.0),
        ("too_few_colluders", "laplace", (3, 4, 0, 2.0, 3.0, 94), False, 9.0),
        ("threshold_below_secure", "laplace", (3, 3, 1, 2.0, 3.0, 94), False, 9.0),
        ("sum_scale_below", "laplace", (3, 4, 1, 1.9, 3.0, 94), False, 9.0),
        ("sq_sum_scale_below", "laplace", (3, 4, 1, 2.0, 2.5, 94), False, 9.0),
        ("environment_accepted", "laplace", (3, 4, 1, 8.0, 8.0, 13000), True, 9.0),
        ("environment_below", "laplace", (3, 4, 1, 7.0, 8.0, 13000), True, 9.0),
        ("environment_action_rates_below", "laplace", (3, 4, 1, 8.0, 8.0, 13000), True, 10.0),
        ("gaussian_plan_laplace_round", "gaussian", (3, 4, 1, 2.0, 3.0, 94), False, 9.0),
        ("no_plan_no_noise", None, (2, 4, 1, 0.0, 0.0, 94), False, 9.0),
    ]
    gaussian_cases = [  # the same with σ and the clip norm in place of the two scales: z = σ / (C + ½√M quanta)
        ("gaussian_reward_accepted", "gaussian", (3, 4, 1, 2.3, 2.0, 32), False, 9.0),
        ("gaussian_reward_below", "gaussian", (3, 4, 1, 2.1, 2.0, 32), False, 9.0),
        ("gaussian_environment_accepted", "gaussian", (3, 4, 1, 6.1, 3.0, 300), True, 10.0),
        ("gaussian_environment_below", "gaussian", (3, 4, 1, 5.9, 3.0, 300), True, 10.0),
        ("gaussian_reward_at_env_floor", "gaussian", (3, 4, 1, 2.1, 2.0, 32), True, 9.0),
        ("gaussian_no_noise", "gaussian", (3, 4, 1, 0.0, 2.0, 32), False, 9.0),
        ("laplace_plan_gaussian_round", "laplace", (3, 4, 1, 2.2, 2.0, 32), False, 9.0),
        ("gaussian_n_min_below_share", "gaussian", (2, 4, 1, 2.2, 2.0, 32), False, 9.0),
        ("no_plan_gaussian_no_noise", None, (2, 4, 1, 0.0, 2.0, 32), False, 9.0),
    ]
    # a cell-table round (the visited vector: M squares of the public map, clip √32), at σ = z · Δ₂
    clip, squares = math.sqrt(32), 4210
    at_floor = 1.2 * gaussian_sensitivity(clip, squares)
    cells_cases = [  # name, plan, (n_min, threshold, colluders, σ or b, clip or b_sq, M), environment, cells, mechanism
        ("cells_accepted", "cells_only", (3, 4, 1, at_floor, clip, squares), False, True, "gaussian"),
        ("cells_below", "cells_only", (3, 4, 1, 0.99 * at_floor, clip, squares), False, True, "gaussian"),
        ("cells_larger_clip", "cells_only", (3, 4, 1, at_floor, 2 * clip, squares), False, True, "gaussian"),
        ("cells_only_reward", "cells_only", (3, 4, 1, 100 * at_floor, clip, squares), False, False, "gaussian"),
        ("cells_only_environment", "cells_only", (3, 4, 1, 100 * at_floor, clip, squares), True, False, "gaussian"),
        ("plan_without_cells", "gaussian", (3, 4, 1, 100 * at_floor, clip, squares), False, True, "gaussian"),
        ("run_plan_cells_accepted", "gaussian_cells", (3, 4, 1, at_floor, clip, squares), False, True, "gaussian"),
        ("run_plan_reward_accepted", "gaussian_cells", (3, 4, 1, 2.3, 2.0, 32), False, False, "gaussian"),
        ("laplace_cells", "laplace", (3, 4, 1, 2.0, 3.0, 94), False, True, "laplace"),
        ("no_plan_laplace_cells", None, (3, 4, 1, 2.0, 3.0, 94), False, True, "laplace"),
        ("no_plan_gaussian_cells", None, (3, 4, 1, 0.0, clip, squares), False, True, "gaussian"),
    ]
    out = {"coordinator_public": hx(crypto.public_bytes(coordinator)), "plans": plans, "cases": []}
    rows = [(*c, False, "laplace") for c in cases] + [(*c, False, "gaussian") for c in gaussian_cases] + \
        [(name, plan, numbers, environment, 9.0, cells, mechanism)
         for name, plan, numbers, environment, cells, mechanism in cells_cases]
    for i, (name, plan, (n_min, threshold, colluders, b, b_sq, m), environment, l1, cells, kind) in enumerate(rows):
        gaussian = kind == "gaussian"
        mechanism = dict(mechanism="gaussian", clip_norm=b_sq) if gaussian else {}
        cfg = RoundConfig(round_id=100 + i, participants=(3, 5, 8, 11, 13), num_queries=m, n_min=n_min,
                          threshold=threshold, degree=0, sum_noise_scale=b, sq_sum_noise_scale=0.0 if gaussian else b_sq,
                          round_seed=key(1), envelope_public=key(2), colluders=colluders, checksum_commitment=key(3),
                          **mechanism)
        policy = DevicePolicy() if plan is None else DeclaredPlan.from_manifest(plans[plan]).policy()
        try:
            policy.check(cfg, environment, l1, cells)
            refused = None
        except RoundRefused as err:
            refused = str(err)
        out["cases"].append({"name": name, "plan": plan, "config": hx(cfg.to_signed_bytes(coordinator.sign)),
                             "environment": environment, "env_l1_bound": l1, "cells": cells, "refused": refused})
    # which plans the SDK takes: a Gaussian plan plans the reward and environment releases together, or the
    # cell-table release alone (a bundle on a public map); the cell release's multiplier is never negative
    gaussian_plan = plans["gaussian"]
    out["plan_validity"] = []
    for name, section in (("run", plans["gaussian"]), ("cells_only", plans["cells_only"]),
                          ("run_with_cells", plans["gaussian_cells"]),
                          ("reward_without_environment", gaussian_plan | {"env_noise_multiplier": 0.0}),
                          ("cells_with_reward_only", plans["cells_only"] | {"noise_multiplier": 1.1}),
                          ("nothing_planned", plans["cells_only"] | {"cells_noise_multiplier": 0.0}),
                          ("negative_cells", gaussian_plan | {"cells_noise_multiplier": -1.0}),
                          ("laplace_with_cells", plans["laplace"] | {"cells_noise_multiplier": 1.2})):
        try:
            DeclaredPlan.from_manifest(section)
            valid = True
        except ValueError:
            valid = False
        out["plan_validity"].append({"name": name, "plan": section, "valid": valid})
    return out


# ---------------------------------------------------------------------------------------------- features
def feature_vectors(days: np.ndarray, cells: np.ndarray, env) -> dict:
    from pategail.sdk.epr import explore_law_contribution
    from pategail.sdk.features import action_mask, infer_home, label_actions, pair_features, state_features
    from pategail.sdk.contribution import DAYS_CAP, initial_state_contribution
    from pategail.sdk.places import place_contribution
    from pategail.sdk.action_rates import action_rate_contribution

    home = infer_home(days)
    homes = np.full(len(days), home, dtype=np.int32)
    labels = label_actions(days, homes)
    used = sorted(set(days.ravel().tolist()))
    return {
        "source": "data/default, the first user's first days (cells: the bundle's cell table)",
        "days": days.tolist(), "home": home,
        "labels": labels.tolist(),
        "state_features": np.round(state_features(days, homes, cells).astype(np.float64), 9).tolist(),
        "pair_features": np.round(pair_features(days, homes, labels, cells).astype(np.float64), 9).tolist(),
        "action_mask": action_mask(days, homes).astype(int).tolist(),
        "prefix_rows": 17,
        "prefix_state_features": np.round(state_features(days[:, :17], homes, cells).astype(np.float64), 9).tolist(),
        "cells_used": used,
        "initial_state_contribution_nonzero": {str(i): v for i, v in enumerate(
            initial_state_contribution(days, home, len(cells)).tolist()) if v},
        "initial_state_contribution_days_cap_1000_nonzero": {str(i): v for i, v in enumerate(
            initial_state_contribution(days, home, len(cells), 1000).tolist()) if v},
        "explore_law_contribution": explore_law_contribution(days, home, cells, alpha=env.alpha,
                                                             candidates=env.candidates).tolist(),
        "place_contribution": place_contribution(days, home, len(cells), DAYS_CAP).tolist(),
        "action_rate_contribution": action_rate_contribution(days, home, DAYS_CAP).tolist(),
    }


# ---------------------------------------------------------------------------------------------- device round
def reference_round(bundle_dir: Path, days: np.ndarray, request: bytes, seed: int) -> dict:
    """The Python device's answer to ``request`` (its Ack, pending scores), and the same round recomputed from
    the SDK's public training API with the same rng — the losses a replaying trainer gives back."""
    from pategail.sdk.bundle import load_bundle, open_training_session
    from pategail.sdk.device import Device
    from pategail.sdk.features import N_PAIR_FEATURES, infer_home, label_actions, pair_features
    from pategail.sdk.messages import RoundRequest

    bundle = load_bundle(bundle_dir)
    cells = bundle.environment.cells
    with tempfile.TemporaryDirectory() as tmp:
        device = Device(Path(tmp) / "device", 1, rng=np.random.default_rng(seed))
        device.install_bundle(bundle_dir)
        device.add_days(days)
        ack = device.handle(request)
        pending = device.pending
    msg = RoundRequest.from_bytes(request)
    session = open_training_session(bundle)
    rng = np.random.default_rng(seed)
    homes = np.full(len(days), infer_home(days), dtype=np.int32)
    positives = pair_features(days, homes, label_actions(days, homes), cells).reshape(-1, N_PAIR_FEATURES)
    negatives = pair_features(msg.days, msg.homes, msg.actions, cells).reshape(-1, N_PAIR_FEATURES)
    n_pos = msg.batch_size // 2
    labels = np.concatenate([np.ones(n_pos, np.float32), np.zeros(msg.batch_size - n_pos, np.float32)])
    losses = []
    for _ in range(msg.k_steps):
        i = rng.integers(0, len(positives), n_pos)
        j = rng.integers(0, len(negatives), msg.batch_size - n_pos)
        losses.append(session.train_step(np.concatenate([positives[i], negatives[j]]), labels))
    _, prob = session.score(negatives)
    if not np.array_equal(np.clip(prob.astype(np.float64), 0, 1), pending):
        raise SystemExit("the recomputed round differs from the Python device's: the reference is not faithful")
    return {"runtime": __import__("onnxruntime").__version__,
            "rounds": [{"pairs": negatives.astype(np.float64).tolist(), "prob": prob.astype(np.float64).tolist(),
                        "losses": losses}],
            "ack": hx(ack), "seed": seed}


def artifact_vectors(bundle_dir: Path, days: np.ndarray, request: bytes, steps: int = 20, batch: int = 32) -> dict:
    """What ONNX Runtime's training core must reproduce (android-demo/artifact-check): ``steps`` AdamW steps of
    the bundle's training artifacts from its checkpoint on fixed batches (losses), the eval model's scores
    after them, and the inference models' outputs (discriminator and policy) on fixed inputs."""
    from pategail.sdk.bundle import load_bundle, open_policy_session, open_scoring_session, open_training_session
    from pategail.sdk.features import N_PAIR_FEATURES, action_mask, infer_home, label_actions, pair_features
    from pategail.sdk.generate import prefix_features
    from pategail.sdk.messages import RoundRequest

    bundle = load_bundle(bundle_dir)
    cells = bundle.environment.cells
    homes = np.full(len(days), infer_home(days), dtype=np.int32)
    msg = RoundRequest.from_bytes(request)
    table = np.concatenate([
        pair_features(days, homes, label_actions(days, homes), cells).reshape(-1, N_PAIR_FEATURES),
        pair_features(msg.days, msg.homes, msg.actions, cells).reshape(-1, N_PAIR_FEATURES)])
    n_real = len(days) * 47
    labels_all = (np.arange(len(table)) < n_real).astype(np.float32)
    rng = np.random.default_rng(3)
    session = open_training_session(bundle)
    batches, losses = [], []
    for _ in range(steps):
        idx = rng.integers(0, len(table), batch)
        batches.append(idx.tolist())
        losses.append(session.train_step(table[idx], labels_all[idx]))
    eval_idx = np.arange(0, len(table), 7)
    _, prob = session.score(table[eval_idx])
    logit0, prob0 = open_scoring_session(bundle).run(["logit", "prob"], {"pairs": table[eval_idx]})
    policy_cells = np.asarray(days[:2], dtype=np.int64)
    feats = prefix_features(days[:2], homes[:2], cells)
    mask = action_mask(days[:2], homes[:2])
    log_probs, logits, values = open_policy_session(bundle).run(["log_probs", "logits", "values"], {
        "cells": policy_cells, "features": feats, "mask": mask})
    f64 = lambda a: np.asarray(a, dtype=np.float64).ravel().tolist()  # noqa: E731
    return {"learning_rate": bundle.learning_rate, "pairs": f64(table), "n_pairs": len(table),
            "labels": labels_all.tolist(), "batches": batches, "losses": losses, "eval_rows": eval_idx.tolist(),
            "eval_prob": f64(prob), "inference_logit": f64(logit0), "inference_prob": f64(prob0),
            "policy_inputs": {"cells": policy_cells.ravel().tolist(), "features": f64(feats),
                              "mask": mask.astype(int).ravel().tolist(), "shape": list(policy_cells.shape)},
            "policy_log_probs": f64(log_probs), "policy_values": f64(values)}


def make_request(bundle_dir: Path, ds) -> bytes:
    from pategail.sdk.bundle import load_bundle, open_policy_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days
    from pategail.sdk.messages import RoundRequest

    bundle = load_bundle(bundle_dir)
    env = bundle.environment
    rng = np.random.default_rng(ROUND_SEED)
    geometry = CellGeometry.build(env.cells, env.candidates)
    users = ds.users[1:1 + N_GENERATED]
    homes = np.array([int(ds.user_days(u)[0, 0]) for u in users], dtype=np.int32)
    first = np.array([int(ds.user_days(u)[1, 0]) for u in users], dtype=np.int32)
    gen = generate_days(open_policy_session(bundle), geometry, homes, first, rng, alpha=env.alpha,
                        explore_factors=env.explore_factors)
    return RoundRequest(3, ROUND_K_STEPS, ROUND_BATCH, gen.days, homes, gen.actions).to_bytes()


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE, help="where to write the vectors (default: next to this script)")
    ap.add_argument("--bundle", action="store_true", help="export the bundle again (needs torch)")
    args = ap.parse_args(argv)
    if not DEFAULT_DATA.is_dir():
        print(f"error: {DEFAULT_DATA}: the embedded data set is missing", file=sys.stderr)
        return 2
    bundle_dir = HERE / "bundle"
    if not args.bundle and not (bundle_dir / "manifest.json").is_file():
        print(f"error: {bundle_dir}: no bundle; run with --bundle first", file=sys.stderr)
        return 2
    ds = load_data()
    if args.bundle:
        export_bundle(bundle_dir, ds)
    from pategail.sdk.bundle import load_bundle

    env = load_bundle(bundle_dir).environment
    args.out.mkdir(parents=True, exist_ok=True)
    days = ds.user_days(ds.users[0])[:N_USER_DAYS]
    request = make_request(bundle_dir, ds)
    write_json(args.out / "crypto.json", crypto_vectors())
    write_json(args.out / "messages.json", message_vectors(request))
    write_json(args.out / "features.json", feature_vectors(days, env.cells, env))
    write_json(args.out / "device.json", reference_round(bundle_dir, days, request, seed=11))
    write_json(args.out / "training.json", artifact_vectors(bundle_dir, days, request))
    write_json(args.out / "policy.json", policy_vectors())
    write_json(args.out / "net.json", net_vectors())
    sys.path.insert(0, str(HERE))
    from gaussian_vectors import gaussian_vectors

    write_json(args.out / "gaussian.json", gaussian_vectors(days, env.cells, env))
    from pld_vectors import pld_vectors

    write_json(args.out / "pld.json", pld_vectors())
    from cells_vectors import cells_vectors

    write_json(args.out / "cells.json", cells_vectors(bundle_dir, days, len(env.cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
