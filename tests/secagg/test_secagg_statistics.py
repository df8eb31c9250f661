"""Statistical checks: the released noise has the intended discrete Laplace law; an upload looks uniform."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pategail.sdk.secagg.fixedpoint import SCALE, encode
from pategail.sdk.secagg.messages import MaskedInput
from pategail.sdk.secagg.noise import discrete_laplace_share
from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

SCALE_QUANTA = 64.0


@pytest.fixture(scope="module")
def released_noise():
    """Total noise (released sum - exact sum) of 6 protocol rounds of 4 devices, n_min = 4, M = 1024."""
    from pategail.server.secagg.coordinator import SecAggCoordinator
    from pategail.server.secagg.round import enroll_clients

    rng = np.random.default_rng(5)
    coordinator = SecAggCoordinator()
    clients = enroll_clients(coordinator, [1, 2, 3, 4])
    noise = []
    for round_id in range(6):
        values = rng.random((4, 1024))
        cfg = SecureRoundConfig(round_id, n_min=4, sum_noise_scale=SCALE_QUANTA / SCALE,
                                sq_sum_noise_scale=SCALE_QUANTA / SCALE)
        res = run_secure_round(clients, values, cfg, rng, coordinator=coordinator)
        exact = np.concatenate([encode(values).sum(0), encode(values ** 2).sum(0)])
        noise.append(np.rint(np.concatenate([res.sum, res.sq_sum]) * SCALE).astype(np.int64) - exact)
    return np.concatenate(noise)


def test_released_noise_is_discrete_laplace_of_the_intended_scale(released_noise, dlap_gof):
    assert released_noise.size == 6 * 2048
    assert dlap_gof(released_noise, SCALE_QUANTA) > 1e-4
    # the test has power: 15% more or less noise is rejected
    assert dlap_gof(released_noise, SCALE_QUANTA * 1.15) < 1e-3
    assert dlap_gof(released_noise, SCALE_QUANTA / 1.15) < 1e-3
    var = 2 * np.exp(-1 / SCALE_QUANTA) / (1 - np.exp(-1 / SCALE_QUANTA)) ** 2
    assert released_noise.var() == pytest.approx(var, rel=0.1)


@pytest.mark.parametrize("n_min, scale", [(1, 5.0), (7, 5.0), (50, 300.0), (3, 2.0**40)])
def test_n_min_shares_sum_to_discrete_laplace(n_min, scale, dlap_gof):
    total = sum(discrete_laplace_share(scale, n_min, 20_000) for _ in range(n_min))
    if scale < 1e6:
        assert dlap_gof(total, scale) > 1e-4
    var = 2 * np.exp(-1 / scale) / (-np.expm1(-1 / scale)) ** 2
    assert total.var() == pytest.approx(var, rel=0.06)
    assert np.mean(total) == pytest.approx(0, abs=6 * np.sqrt(var / total.size))


def test_noise_comes_fresh_from_the_csprng():
    a, b = discrete_laplace_share(100.0, 2, 1000), discrete_laplace_share(100.0, 2, 1000)
    assert not np.array_equal(a, b)
    np.random.seed(0)  # a global numpy seed must have no influence
    c = discrete_laplace_share(100.0, 2, 1000)
    np.random.seed(0)
    assert not np.array_equal(c, discrete_laplace_share(100.0, 2, 1000))


def test_masked_upload_is_indistinguishable_from_uniform_bytes(federation, rng):
    captured = {}

    def adversary(phase, agg, replies):
        if phase == "input":
            device = min(replies)
            captured["vector"] = MaskedInput.decode(replies[device], agg._dir).vector

    coordinator, clients, _ = federation(5)
    values = np.full((5, 4096), 0.5)  # a maximally regular plaintext
    run_secure_round(clients, values, SecureRoundConfig(1, n_min=3), rng, coordinator=coordinator,
                     adversary=adversary)
    data = captured["vector"][:-1]  # the 2M data words (the last word is an element of Z_p, p < 2^61)
    raw = np.frombuffer(data.astype("<u8").tobytes(), dtype=np.uint8)
    assert stats.chisquare(np.bincount(raw, minlength=256)).pvalue > 1e-4
    top = raw.reshape(-1, 8)[:, 7]  # the most significant byte of every word separately
    assert stats.chisquare(np.bincount(top, minlength=256)).pvalue > 1e-4
    # the same test on the unmasked encoding fails, so it can tell
    plain = np.frombuffer(np.concatenate([encode(values[0]), encode(values[0] ** 2)]).tobytes(), dtype=np.uint8)
    assert stats.chisquare(np.bincount(plain, minlength=256)).pvalue < 1e-6
