"""The PLD accountant's vectors (pld.json), written by generate.py from dp-accounting as the Python SDK uses it:
single Laplace privacy-loss distributions (connect-the-dots at the ledger's grid and the accountant's default),
Laplace-only release lists with the ε the SDK composes them to (its ``composed_epsilon`` on the ledger's grid)
and the shape of the composed distribution, and a Laplace plan calibrated to its target run round by round
through the SDK's ledger until the budget refuses a round (and the request before it)."""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np

LAPLACE_SCALES = (0.5, 1.0, 3.3, 20.0, 700.0)
LARGE_COUNT = 279_164
"""Reward queries of the GeoLife Laplace plan at ε = 8 (the largest composition a device's ledger makes)."""
LARGE_SCALE = 415.0
"""A per-query scale at which LARGE_COUNT queries of Σ D and Σ D² compose to about ε = 8 (κ = 2)."""


def _pmf(releases, interval):
    from pategail.sdk.accounting import _cached_accountant

    # the accountant's composed distribution (the SDK keeps the composition for its ε and δ below)
    return _cached_accountant(tuple(releases), float(interval))._pld._pmf_remove


def laplace_vectors() -> list:
    """from_laplace_mechanism(b) at two grids: its support, a sample of its probabilities, δ(ε) and ε(δ)."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    from pategail.sdk.secagg.ledger import LEDGER_INTERVAL

    out = []
    for interval in (LEDGER_INTERVAL, 1e-4):
        for b in LAPLACE_SCALES:
            pmf = privacy_loss_distribution.from_laplace_mechanism(
                b, value_discretization_interval=interval)._pmf_remove
            dense = pmf.to_dense_pmf()
            probs = [float(p) for p in dense._probs]
            picks = sorted({0, 1, len(probs) // 3, len(probs) // 2, len(probs) - 2, len(probs) - 1})
            out.append({"scale": b, "interval": interval, "sparse": isinstance(pmf, pld_pmf.SparsePLDPmf),
                        "lower": int(dense._lower_loss), "size": len(probs), "infinity": float(dense._infinity_mass),
                        "sum": math.fsum(probs), "picks": [[i, probs[i]] for i in picks if 0 <= i < len(probs)],
                        "delta_for_epsilon": [[e, float(pmf.get_delta_for_epsilon(e))]
                                              for e in (0.0, 0.3 / b, 0.9 / b)],
                        "epsilon_for_delta": [[d, float(pmf.get_epsilon_for_delta(d))]
                                              for d in (1e-5, 1e-3, 0.1)]})
    return out


def _release_lists() -> dict:
    from pategail.sdk.accounting import QueryRelease, laplace_vector_release, laplace_vector_sensitivity

    env = laplace_vector_release(337.0, 337.0, laplace_vector_sensitivity(9.0, 300))
    return {
        **{f"one_query_b{b:g}": [QueryRelease(b, None, 1)] for b in (0.3, 1.0, 5.0, 40.0)},
        "one_query_both_sums": [QueryRelease(2.0, 2.0, 1)],
        "sparse_three_fold": [QueryRelease(1000.0, None, 3)],       # 9 points: composed in the sparse form
        "sparse_then_dense": [QueryRelease(1000.0, 1000.0, 2)],
        **{f"count_{n}": [QueryRelease(5.0, 5.0, n)] for n in (2, 3, 10, 100, 1000)},
        "count_10000": [QueryRelease(50.0, 50.0, 10_000)],
        "count_99_and_100": [QueryRelease(30.0, None, 99), QueryRelease(31.0, None, 100)],
        "mixed_scales": [env, QueryRelease(40.0, 40.0, 940), QueryRelease(55.0, 20.0, 94)],
        "plan_279164_queries": [QueryRelease(LARGE_SCALE, LARGE_SCALE, LARGE_COUNT)],
        "plan_279164_with_environment": [env, QueryRelease(LARGE_SCALE, LARGE_SCALE, LARGE_COUNT - 1)],
    }


def _power_of_two_accountant(releases, interval: float):
    """The same composition with every FFT of dp-accounting at a power-of-two length instead of its 5-smooth
    one (what the Java core does): how far dp-accounting's own figures move with its FFT's rounding."""
    from scipy import fft

    from pategail.sdk.accounting import _pld

    with mock.patch.object(fft, "next_fast_len", lambda n, *a, **k: 1 << (int(n) - 1).bit_length()):
        return _pld(releases, interval)


class _LibmNumpy:
    """numpy, but with the C library's exp and log (what numpy itself uses on a CPU without AVX-512F; with it,
    its own SIMD exp differs from the C library's in the last bit for ~5% of arguments)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def exp(x):
        return np.vectorize(lambda v: math.exp(v) if v < 709 else math.inf, otypes=[float])(x)

    @staticmethod
    def log(x):
        return np.vectorize(lambda v: math.log(v) if v > 0 else -math.inf, otypes=[float])(x)


def _libm_accountant(releases, interval: float):
    """The same composition with the Laplace mechanism's δ(ε) evaluated with the C library's exp and log
    (scipy's Laplace CDF and dp-accounting's formula, as on a CPU without AVX-512F): how far dp-accounting's
    own figures move with the last bit of its inputs."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from pategail.sdk.accounting import _pld

    libm = _LibmNumpy()

    def cdf(self, x):
        y = np.asarray(x, dtype=float) / self.parameter
        return np.where(y > 0, 1.0 - 0.5 * libm.exp(-np.maximum(y, 0)), 0.5 * libm.exp(np.minimum(y, 0)))

    def log_cdf(self, x):
        return libm.log(cdf(self, x))

    with mock.patch.object(plm, "np", libm), mock.patch.object(plm.LaplacePrivacyLoss, "noise_cdf", cdf), \
            mock.patch.object(plm.LaplacePrivacyLoss, "noise_log_cdf", log_cdf):
        return _pld(releases, interval)


def composition_vectors() -> list:
    """Each release list: ε at two δ (the SDK's composed_epsilon on the ledger's grid) and δ at two ε (each
    also with dp-accounting's FFTs at power-of-two lengths, and with the C library's exp and log), and the
    composed distribution's support (first loss, number of points) and mass at +∞."""
    from pategail.sdk.accounting import composed_delta, composed_epsilon, release_to_dict
    from pategail.sdk.secagg.ledger import LEDGER_INTERVAL

    out = []
    for name, releases in _release_lists().items():
        pmf = _pmf(releases, LEDGER_INTERVAL).to_dense_pmf()
        eps = composed_epsilon(releases, 1e-5, LEDGER_INTERVAL)
        pow2 = _power_of_two_accountant(releases, LEDGER_INTERVAL)
        libm = _libm_accountant(releases, LEDGER_INTERVAL)
        out.append({"name": name, "releases": [release_to_dict(r) for r in releases],
                    "epsilon": {str(d): composed_epsilon(releases, d, LEDGER_INTERVAL) for d in (1e-5, 1e-7)},
                    "epsilon_power_of_two_fft": {str(d): float(pow2.get_epsilon(d)) for d in (1e-5, 1e-7)},
                    "epsilon_libm": {str(d): float(libm.get_epsilon(d)) for d in (1e-5, 1e-7)},
                    "delta": [[e, composed_delta(releases, e, LEDGER_INTERVAL), float(pow2.get_delta(e)),
                               float(libm.get_delta(e))] for e in (0.5 * eps, eps)],
                    "lower": int(pmf._lower_loss), "size": int(pmf.size), "infinity": float(pmf._infinity_mass)})
    return out


def budget_run(coordinator) -> dict:
    """A Laplace plan calibrated to ε = 2 (an environment release, ten rounds of 94 reward queries and one in
    reserve), declared as a bundle declares it; then the environment round and reward rounds at the plan's
    noise through the SDK's ledger, with the SDK's request and round decisions, until it refuses one."""
    from pategail.server.privacy.plan import plan_privacy
    from pategail.sdk.budget import check_request_budget
    from pategail.sdk.contribution import ENV_L1_BOUND
    from pategail.sdk.messages import MessageError
    from pategail.sdk.secagg.errors import RoundRefused
    from pategail.sdk.secagg.ledger import PrivacyLedger

    from gaussian_vectors import _config, hx

    queries, env_values = 94, 300
    plan = plan_privacy(2.0, 1e-5, 2.0, 1 + 10 * queries, reserve_queries=queries, env_values=env_values,
                        env_fraction=0.1)
    declared = plan.scheme.declare(plan, 0.6, 1)
    steps = [_config(round_id=1, mechanism="laplace", block=0, clip_norm=0.0, num_queries=env_values,
                     sum_noise_scale=plan.env_sum_noise_scale, sq_sum_noise_scale=plan.env_sum_noise_scale)]
    steps += [_config(round_id=r, mechanism="laplace", block=0, clip_norm=0.0, num_queries=queries,
                      sum_noise_scale=plan.sum_noise_scale, sq_sum_noise_scale=plan.sq_sum_noise_scale)
              for r in range(2, 15)]
    decisions = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ledger = PrivacyLedger(root / "privacy-ledger.json", declared.target_epsilon, declared.target_delta)
        for cfg in steps:
            environment = cfg.round_id == 1
            entry = {"round": cfg.round_id, "config": hx(cfg.to_signed_bytes(coordinator.sign)),
                     "environment": environment, "values": cfg.num_queries}
            try:
                check_request_budget(root, declared, cfg.round_id, cfg.num_queries, environment)
                entry["request_refused"] = None
            except MessageError as err:
                entry["request_refused"] = str(err)
            try:
                ledger.check(cfg, environment, ENV_L1_BOUND)
                entry["round_refused"] = None
                ledger.record(cfg, environment, ENV_L1_BOUND)
            except RoundRefused as err:
                entry["round_refused"] = str(err)
            entry["epsilon_after"] = ledger.epsilon()
            decisions.append(entry)
            if entry["round_refused"]:
                break
        ledger_file = json.loads((root / "privacy-ledger.json").read_text())
    return {"plan": declared.to_manifest(), "expected_epsilon": plan.expected_epsilon, "env_l1_bound": ENV_L1_BOUND,
            "decisions": decisions, "ledger_file": ledger_file}


def pld_vectors() -> dict:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gaussian_vectors import _key, hx
    from pategail.sdk.secagg.ledger import LEDGER_INTERVAL

    coordinator = Ed25519PrivateKey.from_private_bytes(_key(0))
    out = {"interval": LEDGER_INTERVAL, "coordinator_public": hx(coordinator.public_key().public_bytes_raw()),
           "laplace": laplace_vectors(), "compositions": composition_vectors(), "budget_run": budget_run(coordinator)}
    refused = [d for d in out["budget_run"]["decisions"] if d["round_refused"]]
    assert len(refused) == 1 and refused[0]["round"] > 2, "the budget run must refuse exactly its last round"
    return out
