"""The Gaussian mechanism's vectors (gaussian.json), written by generate.py from the Python SDK: signed
Gaussian round configurations (and ones the SDK rejects), what a device uploads from its pending vector
(clipping, block means, the L2 clip, the fixed point), the noise bounds a configuration is checked against,
the regions of the bundle's cell table and an environment vector with region sums, and the privacy ledger:
release lists with the ε the SDK composes them to, a ledger file the SDK wrote, and the SDK's budget
decisions on rounds and requests."""
from __future__ import annotations

import json
import math
import struct
import tempfile
from pathlib import Path

import numpy as np


def hx(b: bytes) -> str:
    return bytes(b).hex()


def _key(i: int) -> bytes:
    return bytes((i * 37 + j * 11) % 256 for j in range(32))


def _config(**kw):
    from pategail.sdk.secagg.config import RoundConfig

    fields = dict(round_id=7, participants=(3, 5, 8, 11, 13), num_queries=94, n_min=4, threshold=4, degree=0,
                  sum_noise_scale=0.75, sq_sum_noise_scale=0.0, round_seed=_key(1), envelope_public=_key(2),
                  colluders=1, checksum_commitment=_key(3), mechanism="gaussian", block=0, clip_norm=1.5)
    fields.update(kw)
    return RoundConfig(**fields)


def config_vectors(coordinator) -> dict:
    """Signed configurations of each kind of Gaussian round, the Laplace one for contrast, and bodies the SDK
    rejects (an unknown mechanism tag, a clip norm above √M, a block of 50, a Σ D² scale, a short trailer)."""
    from pategail.sdk.secagg.config import KIND_CONFIG, RoundConfig
    from pategail.sdk.secagg.mechanisms import DELTA_BLOCK
    from pategail.sdk.secagg.errors import MessageRejected
    from pategail.sdk.secagg.wire import frame

    accepted = []
    for name, cfg in (("environment", _config(num_queries=300, clip_norm=3.0, sum_noise_scale=12.5)),
                      ("pair", _config(block=1)), ("block3", _config(block=3, num_queries=32, clip_norm=2.0)),
                      ("day", _config(block=47, num_queries=2, clip_norm=0.5)),
                      ("delta", _config(block=DELTA_BLOCK, num_queries=20, clip_norm=1.0, sum_noise_scale=0.01)),
                      ("no_noise", _config(sum_noise_scale=0.0)),
                      ("laplace", _config(mechanism="laplace", block=0, clip_norm=0.0, sq_sum_noise_scale=2.0))):
        accepted.append({"name": name, "config": hx(cfg.to_signed_bytes(coordinator.sign)), "body": hx(cfg.body()),
                         "digest": hx(cfg.digest), "mechanism": cfg.mechanism, "block": cfg.block,
                         "clip_norm": cfg.clip_norm, "num_queries": cfg.num_queries,
                         "sum_noise_scale": cfg.sum_noise_scale, "noise_divisor": cfg.noise_divisor})
    head = _config().body()[:-10]             # the body up to the trailer (tag u8, block u8, clip_norm f64)
    rejected = {"unknown_mechanism": head + struct.pack(">BBd", 2, 0, 1.5),
                "clip_norm_above_sqrt_m": head + struct.pack(">BBd", 1, 0, 9.8),
                "block_50": head + struct.pack(">BBd", 1, 50, 1.5),
                "short_trailer": head + struct.pack(">BB", 1, 0),
                "sq_sum_scale": _config(mechanism="laplace", block=0, clip_norm=0.0, sq_sum_noise_scale=2.0).body()
                + struct.pack(">BBd", 1, 0, 1.5)}
    out = []
    for name, body in rejected.items():
        signed = frame(KIND_CONFIG, body, coordinator.sign)
        try:
            RoundConfig.from_signed_bytes(signed, bytes(coordinator.public_key().public_bytes_raw()))
        except MessageRejected:
            out.append({"name": name, "config": hx(signed)})
        else:
            raise SystemExit(f"gaussian vector {name}: the SDK accepts it")
    return {"accepted": accepted, "rejected": out}


def input_vectors() -> list:
    """What a device uploads in a Gaussian round from its pending vector (gaussian_input, then the fixed point)."""
    from pategail.sdk.secagg.fixedpoint import encode_signed
    from pategail.sdk.secagg.mechanisms import DELTA_BLOCK, GAUSSIAN, gaussian_input

    rng = np.random.default_rng(5)
    cases = []
    for block, m, clip, pending, signed in ((0, 40, 6.0, 40, False), (0, 40, 1.5, 40, False),
                                           (1, 94, 2.0, 94, False), (3, 32, 0.7, 94, False),
                                           (47, 2, 0.05, 94, False), (5, 20, 4.0, 94, False),
                                           (DELTA_BLOCK, 30, 1.0, 30, True), (DELTA_BLOCK, 30, 5.0, 30, True)):
        values = rng.uniform(-0.3 if signed else -0.1, 1.2, pending)
        if signed:
            values = values * 2 - 1
        cfg = _config(block=block, num_queries=m, clip_norm=clip)
        out = gaussian_input(values, cfg)
        cases.append({"block": block, "num_queries": m, "clip_norm": clip, "values": values.tolist(),
                      "input_length": GAUSSIAN.input_length(cfg, pending), "released": out.tolist(),
                      "quanta": encode_signed(out).tolist()})
    return cases


def noise_bound_vectors() -> list:
    from pategail.sdk.secagg.fixedpoint import gaussian_noise_bound

    return [{"n": n, "std_quanta": s, "divisor": d, "bound": gaussian_noise_bound(n, s, d)}
            for n, s, d in ((5, 1.0, 4), (100, 2.0**24 * 3.7, 70), (100_000, 2.0**40, 1), (12, 2.0**30, 9))]


def region_vectors(days: np.ndarray, cells: np.ndarray, env) -> dict:
    """The regions of the bundle's cell table at several sizes, and the device's environment vector with region
    sums (and the action-rate part when the bundle declares it)."""
    from pategail.sdk.environment_vector import environment_vector
    from pategail.sdk.features import infer_home
    from pategail.sdk.regions import region_map

    home = infer_home(days)
    vector = environment_vector(days, home, cells, env.alpha, env.candidates, 16, env.action_rates)
    return {"maps": {str(k): region_map(cells, k).tolist() for k in (64, 16, 5, 1)},
            "home": home, "region_cells": 16, "environment_vector": vector.tolist()}


def _releases():
    from pategail.sdk.accounting import GaussianRelease, QueryRelease

    return {
        "gaussian": [GaussianRelease(2.5, 1.0, 1, 4), GaussianRelease(1.1, 1.0, 3)],
        "gaussian_small_shares": [GaussianRelease(3e-7, 1e-7, 2, 9)],       # τ matters: shares of ~2 quanta
        "mixed": [QueryRelease(0.4, None, 1), QueryRelease(30.0, 40.0, 94), GaussianRelease(0.8, 0.5, 2, 3)],
        "laplace_only": [QueryRelease(0.4, None, 1), QueryRelease(30.0, 40.0, 94)],
        "many_rounds": [GaussianRelease(4.0, 1.0000001, 1, 7), GaussianRelease(1.3, 2.0, 40, 7)],
    }


def ledger_vectors(coordinator) -> dict:
    """Release lists and their ε (the SDK's composed_epsilon; for Laplace-only lists also dp-accounting's RDP
    figure, the bound the Java core reports), a ledger file written by the SDK, and the SDK's budget decisions."""
    from dp_accounting.rdp import rdp_privacy_accountant

    from pategail.sdk.accounting import composed_epsilon, release_to_dict, to_dp_event
    from pategail.sdk.budget import check_request_budget
    from pategail.sdk.messages import MessageError
    from pategail.sdk.secagg.errors import RoundRefused
    from pategail.sdk.secagg.ledger import PLAN_INTERVAL, PrivacyLedger, round_release
    from pategail.sdk.secagg.policy import DeclaredPlan

    compositions = []
    for name, releases in _releases().items():
        for delta in (1e-5, 1e-7):
            acc = rdp_privacy_accountant.RdpAccountant()
            acc.compose(to_dp_event(releases))
            compositions.append({"name": name, "delta": delta, "releases": [release_to_dict(r) for r in releases],
                                 "epsilon": composed_epsilon(releases, delta, PLAN_INTERVAL),
                                 "rdp_epsilon": float(acc.get_epsilon(delta))})
    rounds = []
    for name, cfg, environment, l1 in (
            ("gaussian_reward", _config(block=3, num_queries=32, clip_norm=2.0), False, 9.0),
            ("gaussian_environment", _config(num_queries=300, clip_norm=3.0, sum_noise_scale=12.5), True, 10.0),
            ("laplace_reward", _config(mechanism="laplace", block=0, clip_norm=0.0, sq_sum_noise_scale=2.0), False,
             9.0),
            ("laplace_environment", _config(mechanism="laplace", block=0, clip_norm=0.0, sum_noise_scale=30.0,
                                            sq_sum_noise_scale=25.0, num_queries=300), True, 10.0),
            ("gaussian_no_noise", _config(sum_noise_scale=0.0), False, 9.0)):
        release = round_release(cfg, environment, l1)
        rounds.append({"name": name, "config": hx(cfg.to_signed_bytes(coordinator.sign)), "environment": environment, "env_l1_bound": l1,
                       "release": None if release is None else release_to_dict(release)})
    plan = DeclaredPlan(3.0, 1e-5, 0.0, 0.0, 0.6, colluders=1, mechanism="gaussian", noise_multiplier=2.0,
                        env_noise_multiplier=4.0)
    decisions = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ledger = PrivacyLedger(root / "privacy-ledger.json", plan.target_epsilon, plan.target_delta)
        # an environment round, then reward rounds until the budget refuses one (and the request before it)
        env_cfg = _config(round_id=1, num_queries=300, clip_norm=3.0, sum_noise_scale=12.01)
        steps = [("round", env_cfg, True)] + [
            ("round", _config(round_id=r, block=3, num_queries=32, clip_norm=2.0, sum_noise_scale=4.0), False)
            for r in range(2, 8)]
        for kind, cfg, environment in steps:
            entry = {"round": cfg.round_id, "config": hx(cfg.to_signed_bytes(coordinator.sign)),
                     "environment": environment, "values": 300 if environment else 94,
                     "ledger_before": json.loads((root / "privacy-ledger.json").read_text())
                     if (root / "privacy-ledger.json").exists() else None}
            try:
                check_request_budget(root, plan, cfg.round_id, entry["values"], environment)
                entry["request_refused"] = None
            except MessageError as err:
                entry["request_refused"] = str(err)
            try:
                ledger.check(cfg, environment, 10.0)
                entry["round_refused"] = None
                ledger.record(cfg, environment, 10.0)
            except RoundRefused as err:
                entry["round_refused"] = str(err)
            entry["epsilon_after"] = ledger.epsilon()
            decisions.append(entry)
        ledger_file = (root / "privacy-ledger.json").read_text()
    return {"compositions": compositions, "rounds": rounds, "plan": plan.to_manifest(), "decisions": decisions,
            "ledger_file": ledger_file}


def message_vectors() -> dict:
    """An InitialStatesRequest with region sums (its 4-byte trailer), and one whose trailer is 0 (malformed)."""
    from pategail.sdk.messages import InitialStatesRequest

    plain = InitialStatesRequest(5).to_bytes()
    zero = bytearray(plain[:6] + struct.pack(">I", 12) + plain[10:] + bytes(4))
    return {"initial_states_regions": hx(InitialStatesRequest(5, region_cells=16).to_bytes()),
            "initial_states_plain": hx(plain), "initial_states_trailer_zero": hx(bytes(zero))}


def gaussian_vectors(days: np.ndarray, cells: np.ndarray, env) -> dict:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    coordinator = Ed25519PrivateKey.from_private_bytes(_key(0))
    out = {"coordinator_public": hx(coordinator.public_key().public_bytes_raw()),
           "configs": config_vectors(coordinator), "inputs": input_vectors(), "noise_bounds": noise_bound_vectors(),
           "regions": region_vectors(days, cells, env), "ledger": ledger_vectors(coordinator),
           "messages": message_vectors()}
    assert math.isfinite(out["ledger"]["decisions"][-1]["epsilon_after"])
    return out
