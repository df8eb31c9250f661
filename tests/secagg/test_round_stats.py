"""What a secure round reports about its own costs, and its argument checks (unit-level, 4 devices)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

M = 6


def test_round_stats_count_each_device_s_cpu_and_bytes(federation, rng):
    coordinator, clients, _ = federation(4)
    config = SecureRoundConfig(round_id=3, n_min=3, sum_noise_scale=0.02, sq_sum_noise_scale=0.01)
    start = time.thread_time()
    result = run_secure_round(clients, rng.random((4, M)), config, rng, coordinator=coordinator,
                              dropouts=Dropouts(after_share_keys=frozenset({clients[3].device_id})))
    spent = time.thread_time() - start
    cpu = result.stats.device_cpu_s
    assert sorted(cpu) == [c.device_id for c in clients]
    # every device did key agreement and signatures: positive CPU, together less than the whole round's
    assert all(t > 0 for t in cpu.values()) and sum(cpu.values()) < spent
    assert result.stats.aggregator_cpu_s > 0 and result.stats.coordinator_cpu_s > 0
    assert sum(cpu.values()) + result.stats.aggregator_cpu_s + result.stats.coordinator_cpu_s <= spent * 1.01
    # the device that stopped after sharing its keys sent less and received less than the others
    dropped = clients[3].device_id
    assert dropped not in result.survivors and len(result.survivors) == 3
    assert all(result.stats.bytes_up[d] > result.stats.bytes_up[dropped] for d in result.survivors)
    assert all(result.stats.bytes_down[d] > result.stats.bytes_down[dropped] for d in result.survivors)


def test_values_must_match_the_clients(federation, rng):
    coordinator, clients, _ = federation(3)
    config = SecureRoundConfig(round_id=1, n_min=2)
    with pytest.raises(ValueError, match=r"values must have shape \(len\(clients\), M\), got \(2, 6\)"):
        run_secure_round(clients, np.zeros((2, M)), config, rng, coordinator=coordinator)
    with pytest.raises(ValueError, match="num_queries=5 but values has 6 columns"):
        run_secure_round(clients, np.zeros((3, M)), config, rng, coordinator=coordinator, num_queries=5)
    with pytest.raises(ValueError, match="values=None needs num_queries"):
        run_secure_round(clients, None, config, rng, coordinator=coordinator)


def _burning(fn, seconds):
    """``fn`` after ``seconds`` of this thread's CPU time (a measurable cost for the round's clock)."""
    def slow(*args, **kwargs):
        t = time.thread_time()
        while time.thread_time() - t < seconds:
            pass
        return fn(*args, **kwargs)
    return slow


def test_coordinator_cpu_counts_both_its_steps(federation, rng, monkeypatch):
    coordinator, clients, _ = federation(3)
    monkeypatch.setattr(coordinator, "new_round", _burning(coordinator.new_round, 0.03))
    monkeypatch.setattr(coordinator, "verify", _burning(coordinator.verify, 0.03))
    config = SecureRoundConfig(round_id=2, n_min=2)
    result = run_secure_round(clients, rng.random((3, M)), config, rng, coordinator=coordinator)
    assert result.stats.coordinator_cpu_s >= 0.06
