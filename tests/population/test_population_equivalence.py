"""The population fleet computes what the SDK fleet computes: 20 devices holding real users' days (a
resampled population of the 10 embedded users), 3 rounds of Algorithm 1 without noise, run once over SDK
devices (ONNX Runtime training, the real secure aggregation) and once over the stacked discriminators with
the ideal secure sum. The released sums agree within 1e-4, every device's discriminator and scores within
1e-5; the secure sum honours the aggregator's sitting out and dropouts exactly as the protocol does."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pategail.emulator import EmulatedFleet
from pategail.population.fleet import PopulationFleet
from pategail.population.resample import resample_population
from pategail.population.stacked import Layout, probabilities
from pategail.sdk.features import N_PAIR_FEATURES, infer_home, label_actions, pair_features
from pategail.sdk.messages import InitialStatesRequest, to_bytes
from pategail.sdk.secagg.errors import SecAggAbort
from pategail.server.secagg.config import SecureRoundConfig
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.cost import dropout_round_bytes, round_bytes
from pategail.server.secagg.round import Dropouts, run_secure_round

N_DEVICES = 20


@pytest.fixture(scope="module")
def runs(tmp_path_factory, dataset, run_bundle, short_config, train):
    root = tmp_path_factory.mktemp("equivalence")
    population = resample_population(dataset.users, N_DEVICES, seed=0)
    sdk = EmulatedFleet(dataset, population.users, root / "devices", run_bundle, seed=0)
    pop = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=root / "state")
    return (train(sdk, dataset.cells, root / "sdk", short_config), sdk,
            train(pop, dataset.cells, root / "pop", short_config), pop)


def test_the_population_is_resampled_users(runs, dataset):
    _, sdk, _, pop = runs
    assert len(pop.device_ids) == N_DEVICES == len(sdk.device_ids)
    assert set(pop.population.users) <= set(dataset.users.tolist())
    assert len(set(pop.population.users.tolist())) < N_DEVICES          # drawn with replacement: copies


def test_released_sums_agree(runs):
    c_sdk, _, c_pop, _ = runs
    sdk, pop = c_sdk.releases.journal(), c_pop.releases.journal()
    assert sorted(sdk) == sorted(pop) == [0, 1, 2, 3]
    for r in sdk:
        assert sdk[r].n_survivors == pop[r].n_survivors == N_DEVICES
        assert np.abs(sdk[r].sum - pop[r].sum).max() < 1e-4, r
        assert np.abs(sdk[r].sq_sum - pop[r].sq_sum).max() < 1e-4, r
    # the rounds were not trivial: the sums moved from round to round
    assert np.abs(sdk[3].sum - sdk[1].sum).max() > 0.1


def test_every_device_scores_and_parameters_agree(runs, dataset):
    c_sdk, sdk, _, pop = runs
    stacked = pop.parameters()
    generated = c_sdk.generate(4, np.random.default_rng(3))
    homes = np.full(len(generated), infer_home(dataset.user_days(int(dataset.users[0]))), dtype=np.int32)
    pairs = pair_features(generated, homes, label_actions(generated, homes), dataset.cells)
    pairs = pairs.reshape(-1, N_PAIR_FEATURES).astype(np.float32)
    layout = Layout.of(sdk.devices[0].bundle)
    for i in sdk.device_ids:
        # float32 rounding differs between ONNX Runtime's kernels and torch's; Adam divides by √v, so a parameter
        # whose gradient is within rounding of 0 can take a step of either sign. With one attention head (session
        # 7) one device of this run has 63 of 5,249 parameters 1e-5–1e-4 apart after 3 rounds (every other device:
        # all within 2e-6). A real difference (another minibatch, step or clip) moves most parameters by > 1e-3.
        gap = np.abs(sdk.devices[i].discriminator_parameters() - stacked[i])
        assert (gap < 1e-5).mean() > 0.97 and gap.max() < 2e-4, (i, (gap >= 1e-5).sum(), gap.max())
        ours = probabilities(layout, torch.from_numpy(stacked[i:i + 1]), torch.from_numpy(pairs))[0]
        assert np.abs(sdk.devices[i].score(pairs) - ours).max() < 1e-5, i
    # two copies of one user trained on their own minibatch draws: different discriminators
    users = pop.population.users
    twins = [i for i in range(N_DEVICES) if (users == users[i]).sum() > 1][:2]
    assert np.abs(stacked[twins[0]] - stacked[twins[1]]).max() > 1e-3


def _environment_round(fleet, round_):
    """Every device makes its environment contribution pending."""
    for i in fleet.device_ids:
        fleet.request(i, to_bytes(InitialStatesRequest(round_)))


@pytest.mark.parametrize("aggregator", ["coordinator", "device"])
def test_dropouts_and_the_aggregator_sit_out_as_in_the_protocol(runs, aggregator):
    """Population: 15% of the contributors drop out before their masked input. SDK: the same devices drop out
    after sending their shares (so their input is never sent). The released sums are the same, and so is every
    device's count of bytes, the dropped devices' included (all pairs: the bytes do not depend on the graph)."""
    _, sdk, _, pop = runs
    pop.dropout = 0.15
    try:
        _environment_round(pop, 5)
        length = pop._length
        config = SecureRoundConfig(round_id=(50 << 16) + (aggregator == "device"), n_min=12, aggregator=aggregator)
        ours = pop.secure_sum(list(pop.device_ids), config, None, np.random.default_rng(9), length)
    finally:
        pop.dropout = 0.0
    contributors = N_DEVICES - (aggregator == "device")
    assert ours.n_survivors == contributors - round(0.15 * contributors)
    _environment_round(sdk, 5)
    gone = frozenset(set(sdk.device_ids) - set(ours.survivors) - {ours.aggregator})
    coordinator = SecAggCoordinator()
    for i, keys in sdk.public_keys().items():
        coordinator.enroll(i, keys)
    endpoints = [sdk.devices[i].secagg_endpoint(coordinator.directory) for i in sdk.device_ids]
    theirs = run_secure_round(endpoints, None, config, np.random.default_rng(9), coordinator=coordinator,
                              num_queries=length, dropouts=Dropouts(after_share_keys=gone))
    assert theirs.aggregator == ours.aggregator
    assert tuple(theirs.survivors) == ours.survivors
    assert np.abs(theirs.sum - ours.sum).max() < 1e-6
    assert np.abs(theirs.sq_sum - ours.sq_sum).max() < 1e-6
    assert ours.stats.bytes_up == theirs.stats.bytes_up and ours.stats.bytes_down == theirs.stats.bytes_down
    contributors = sorted(set(sdk.device_ids) - {ours.aggregator})
    cost = dropout_round_bytes(config, contributors, length, gone, bytes(32))
    assert ours.stats.bytes_up == {d: c.up for d, c in cost.items()}
    assert ours.stats.bytes_down == {d: c.down for d, c in cost.items()}
    assert set(ours.stats.bytes_up) == set(contributors) and all(ours.stats.bytes_up[d] > 0 for d in gone)


def test_below_n_min_nothing_is_released(runs):
    _, _, _, pop = runs
    _environment_round(pop, 6)
    pop.dropout = 0.25                                   # 15 of 20 contributors left, n_min 16
    try:
        with pytest.raises(SecAggAbort):
            pop.secure_sum(list(pop.device_ids), SecureRoundConfig(round_id=60 << 16, n_min=16), None,
                           np.random.default_rng(0), pop._length)
    finally:
        pop.dropout = 0.0


def test_a_gaussian_round_sums_the_clipped_uploads_as_the_protocol_does(runs, sdk_secure_sum):
    """Gaussian mechanism (noise off to compare exactly): each device uploads its vector L2-clipped to C, so
    the population fleet must clip per device before summing — a clip of the sum would differ."""
    _, sdk, _, pop = runs
    _environment_round(pop, 7)
    length = pop._length
    config = SecureRoundConfig(round_id=70 << 16, n_min=16, mechanism="gaussian", block=0, clip_norm=0.5)
    ours = pop.secure_sum(list(pop.device_ids), config, None, np.random.default_rng(0), length)
    _environment_round(sdk, 7)
    theirs = sdk_secure_sum(sdk, config, np.random.default_rng(0), length)
    assert ours.n_survivors == theirs.n_survivors == N_DEVICES
    assert np.abs(theirs.sum - ours.sum).max() < 1e-6
    assert not ours.sq_sum.any()
    # the clip bites: every upload has norm ≤ C, and the unclipped sum (a Laplace round's Σ) is another one
    assert np.linalg.norm(ours.sum) <= N_DEVICES * 0.5 + 1e-6
    plain = pop.secure_sum(list(pop.device_ids), SecureRoundConfig(round_id=71 << 16, n_min=16), None,
                           np.random.default_rng(0), length)
    assert np.abs(plain.sum - ours.sum).max() > 0.1
    # each device is counted the bytes it sent and received in the real round
    assert ours.stats.bytes_up == theirs.stats.bytes_up and ours.stats.bytes_down == theirs.stats.bytes_down
    cost = round_bytes(config, N_DEVICES, length)
    assert ours.stats.bytes_up == dict.fromkeys(sdk.device_ids, cost.up) and cost.up > 16 * length


def test_the_communication_per_device_and_round_is_the_protocol_s(runs):
    """Every round's bytes per device — the broadcasts and the real protocol's secure sums — are the same in the
    population run as in the SDK run, and not zero."""
    c_sdk, _, c_pop, _ = runs
    assert len(c_pop.state.bytes_by_round) == len(c_sdk.state.bytes_by_round) == 3
    assert c_pop.state.bytes_by_round == c_sdk.state.bytes_by_round
    assert all(up > 1000 and down > 1000 for down, up in c_pop.state.bytes_by_round)
