"""The population fleet gives the same numbers however it is split and however often it is stopped: 12
devices in chunks of 4 over 1 or 3 in-process shards, 1 or 3 threads, 2 processes, or 2 Ray workers (a local cluster),
release the same sums and end with the same discriminators and policy, bit for bit; a run killed in the
middle of round 3 (after the devices trained, before the release) resumes from the checkpoints — the
coordinator's and the fleet's own (every discriminator and both AdamW moments) — to the uninterrupted
result."""
from __future__ import annotations

import importlib.util
import logging
import os

import numpy as np
import pytest
import torch

from pategail.server.errors import PategailError
from pategail.server.releases import release_of
from pategail.population.fleet import PopulationFleet, _picklable
from pategail.population.resample import resample_population

N_DEVICES, CHUNK = 12, 4


class Killed(BaseException):
    """The process dies here (nothing after it runs)."""


class KilledInRound:
    """The fleet, until the secure sum of round ``round_``: there the process is killed."""

    def __init__(self, fleet, round_: int):
        self._fleet, self._round = fleet, round_
        self.device_ids = fleet.device_ids

    def public_keys(self):
        return self._fleet.public_keys()

    def request(self, device_id, message):
        return self._fleet.request(device_id, message)

    def secure_sum(self, participants, config, *args):
        if release_of(config.round_id) == self._round:
            raise Killed()
        return self._fleet.secure_sum(participants, config, *args)


@pytest.fixture(scope="module")
def population(dataset):
    return resample_population(dataset.users, N_DEVICES, seed=2)


def outcome(coordinator, fleet):
    """Released sums by round, every discriminator, the policy's weights."""
    journal = coordinator.releases.journal()
    return ({r: np.concatenate([journal[r].sum, journal[r].sq_sum]) for r in journal}, fleet.parameters(),
            {k: v.clone() for k, v in coordinator.policy.state_dict().items()})


def assert_same(a, b):
    assert sorted(a[0]) == sorted(b[0]) == [0, 1, 2, 3]
    for r in a[0]:
        np.testing.assert_array_equal(a[0][r], b[0][r])
    np.testing.assert_array_equal(a[1], b[1])
    for k in a[2]:
        assert torch.equal(a[2][k], b[2][k]), k


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, dataset, population, run_bundle, short_config, train):
    root = tmp_path_factory.mktemp("one-shard")
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=root / "state", chunk=CHUNK,
                            workers=1)
    return outcome(train(fleet, dataset.cells, root / "run", short_config), fleet)


def test_threads_give_the_one_thread_result(tmp_path, dataset, population, run_bundle, short_config, train,
                                            uninterrupted):
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, chunk=CHUNK, workers=3)
    assert fleet.shards[0].workers == 3 and len(list(fleet.shards[0]._chunks())) == 3
    assert_same(outcome(train(fleet, dataset.cells, tmp_path / "run", short_config), fleet), uninterrupted)


def test_three_shards_give_the_single_shard_result(tmp_path, dataset, population, run_bundle, short_config, train,
                                                   uninterrupted):
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, shards=3, chunk=CHUNK)
    assert fleet.ranges == [(0, 4), (4, 8), (8, 12)]
    assert_same(outcome(train(fleet, dataset.cells, tmp_path / "run", short_config), fleet), uninterrupted)


def test_two_processes_give_the_single_process_result(tmp_path, dataset, population, run_bundle, short_config,
                                                      train, uninterrupted, caplog):
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=tmp_path / "state", chunk=CHUNK,
                            processes=2)
    try:
        assert fleet.describe()["processes"] == 2 and fleet.ranges == [(0, 8), (8, 12)]
        processes = [s._process for s in fleet.shards]
        assert len({p.pid for p in processes} | {os.getpid()}) == 3 and all(p.is_alive() for p in processes)
        assert_same(outcome(train(fleet, dataset.cells, tmp_path / "run", short_config), fleet), uninterrupted)
        # each process kept its own devices' state on disk, one directory a chunk, as an in-process shard does
        assert sorted(p.parent.name for p in (tmp_path / "state").rglob("state-3.npz")) == [
            "devices-0-3", "devices-4-7", "devices-8-11"]
    finally:
        fleet.close()
    assert not any(p.is_alive() for p in processes)
    # the shard processes' log lines reach this process's logging (train.log, the terminal)
    with caplog.at_level(logging.INFO, logger="pategail"):
        again = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=tmp_path / "state", chunk=CHUNK,
                                processes=2)
        again.close()
    assert sorted(r.getMessage() for r in caplog.records if "resumed their discriminators" in r.getMessage()) == [
        "devices 0-7: resumed their discriminators after round 3", "devices 8-11: resumed their discriminators after "
                                                                   "round 3"]


def test_a_dead_shard_process_is_a_clear_error(tmp_path, dataset, population, run_bundle):
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, chunk=CHUNK, processes=2)
    try:
        assert fleet.parameters().shape[0] == N_DEVICES
        fleet.shards[1]._process.kill()
        fleet.shards[1]._process.join()
        with pytest.raises(PategailError, match="population shard process ended .*--resume"):
            fleet.parameters()
        # the living shard answered too: its pipe holds no stale answer for the next call
        np.testing.assert_array_equal(fleet.shards[0].submit("parameters")()[:1], fleet.shards[0].submit(
            "parameters")()[:1])
    finally:
        fleet.close()


def test_processes_are_not_combined_with_ray(dataset, population, run_bundle):
    with pytest.raises(PategailError, match="Ray or in processes"):
        PopulationFleet(dataset, population, run_bundle, processes=2, ray_workers=2)
    with pytest.raises(PategailError, match="at least 1"):
        PopulationFleet(dataset, population, run_bundle, processes=0)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="ray is not installed (pip install '.[ray]'; make setup installs it)")
def test_two_ray_workers_give_the_single_process_result(tmp_path, dataset, population, run_bundle, short_config,
                                                        train, uninterrupted):
    import ray

    try:
        fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=tmp_path / "state",
                                chunk=CHUNK, ray_workers=2)
        assert fleet.distributed and len(fleet.shards) == 2
        assert_same(outcome(train(fleet, dataset.cells, tmp_path / "run", short_config), fleet), uninterrupted)
    finally:
        ray.shutdown()


def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path, dataset, population, run_bundle, short_config,
                                                          train, uninterrupted):
    state = tmp_path / "state"
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, chunk=CHUNK)
    with pytest.raises(Killed):
        train(KilledInRound(fleet, 3), dataset.cells, tmp_path / "run", short_config)
    # one directory a chunk of 4 devices, each keeping the last two rounds
    assert sorted(str(p.relative_to(state)) for p in state.rglob("state-*.npz")) == [
        f"devices-{lo}-{lo + 3}/state-{r}.npz" for lo in (0, 4, 8) for r in (2, 3)]
    del fleet
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, chunk=CHUNK)
    # the devices had trained round 3 before the kill: the round sent again must be replayed from the state
    # before it, not trained a second time (which would end elsewhere)
    assert [s.round for s in fleet.shards] == [3]
    coordinator = train(fleet, dataset.cells, tmp_path / "run", short_config, resume=True)
    assert_same(outcome(coordinator, fleet), uninterrupted)


def test_a_run_stopped_on_one_shard_resumes_on_three(tmp_path, dataset, population, run_bundle, short_config,
                                                     train, uninterrupted):
    """The state is kept per chunk of devices, not per shard: another split (more processes, Ray workers)
    resumes the same devices (a per-shard layout restarted them from the bundle)."""
    state = tmp_path / "state"
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, chunk=CHUNK)
    with pytest.raises(Killed):
        train(KilledInRound(fleet, 3), dataset.cells, tmp_path / "run", short_config)
    del fleet
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, shards=3, chunk=CHUNK)
    assert [s.round for s in fleet.shards] == [3, 3, 3]
    coordinator = train(fleet, dataset.cells, tmp_path / "run", short_config, resume=True)
    assert_same(outcome(coordinator, fleet), uninterrupted)


def test_state_in_another_layout_is_refused(tmp_path, dataset, population, run_bundle):
    state = tmp_path / "state"
    (state / "devices-0-11").mkdir(parents=True)        # an older version's one shard of 12 devices
    with pytest.raises(PategailError, match="devices-0-11: another population, chunk of devices, or version"):
        PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, chunk=CHUNK)


def test_a_run_killed_in_round_1_resumes_to_the_uninterrupted_result(tmp_path, dataset, population, run_bundle,
                                                                    short_config, train, uninterrupted):
    """Round 1 asked again is replayed from the bundle's discriminators (there is no state of round 0 on
    disk), not trained a second time on top of the first."""
    state = tmp_path / "state"
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, chunk=CHUNK)
    with pytest.raises(Killed):
        train(KilledInRound(fleet, 1), dataset.cells, tmp_path / "run", short_config)
    del fleet
    fleet = PopulationFleet(dataset, population, run_bundle, seed=0, state_dir=state, chunk=CHUNK, shards=2)
    assert [s.round for s in fleet.shards] == [1, 1]
    coordinator = train(fleet, dataset.cells, tmp_path / "run", short_config, resume=True)
    assert_same(outcome(coordinator, fleet), uninterrupted)


def test_an_error_that_cannot_cross_the_pipe_is_still_said():
    class Local(Exception):                 # a local class cannot be pickled
        pass

    err = Local("the devices refused")
    err.add_note("traceback of the shard")
    plain = _picklable(err)
    assert isinstance(plain, RuntimeError) and str(plain) == "Local: the devices refused"
    assert plain.__notes__ == ["traceback of the shard"]
    ok = ValueError("round 3")
    assert _picklable(ok) is ok
