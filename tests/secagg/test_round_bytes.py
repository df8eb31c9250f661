"""The bytes ``round_bytes`` computes for a round equal, device for device, the bytes a real round measures."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pategail.server.secagg.config import SecureRoundConfig
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.cost import round_bytes
from pategail.server.secagg.round import enroll_clients, run_secure_round

CASES = [  # (devices, M, config)
    (20, 7, SecureRoundConfig(1, n_min=15, sum_noise_scale=0.02, sq_sum_noise_scale=0.01)),
    (20, 30, SecureRoundConfig(2, n_min=12, sum_noise_scale=0.05, sq_sum_noise_scale=0.02, degree=6,
                               colluders=1, aggregator="device")),
    (20, 141, SecureRoundConfig(3, n_min=16, sum_noise_scale=0.5, degree=4, mechanism="gaussian",
                                clip_norm=math.sqrt(141))),
    (9, 64, SecureRoundConfig(4, n_min=6, sum_noise_scale=0.3, degree=8, mechanism="gaussian",
                              clip_norm=math.sqrt(64), aggregator="device")),
]


@pytest.mark.parametrize("n,m,config", CASES)
def test_every_device_sends_and_receives_what_round_bytes_says(n, m, config):
    rng = np.random.default_rng(config.round_id)
    coordinator = SecAggCoordinator()
    clients = enroll_clients(coordinator, list(range(10, 10 + n)))
    result = run_secure_round(clients, rng.random((n, m)), config, rng, coordinator=coordinator)
    contributors = n - (config.aggregator == "device")
    assert result.n_survivors == contributors
    expected = round_bytes(config, contributors, m)
    assert result.stats.bytes_up == dict.fromkeys(result.survivors, expected.up)
    assert result.stats.bytes_down == dict.fromkeys(result.survivors, expected.down)


def test_the_bytes_grow_with_what_the_messages_carry():
    base = SecureRoundConfig(1, n_min=10, sum_noise_scale=0.1, sq_sum_noise_scale=0.1, degree=4)
    small, more_queries = round_bytes(base, 50, 10), round_bytes(base, 50, 11)
    assert more_queries.up - small.up == 16          # two more 8-byte words in the masked input
    assert more_queries.down == small.down
    wider = round_bytes(SecureRoundConfig(1, n_min=10, sum_noise_scale=0.1, sq_sum_noise_scale=0.1, degree=6), 50, 10)
    assert wider.up > small.up and wider.down > small.down
    # a day round's trailer (block 47) is as long as an environment round's (block 0)
    day = SecureRoundConfig(1, n_min=10, sum_noise_scale=0.5, degree=4, mechanism="gaussian", block=47, clip_norm=1.0)
    assert round_bytes(day, 50, 10) == round_bytes(dataclasses.replace(day, block=0, clip_norm=2.0), 50, 10)
    big = round_bytes(base, 100_000, 10)                                 # cheap at a population's size
    assert big.down > 400_000 > big.up
