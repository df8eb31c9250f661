"""A modified device that skips its clipping is caught by the plausibility bound; the noise
shares can be sized for n_min - t when t devices may collude with the coordinator.

A device knows its checksum secrets, so it can add any amount with a matching checksum word; masking hides it
from everyone. The coordinator checks every released coordinate against [0, n] widened by the noise's bound at
a false-alarm probability of 2^-40 per round.
"""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import ImplausibleAggregate, SecAggClient
from pategail.sdk.secagg.fixedpoint import SCALE, plausible_range
from pategail.sdk.secagg.noise import discrete_laplace_share
from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

M, N = 16, 8


def _with_device(federation, rng, device: int, noise_sampler, config):
    coordinator, clients, recorder = federation(N)
    clients = [SecAggClient(c.device_id, recorder.identities[c.device_id], coordinator.directory,
                            noise_sampler=noise_sampler) if c.device_id == device else c for c in clients]
    return run_secure_round(clients, rng.random((N, M)), config, rng, coordinator=coordinator)


def test_a_device_adding_2_to_the_30_per_value_is_not_released(federation, rng):
    def unclipped(scale_quanta, divisor, size):  # the device's own noise plus 2^30 quanta (64.0) per value
        return discrete_laplace_share(scale_quanta, divisor, size) + (1 << 30)

    config = SecureRoundConfig(round_id=9, n_min=4, sum_noise_scale=0.05, sq_sum_noise_scale=0.05)
    with pytest.raises(ImplausibleAggregate, match=r"round 9: released sum\[0\]"):
        _with_device(federation, rng, 103, unclipped, config)


def test_a_device_adding_little_more_than_one_is_caught_without_noise(federation, rng):
    def plus_two(scale_quanta, divisor, size):
        return discrete_laplace_share(scale_quanta, divisor, size) + 2 * SCALE

    with pytest.raises(ImplausibleAggregate):
        # all 8 devices' honest scores could reach 8.0; 1.0 + 2.0 more from one device and the rest near 1
        coordinator, clients, recorder = federation(N)
        clients[0] = SecAggClient(100, recorder.identities[100], coordinator.directory, noise_sampler=plus_two)
        run_secure_round(clients, np.full((N, M), 0.99), SecureRoundConfig(round_id=2, n_min=4), rng,
                         coordinator=coordinator)


def test_honest_sums_stay_inside_the_bound(rng):
    """200,000 honest noisy totals of n = 5 devices (divisor 3) at extreme data: none outside the range, and the
    range is not absurdly wide (within 100 noise scales of [0, n])."""
    n, divisor, scale = 5, 3, 40.0
    lo, hi = plausible_range(n, scale, divisor, n_coordinates=2 * 4096)
    noise = sum(discrete_laplace_share(scale, divisor, 200_000) for _ in range(n))
    assert lo <= noise.min() and noise.max() + n * SCALE <= hi
    assert -lo < 100 * scale and hi - n * SCALE < 100 * scale


def test_colluders_size_the_noise_shares_for_n_min_minus_t(federation, rng):
    divisors = []

    def recording(scale_quanta, divisor, size):
        divisors.append(divisor)
        return discrete_laplace_share(scale_quanta, divisor, size)

    config = SecureRoundConfig(round_id=4, n_min=6, sum_noise_scale=0.05, sq_sum_noise_scale=0.05, colluders=2)
    result = _with_device(federation, rng, 101, recording, config)
    assert divisors == [4, 4] and result.n_survivors == N
    with pytest.raises(ValueError, match="colluders"):
        coordinator, clients, _ = federation(4)
        coordinator.new_round(SecureRoundConfig(1, n_min=3, sum_noise_scale=0.1, sq_sum_noise_scale=0.1,
                                                colluders=3), [c.device_id for c in clients], M)
