"""The bytes ``round_bytes`` computes for a round equal, device for device, the bytes a real round measures."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pategail.sdk.secagg.config import COORDINATOR
from pategail.sdk.secagg.errors import SecAggAbort
from pategail.sdk.secagg.graph import NeighbourGraph, secure_threshold
from pategail.server.secagg.config import SecureRoundConfig
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.cost import DROP_STAGES, dropout_round_bytes, round_bytes
from pategail.server.secagg.liveness import round_completes
from pategail.server.secagg.round import Dropouts, enroll_clients, run_secure_round

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


DROPOUT_CASES = [  # (devices, M, dropped, config): 2-4 of 20 drop before their masked input
    (20, 7, 3, SecureRoundConfig(11, n_min=12, sum_noise_scale=0.02, sq_sum_noise_scale=0.01)),
    (20, 30, 2, SecureRoundConfig(12, n_min=12, sum_noise_scale=0.05, sq_sum_noise_scale=0.02, degree=8)),
    (20, 141, 4, SecureRoundConfig(13, n_min=12, sum_noise_scale=0.5, degree=12, mechanism="gaussian",
                                   clip_norm=math.sqrt(141))),
    (20, 64, 3, SecureRoundConfig(14, n_min=12, sum_noise_scale=0.3, degree=10, mechanism="gaussian",
                                  clip_norm=math.sqrt(64), aggregator="device")),
]


def _round_with_dropouts(n, m, dropped, config, stage, seed):
    """A real round over n devices in which ``dropped`` contributors drawn with ``seed`` stop after ``stage``;
    returns (result, signed configuration's participants, its round seed, the dropped devices)."""
    rng = np.random.default_rng(seed)
    coordinator = SecAggCoordinator()
    clients = enroll_clients(coordinator, list(range(10, 10 + n)))
    signed = {}

    def watch(phase, aggregator, replies):
        signed.setdefault("config", aggregator.config)

    # the aggregator device is drawn first from the same rng: draw the dropped ones from a second generator
    ids = [c.device_id for c in clients]
    gone = frozenset(np.random.default_rng(seed + 1000).choice(ids, dropped, replace=False).tolist())
    result = run_secure_round(clients, rng.random((n, m)), config, rng, coordinator=coordinator,
                              dropouts=Dropouts(**{stage: gone - {COORDINATOR}}), adversary=watch)
    cfg = signed["config"]
    return result, cfg.participants, cfg.round_seed, gone & set(cfg.participants)


@pytest.mark.parametrize("stage", DROP_STAGES)
@pytest.mark.parametrize("n,m,dropped,config", DROPOUT_CASES)
def test_with_dropouts_every_device_is_counted_what_the_real_round_counts(n, m, dropped, config, stage):
    for seed in (config.round_id, config.round_id + 50):
        result, participants, round_seed, gone = _round_with_dropouts(n, m, dropped, config, stage, seed)
        assert gone and set(result.survivors) == set(participants) - gone
        expected = dropout_round_bytes(config, participants, m, gone, round_seed, stage)
        assert result.stats.bytes_up == {d: b.up for d, b in expected.items()}
        assert result.stats.bytes_down == {d: b.down for d, b in expected.items()}
        # the dropped devices sent and received something, less than a survivor
        survivor = expected[result.survivors[0]]
        assert all(0 < expected[d].up < survivor.up and 0 < expected[d].down < survivor.down for d in gone)
        # a survivor's bytes follow from how many of its neighbours dropped; when the dropped devices sent no
        # shares, each one fewer is a share delivery fewer (a sent mask-key share costs what a b-share does)
        graph = NeighbourGraph(participants, round_seed, config.degree)
        by_count: dict[int, set] = {}
        for d in result.survivors:
            by_count.setdefault(len(graph.neighbours(d) & gone), set()).add(expected[d])
        assert all(len(costs) == 1 for costs in by_count.values())
        if stage == "after_advertise":
            downs = [next(iter(by_count[k])).down for k in sorted(by_count)]
            assert downs == sorted(downs, reverse=True) and len(set(downs)) == len(downs)
        # no dropouts: the same as round_bytes, for every device
        assert set(dropout_round_bytes(config, participants, m, (), round_seed).values()) == {
            round_bytes(config, len(participants), m)}


def test_a_round_the_dropouts_leave_without_enough_holders_aborts():
    """Degree 4 (t = 4): a survivor whose four neighbours all dropped cannot be unmasked; the real round aborts
    and so does the cost function, as does a survivor set below n_min."""
    config = SecureRoundConfig(15, n_min=10, sum_noise_scale=0.1, sq_sum_noise_scale=0.1, degree=4)
    participants = tuple(range(20))
    round_seed = bytes(range(32))
    graph = NeighbourGraph(participants, round_seed, 4)
    gone = graph.neighbours(7)
    with pytest.raises(SecAggAbort, match="cannot be unmasked"):
        dropout_round_bytes(config, participants, 5, gone, round_seed)
    with pytest.raises(SecAggAbort, match="n_min"):
        dropout_round_bytes(config, participants, 5, range(11), round_seed)
    with pytest.raises(ValueError, match="not participants"):
        dropout_round_bytes(config, participants, 5, [99], round_seed)


def test_dropouts_that_abort_the_real_round_abort_the_cost_function():
    """The four neighbours of one device drop after sending their shares (degree 4, t = 4): the real round
    releases nothing, and the cost function says so for the same graph."""
    config = SecureRoundConfig(16, n_min=10, sum_noise_scale=0.1, sq_sum_noise_scale=0.1, degree=4)
    coordinator = SecAggCoordinator()
    clients = enroll_clients(coordinator, list(range(10, 30)))
    gone: set[int] = set()
    signed = []

    def drop_a_neighbourhood(phase, aggregator, replies):   # after the keys are out, before the shares
        if phase == "advertise":
            signed.append(aggregator.config)
            gone.update(aggregator.graph.neighbours(aggregator.config.participants[0]))

    rng = np.random.default_rng(16)
    with pytest.raises(SecAggAbort):
        run_secure_round(clients, rng.random((20, 5)), config, rng, coordinator=coordinator,
                         dropouts=Dropouts(after_share_keys=gone), adversary=drop_a_neighbourhood)
    assert len(gone) == 4
    with pytest.raises(SecAggAbort, match="cannot be unmasked"):
        dropout_round_bytes(config, signed[0].participants, 5, gone, signed[0].round_seed)


def test_the_cost_function_aborts_exactly_where_the_protocol_s_rules_do():
    """Over random graphs and dropout sets (up to half the devices), the cost function raises exactly when
    ``round_completes`` (the protocol's rules, checked against real rounds in test_liveness_model) says the
    round does not complete — and otherwise counts every device."""
    rng = np.random.default_rng(5)
    verdicts = set()
    for trial in range(400):
        n, degree = int(rng.integers(12, 40)), int(rng.choice([0, 4, 6, 8]))
        config = SecureRoundConfig(1, n_min=int(rng.integers(4, n // 2 + 1)), sum_noise_scale=0.1,
                                   sq_sum_noise_scale=0.1, degree=degree)
        participants = tuple(range(100, 100 + n))
        seed, stage = rng.bytes(32), DROP_STAGES[trial % 2]
        gone = frozenset(rng.choice(participants, int(rng.integers(0, n // 2 + 1)), replace=False).tolist())
        graph = NeighbourGraph(participants, seed, degree)
        t = secure_threshold(n, degree)
        outcome = round_completes(graph, t, config.n_min, Dropouts(**{stage: gone}))
        try:
            counted = dropout_round_bytes(config, participants, 3, gone, seed, stage)
        except SecAggAbort:
            counted = None
        assert (counted is not None) == outcome.complete, (trial, outcome)
        assert counted is None or set(counted) == set(participants)
        verdicts.add(outcome.reason)
    assert {"", "inputs", "certificate", "self-mask"} <= verdicts


@pytest.mark.parametrize("n,degree", [(20, 0), (20, 4), (31, 10), (30, 28)])
def test_neighbours_are_counted_as_the_graph_lists_them(n, degree):
    participants = tuple(range(7, 7 + n))
    graph = NeighbourGraph(participants, bytes(range(32)), degree)
    members = set(np.random.default_rng(n).choice(participants, n // 3, replace=False).tolist())
    assert graph.count_neighbours_in(members).tolist() == [len(graph.neighbours(d) & members) for d in participants]
