"""Devices check a signed configuration against their own floors before sending anything — the secure Shamir
threshold, a minimum n_min, noise no smaller than the declared plan."""
from __future__ import annotations

import pytest

from pategail.sdk.secagg import RoundLog, SecAggAbort, SecAggClient
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.policy import DevicePolicy
from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

M, N = 8, 8


def _start(federation, policy, tmp_path, **round_args):
    """Offer one signed round to a device with ``policy``; returns (client, start, its reply or the refusal)."""
    coordinator, clients, recorder = federation(N)
    ids = [c.device_id for c in clients]
    log = RoundLog(tmp_path / "rounds.json")
    client = SecAggClient(ids[0], recorder.identities[ids[0]], coordinator.directory, policy=policy, round_log=log)
    args = dict(n_min=6, sum_noise_scale=0.5, sq_sum_noise_scale=0.5) | round_args
    start = coordinator.new_round(SecureRoundConfig(4, **args), ids, M)
    try:
        return client, log, coordinator, client.start_round(start.config, start.envelopes[ids[0]])
    except RoundRefused as err:
        return client, log, coordinator, err


@pytest.mark.parametrize("threshold", [1, 2, 4])
def test_a_threshold_below_the_secure_threshold_is_refused(federation, tmp_path, threshold):
    client, log, coordinator, got = _start(federation, DevicePolicy(), tmp_path, threshold=threshold)
    assert isinstance(got, RoundRefused) and got.code == "policy" and "floor 5" in str(got)
    assert client.phase.name == "IDLE" and log.last(coordinator.directory.coordinator) == -1
    assert not (tmp_path / "rounds.json").exists()          # nothing sent, nothing recorded


def test_the_secure_threshold_is_accepted(federation, tmp_path):
    _, log, coordinator, got = _start(federation, DevicePolicy(), tmp_path, threshold=5)
    assert isinstance(got, bytes) and log.last(coordinator.directory.coordinator) == 4


def test_n_min_and_noise_below_the_declared_plan_are_refused(federation, tmp_path):
    plan = DevicePolicy(min_survivor_share=0.8, min_sum_noise_scale=0.5, min_sq_sum_noise_scale=0.25,
                        min_colluders=1)
    ok = dict(n_min=7, sum_noise_scale=0.5, sq_sum_noise_scale=0.25, colluders=1)
    for bad, match in ((dict(n_min=6), "n_min=6"), (dict(sum_noise_scale=0.0), "noise scale 0 on Σ D "),
                       (dict(sq_sum_noise_scale=0.2), "Σ D²"), (dict(colluders=0), "colluders")):
        got = _start(federation, plan, tmp_path, **(ok | bad))[3]
        assert isinstance(got, RoundRefused) and got.code == "policy", bad
        assert match in str(got)
    assert isinstance(_start(federation, plan, tmp_path, **ok)[3], bytes)


def test_a_round_signed_with_half_the_holders_as_threshold_releases_nothing(federation, rng):
    """End to end: every honest device refuses the h/2 threshold, so the round aborts before any key exists."""
    coordinator, clients, _ = federation(N)
    config = SecureRoundConfig(round_id=1, n_min=4, sum_noise_scale=0.1, sq_sum_noise_scale=0.1,
                               threshold=N // 2)
    with pytest.raises(SecAggAbort, match="advertised keys"):
        run_secure_round(clients, rng.random((N, M)), config, rng, coordinator=coordinator)


def test_each_release_kind_is_held_to_its_own_gaussian_floor():
    """A plan whose environment release is noisier per unit of sensitivity than its rewards (or the reverse):
    a reward round signed at the environment's multiplier is refused, and the environment round at it passes."""
    from pategail.sdk.accounting import gaussian_sensitivity
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.errors import RoundRefused
    from pategail.sdk.secagg.policy import DeclaredPlan

    plan = DeclaredPlan(8.0, 1e-6, 0.0, 0.0, 0.5, mechanism="gaussian", noise_multiplier=3.0, env_noise_multiplier=1.2)
    policy = plan.policy()
    m, clip = 16, 1.0

    def cfg(z):
        return RoundConfig(1, (1, 2, 3, 4), m, 2, 3, 0, z * gaussian_sensitivity(clip, m), 0.0, bytes(32), bytes(32),
                           mechanism="gaussian", block=8, clip_norm=clip)

    policy.check(cfg(3.0))
    policy.check(cfg(1.2), environment=True)
    with pytest.raises(RoundRefused, match="reward noise multiplier 1.2 .* below the declared privacy plan's 3"):
        policy.check(cfg(1.2))
    with pytest.raises(RoundRefused, match="environment noise multiplier 1.1"):
        policy.check(cfg(1.1), environment=True)
