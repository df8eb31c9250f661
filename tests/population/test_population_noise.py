"""The population fleet's released noise has the law the accountant assumes: the sum of the contributors'
shares of the SDK's distributed discrete Laplace — exactly DLap(scale) when as many devices contribute as the
shares are sized for (n_min − colluders), (S / d) times its variance when S > d. Goodness of fit with a power
check: 15% more or less noise is rejected."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.population.fleet import PopulationFleet
from pategail.population.ideal import distributed_noise
from pategail.population.resample import resample_population
from pategail.sdk.messages import InitialStatesRequest, to_bytes
from pategail.sdk.secagg.fixedpoint import SCALE
from pategail.server.secagg.config import SecureRoundConfig

SCALE_QUANTA = 64.0
N_DEVICES = 10


def dlap_var(scale: float) -> float:
    q = np.exp(-1 / scale)
    return 2 * q / (1 - q) ** 2


@pytest.fixture(scope="module")
def fleet(dataset, run_bundle):
    fleet = PopulationFleet(dataset, resample_population(dataset.users, N_DEVICES, seed=1), run_bundle, seed=1)
    for i in fleet.device_ids:
        fleet.request(i, to_bytes(InitialStatesRequest(0)))
    return fleet


def released_noise(fleet, n_min: int, colluders: int, rounds: int) -> np.ndarray:
    """(released − exact) in quanta, Σ and Σ² slots, over ``rounds`` secure sums of the pending vectors."""
    m = fleet._length
    exact = fleet.secure_sum(list(fleet.device_ids), SecureRoundConfig(0, n_min), None, np.random.default_rng(0), m)
    noisy = SecureRoundConfig(1, n_min, SCALE_QUANTA / SCALE, SCALE_QUANTA / SCALE, colluders=colluders)
    out = []
    for _ in range(rounds):
        r = fleet.secure_sum(list(fleet.device_ids), noisy, None, np.random.default_rng(0), m)
        out.append(np.rint((np.concatenate([r.sum - exact.sum, r.sq_sum - exact.sq_sum])) * SCALE).astype(np.int64))
    return np.concatenate(out)


def test_noise_of_n_min_contributors_is_discrete_laplace(fleet, dlap_gof):
    noise = released_noise(fleet, n_min=N_DEVICES, colluders=0, rounds=1)
    assert noise.size > 20_000
    assert dlap_gof(noise, SCALE_QUANTA) > 1e-4
    assert dlap_gof(noise, SCALE_QUANTA * 1.15) < 1e-3              # power: 15% too much noise is rejected
    assert dlap_gof(noise, SCALE_QUANTA / 1.15) < 1e-3              # and 15% too little
    assert noise.var() == pytest.approx(dlap_var(SCALE_QUANTA), rel=0.05)
    assert abs(noise.mean()) < 6 * np.sqrt(dlap_var(SCALE_QUANTA) / noise.size)


def test_more_contributors_than_the_shares_are_sized_for_add_more_noise(fleet, dlap_gof):
    """n_min 8 with 2 colluders: shares sized for 6 devices, 10 contribute: 10/6 of DLap's variance."""
    noise = released_noise(fleet, n_min=8, colluders=2, rounds=1)
    assert noise.var() == pytest.approx(10 / 6 * dlap_var(SCALE_QUANTA), rel=0.05)
    assert dlap_gof(noise, SCALE_QUANTA) < 1e-3


@pytest.mark.parametrize("contributors, divisor", [(7, 7), (10, 3), (5, 8)])
def test_distributed_noise_is_the_sum_of_the_devices_shares(contributors, divisor):
    """One draw of the total has the law of ``contributors`` separate shares of divisor ``divisor``."""
    from scipy import stats

    from pategail.sdk.secagg.noise import discrete_laplace_share
    ours = distributed_noise(SCALE_QUANTA, divisor, contributors, 20_000)
    theirs = sum(discrete_laplace_share(SCALE_QUANTA, divisor, 20_000) for _ in range(contributors))
    assert ours.var() == pytest.approx(contributors / divisor * dlap_var(SCALE_QUANTA), rel=0.06)
    assert stats.ks_2samp(ours, theirs).pvalue > 1e-4
