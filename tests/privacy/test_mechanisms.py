"""The privacy mechanism interface: each mechanism's two sides agree — what the coordinator's accountant records
for a release is exactly what a device's ledger records when it takes part in the round configuration the
coordinator signs for it, and the noise the planning side assumes is the noise the device side draws."""
import math

import numpy as np
import pytest

from pategail.sdk.accounting import composed_epsilon
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.mechanisms import GAUSSIAN, LAPLACE, MECHANISMS, mechanism, mechanism_by_tag
from pategail.server.config import TrainConfig
from pategail.server.privacy.mechanisms import PLANNED, planned
from pategail.server.privacy.run_plan import make_run_plan

ENV_VALUES = 500


def _plan(name: str):
    config = TrainConfig(rounds=3, days_per_round=4, privacy={"epsilon": 8.0, "mechanism": name}).for_devices(50)
    return config, make_run_plan(config, ENV_VALUES)


def _round_config(noise, values: int) -> RoundConfig:
    return RoundConfig(7, tuple(range(1, 11)), values, 8, 6, 0, noise.sum_scale, noise.sq_sum_scale, bytes(32),
                       bytes(32), colluders=1, mechanism=noise.mechanism, block=noise.block,
                       clip_norm=noise.clip_norm)


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_the_device_ledger_records_what_the_coordinator_accounts(name):
    config, plan = _plan(name)
    assert plan.scheme is planned(name) and plan.scheme.device is mechanism(name)
    declared = plan.declare(config.secagg.min_survivors, config.secagg.colluders)
    for kind, values in (("initial_states", ENV_VALUES),
                         ("rewards", config.privacy.reward_granularity.count(config.days_per_round)
                          if plan.scheme.releases_vectors else 47 * config.days_per_round)):
        noise = plan.release_noise(kind)
        cfg = _round_config(noise, values)
        environment = kind == "initial_states"
        assert noise.is_environment is environment
        coordinator = noise.accounting(values, cfg.noise_divisor)
        device = cfg.noise.round_release(cfg, environment, noise.env_l1_bound)
        assert device == coordinator, kind
        # the budget check a device makes from the bundle's declared plan costs what the round then costs
        asked = declared.request_release(values, environment)
        assert composed_epsilon([asked], 1e-5) == pytest.approx(composed_epsilon([device], 1e-5), rel=1e-6), kind
        # a round below the declared plan's floor is refused by the same mechanism's check
        assert cfg.noise.refusal(declared.policy(), cfg, environment, noise.env_l1_bound) is None
        weaker = _round_config(type(noise)(**{**vars(noise), "sum_scale": noise.sum_scale / 2}), values)
        assert "below the declared privacy plan" in weaker.noise.refusal(declared.policy(), weaker, environment,
                                                                          noise.env_l1_bound)


@pytest.mark.parametrize("device", [LAPLACE, GAUSSIAN])
def test_the_planned_noise_std_is_the_drawn_one(device):
    draws = device.noise_share(200.0, 1, 40_000)                 # one share sized for one device: the whole noise
    assert draws.std() == pytest.approx(device.noise_std(200.0), rel=0.03)
    assert not device.noise_share(0.0, 3, 10).any()


def test_each_mechanism_has_both_sides_and_one_wire_tag():
    assert set(MECHANISMS) == set(PLANNED) == {"laplace", "gaussian"}
    assert mechanism_by_tag(None) is LAPLACE and mechanism_by_tag(1) is GAUSSIAN
    for bad in (mechanism, planned):
        with pytest.raises(ValueError, match="unknown mechanism 'skellam'"):
            bad("skellam")
    # the Laplace mechanism's upload carries D and D² (two noisy halves); the Gaussian's one clipped vector
    assert LAPLACE.uploads_squares and not GAUSSIAN.uploads_squares
    assert planned("gaussian").region_sums and not planned("laplace").region_sums


def test_an_upload_is_bounded_and_noised_by_its_mechanism():
    cfg_l = RoundConfig(1, (1, 2, 3), 4, 2, 2, 0, 0.0, 0.0, bytes(32), bytes(32))
    up = LAPLACE.upload(np.array([0.5, 2.0, -1.0, 0.25]), cfg_l, False, 9.0, lambda s, n: np.zeros(n, np.int64))
    q = 2.0 ** 24
    assert up.tolist() == [0.5 * q, q, 0, 0.25 * q, 0.25 * q, q, 0, 0.0625 * q]
    cfg_g = RoundConfig(1, (1, 2, 3), 4, 2, 2, 0, 0.0, 0.0, bytes(32), bytes(32), mechanism="gaussian",
                        clip_norm=1.0)
    up = GAUSSIAN.upload(np.array([1.0, 1.0, 1.0, 1.0]), cfg_g, True, 9.0, lambda s, n: np.zeros(n, np.int64))
    assert np.allclose(up[:4] / q, 0.5) and not up[4:].any()          # L2-clipped to 1, no Σ D² half
    assert math.isclose(float(np.linalg.norm(up[:4] / q)), 1.0, rel_tol=1e-6)
