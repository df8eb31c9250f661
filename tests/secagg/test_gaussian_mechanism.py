"""The Gaussian mechanism on the secure aggregation: the distributed discrete Gaussian shares have the
intended law (goodness of fit with a power check), a protocol round releases the device-clipped vector plus
exactly that noise and no Σ D², the signed configuration carries the mechanism, and devices refuse rounds
below the declared plan's noise multiplier or of another mechanism."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from pategail.sdk.contribution import Granularity
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.fixedpoint import SCALE, encode_signed, gaussian_noise_bound
from pategail.sdk.secagg.ledger import PrivacyLedger, round_release
from pategail.sdk.secagg.mechanisms import gaussian_input, mechanism
from pategail.sdk.secagg.noise import discrete_gaussian, discrete_gaussian_share
from pategail.sdk.secagg.policy import DeclaredPlan, DevicePolicy
from pategail.sdk.accounting import GaussianRelease, gaussian_sensitivity
from pategail.server.secagg.round import SecureRoundConfig, enroll_clients, run_secure_round

STD_QUANTA = 48.0


def dgauss_pvalue(samples: np.ndarray, std: float, bins: int = 24) -> float:
    """Chi-square goodness of fit of integer samples to N_Z(0, std²), P(k) ∝ exp(−k²/(2 std²)), on about
    equiprobable integer bins."""
    grid = np.arange(-int(14 * std) - 2, int(14 * std) + 3)
    pmf = np.exp(-grid.astype(np.float64) ** 2 / (2 * std * std))
    cdf = np.cumsum(pmf / pmf.sum())
    cuts = np.unique(grid[np.searchsorted(cdf, np.arange(1, bins) / bins)])
    edges = np.concatenate([[0.0], cdf[np.searchsorted(grid, cuts)], [1.0]])
    observed = np.bincount(np.searchsorted(cuts, samples, side="left"), minlength=cuts.size + 1)
    return stats.chisquare(observed, np.diff(edges) * samples.size).pvalue


@pytest.mark.parametrize("std", [0.8, 3.0, 40.0])
def test_discrete_gaussian_sampler_has_the_intended_law(std):
    x = discrete_gaussian(std, 30_000)
    assert dgauss_pvalue(x, std) > 1e-4
    # the test has power: 12% more or less spread is rejected
    assert dgauss_pvalue(x, std * 1.12) < 1e-3 and dgauss_pvalue(x, std / 1.12) < 1e-3


@pytest.mark.parametrize("n_min", [1, 5, 30])
def test_n_min_shares_sum_to_the_intended_discrete_gaussian(n_min):
    total = sum(discrete_gaussian_share(STD_QUANTA, n_min, 20_000) for _ in range(n_min))
    assert dgauss_pvalue(total, STD_QUANTA) > 1e-4
    assert dgauss_pvalue(total, STD_QUANTA * 1.12) < 1e-3
    assert total.var() == pytest.approx(STD_QUANTA ** 2, rel=0.06)


def test_each_mechanism_draws_its_own_law_from_the_csprng():
    gauss, laplace = mechanism("gaussian"), mechanism("laplace")
    g, lap = gauss.noise_share(100.0, 1, 20_000), laplace.noise_share(100.0, 1, 20_000)
    assert g.std() == pytest.approx(100.0, rel=0.05) and lap.std() == pytest.approx(100 * math.sqrt(2), rel=0.05)
    assert stats.kurtosis(lap) > 2 > abs(stats.kurtosis(g))      # Laplace tails (excess kurtosis 3) vs Gaussian 0
    assert not np.array_equal(gauss.noise_share(100.0, 2, 100), gauss.noise_share(100.0, 2, 100))
    assert not gauss.noise_share(0.0, 3, 10).any()
    with pytest.raises(ValueError, match="unknown mechanism 'skellam'"):
        mechanism("skellam")


def test_the_device_centres_averages_blocks_and_clips_its_vector():
    days = 2
    scores = np.linspace(0, 1, 47 * days)
    cfg = SimpleNamespace(block=8, clip_norm=100.0)
    v = gaussian_input(scores, cfg)
    g = Granularity(8)
    assert v.shape == (days * g.blocks_per_day,) and g.blocks_per_day == 6
    assert v[0] == pytest.approx(np.mean(scores[:8]) - 0.5) and v[5] == pytest.approx(np.mean(scores[40:47]) - 0.5)
    clipped = gaussian_input(scores, SimpleNamespace(block=8, clip_norm=0.3))
    assert np.linalg.norm(clipped) == pytest.approx(0.3) and np.allclose(clipped / 0.3, v / np.linalg.norm(v))
    day = gaussian_input(scores, SimpleNamespace(block=47, clip_norm=10.0))
    assert day == pytest.approx([np.mean(scores[:47]) - 0.5, np.mean(scores[47:]) - 0.5])
    env = gaussian_input(np.array([0.2, 3.0, -1.0]), SimpleNamespace(block=0, clip_norm=5.0))
    assert env == pytest.approx([0.2, 1.0, 0.0])                  # as it is, clipped to [0, 1]


def test_a_gaussian_round_releases_the_vector_plus_the_intended_noise_and_no_square_sums():
    from pategail.server.secagg.coordinator import SecAggCoordinator

    rng = np.random.default_rng(3)
    coordinator = SecAggCoordinator()
    clients = enroll_clients(coordinator, [1, 2, 3, 4, 5])
    noise, m = [], 1024
    for round_id in range(5):
        values = rng.random((5, m))
        cfg = SecureRoundConfig(round_id, n_min=4, sum_noise_scale=STD_QUANTA / SCALE, mechanism="gaussian",
                                clip_norm=math.sqrt(m))
        res = run_secure_round(clients, values, cfg, rng, coordinator=coordinator)
        assert not res.sq_sum.any()                              # no Σ D² in this mechanism
        exact = encode_signed(values).sum(0)
        noise.append(np.rint(res.sum * SCALE).astype(np.int64) - exact)
    noise = np.concatenate(noise)
    # 5 survivors of shares sized for n_min = 4: total variance 5/4 of the target (more noise, never less)
    std = STD_QUANTA * math.sqrt(5 / 4)
    assert dgauss_pvalue(noise, std) > 1e-4 and dgauss_pvalue(noise, std * 1.12) < 1e-3


def _config(**kw) -> RoundConfig:
    args = dict(round_id=7, participants=(1, 2, 3), num_queries=96, n_min=3, threshold=2, degree=0,
                sum_noise_scale=2.0, sq_sum_noise_scale=0.0, round_seed=b"s" * 32, envelope_public=b"e" * 32,
                mechanism="gaussian", block=47, clip_norm=3.0) | kw
    return RoundConfig(**args)


def test_the_signed_configuration_carries_the_mechanism_and_laplace_bytes_are_unchanged():
    from pategail.sdk.secagg.crypto import DeviceIdentity

    ident = DeviceIdentity.generate()
    cfg = _config()
    back = RoundConfig.from_signed_bytes(cfg.to_signed_bytes(ident.sign), ident.signing_public)
    assert back == cfg and back.digest == cfg.digest
    laplace = _config(mechanism="laplace", block=0, clip_norm=0.0, sq_sum_noise_scale=2.0)
    assert len(cfg.body()) == len(laplace.body()) + 10           # the trailer: tag, block, clip norm
    assert RoundConfig.from_signed_bytes(laplace.to_signed_bytes(ident.sign), ident.signing_public) == laplace
    for bad in (dict(sq_sum_noise_scale=1.0), dict(clip_norm=0.0), dict(block=48), dict(mechanism="x")):
        with pytest.raises(ValueError):
            _config(**bad)


def test_ledger_and_policy_account_and_check_gaussian_rounds(tmp_path):
    cfg = _config()
    release = round_release(cfg)
    assert release == GaussianRelease(2.0, gaussian_sensitivity(3.0, 96), 1, 3)
    ledger = PrivacyLedger(tmp_path / "ledger.json", target_epsilon=10.0)
    ledger.check(cfg)                                                  # one round: ε ≈ 7.6 at z = 2/3
    ledger.record(cfg)
    again = PrivacyLedger(tmp_path / "ledger.json", target_epsilon=10.0)
    assert again.releases == (release,)
    with pytest.raises(RoundRefused, match="budget"):                  # a second: past 10
        again.check(cfg)
    z = 2.0 / gaussian_sensitivity(3.0, 96)
    plan = DeclaredPlan(5.0, 1e-5, 0.0, 0.0, 0.5, 0, "gaussian", z, z)
    plan.policy().check(cfg)                                                   # at the plan's noise: accepted
    for bad, why in ((_config(clip_norm=3.5), "noise multiplier"), (_config(sum_noise_scale=1.9), "noise multiplier"),
                     (_config(mechanism="laplace", block=0, clip_norm=0.0, sq_sum_noise_scale=9.0), "mechanism")):
        with pytest.raises(RoundRefused, match=why):
            plan.policy().check(bad)
    with pytest.raises(RoundRefused, match="mechanism"):                       # a Laplace plan: no Gaussian round
        DevicePolicy(mechanism="laplace").check(cfg)
    assert DeclaredPlan.from_manifest(plan.to_manifest()) == plan


def test_wrap_bound_of_gaussian_sums():
    # the sum of n shares of N_Z(0, s²/d) is (n s²/d)-subgaussian: the bound at 2^-64
    t = gaussian_noise_bound(10, 1000.0, 5)
    assert t == pytest.approx(math.sqrt(2 * 2 * 1000.0 ** 2 * 65 * math.log(2)))
