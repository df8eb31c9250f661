"""The Gaussian mechanism with the action-rate part (``TrainConfig.action_prior``): the environment vector's L2
clip grows to ``env_l2_bound(True)``, and the plan, the release's round configuration, the coordinator's
accountant and the device's ledger and checks all use it."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pategail.sdk.accounting import GaussianRelease, gaussian_sensitivity
from pategail.server.privacy.gaussian import ENV_L2_BOUND, env_l2_bound, plan_gaussian
from pategail.server.privacy.plan import PLAN_FILE, GaussianSpec, PrivacyPlan, load_or_make_plan, plan_gaussian_run

VALUES = 8444 + 320                       # an environment vector with the part


def _spec(clip: float = ENV_L2_BOUND) -> GaussianSpec:
    return GaussianSpec("day", 96, 61, VALUES, 0.5, 0.2, clip)


def test_the_plan_clips_and_accounts_the_environment_at_the_larger_bound():
    bound = env_l2_bound(True)
    old, new = (plan_gaussian_run(4.0, 1e-5, 2.0, 10, 1, _spec(c)) for c in (ENV_L2_BOUND, bound))
    g, h = old.gaussian, new.gaussian
    assert (g["env_clip_norm"], h["env_clip_norm"]) == (ENV_L2_BOUND, bound)
    # the multipliers depend on ε and its split only: σ grows with the sensitivity, the ε stays
    assert h["env_noise_multiplier"] == g["env_noise_multiplier"] and h["noise_multiplier"] == g["noise_multiplier"]
    assert h["env_noise_std"] == pytest.approx(h["env_noise_multiplier"] * gaussian_sensitivity(bound, VALUES),
                                               rel=1e-12)
    assert h["env_noise_std"] > g["env_noise_std"] and h["noise_std"] == g["noise_std"]
    assert new.expected_epsilon == pytest.approx(old.expected_epsilon, rel=1e-12) and new.expected_epsilon <= 4.0
    noise = new.release_noise("initial_states")
    assert (noise.mechanism, noise.block, noise.clip_norm) == ("gaussian", 0, bound)
    assert noise.accounting(VALUES) == GaussianRelease(h["env_noise_std"], gaussian_sensitivity(bound, VALUES), 1)
    assert new.release_noise("rewards") == old.release_noise("rewards")
    assert plan_gaussian(4.0, 1e-5, 96, 61, VALUES, 0.5, 0.2, bound).env_clip_norm == bound


def test_without_privacy_the_clip_still_travels_and_old_plans_read_as_before():
    bound = env_l2_bound(True)
    free = plan_gaussian_run(None, 1e-5, 2.0, 10, 1, _spec(bound))
    noise = free.release_noise("initial_states")
    assert not noise.noisy and noise.clip_norm == bound           # honest vectors with the part are not clipped
    before = plan_gaussian_run(None, 1e-5, 2.0, 10, 1, _spec())
    legacy = before.to_dict()
    del legacy["gaussian"]["env_clip_norm"]                       # a plan written before the clip was recorded
    assert PrivacyPlan.from_dict(legacy).release_noise("initial_states").clip_norm == ENV_L2_BOUND


def test_a_kept_plan_is_made_again_when_the_layout_gains_the_part(tmp_path):
    made = load_or_make_plan(tmp_path, 4.0, 1e-5, 2.0, 10, 1, _spec())
    assert load_or_make_plan(tmp_path, 4.0, 1e-5, 2.0, 10, 1, _spec()) == made          # kept
    grown = load_or_make_plan(tmp_path, 4.0, 1e-5, 2.0, 10, 1, _spec(env_l2_bound(True)))
    assert grown.gaussian["env_clip_norm"] == env_l2_bound(True)
    assert PrivacyPlan.from_dict(json.loads((tmp_path / PLAN_FILE).read_text())) == grown


def test_the_device_clips_checks_and_accounts_at_the_round_s_clip():
    from pategail.sdk.secagg.mechanisms import gaussian_input
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.errors import RoundRefused
    from pategail.sdk.secagg.ledger import round_release
    from pategail.sdk.secagg.policy import DeclaredPlan

    bound, z = env_l2_bound(True), 1.7
    sigma = z * gaussian_sensitivity(bound, VALUES)
    cfg = RoundConfig(1, (1, 2, 3, 4), VALUES, 4, 3, 0, sigma, 0.0, bytes(32), bytes(32), mechanism="gaussian",
                      block=0, clip_norm=bound)
    # a vector between the two bounds passes unchanged at the new clip; the old clip would have shrunk it
    v = np.zeros(VALUES)
    v[:13] = 1.0
    v *= 0.999 * bound / np.linalg.norm(v)
    assert np.linalg.norm(v) > ENV_L2_BOUND
    assert np.array_equal(gaussian_input(v, cfg), v)
    old = RoundConfig(1, (1, 2, 3, 4), VALUES, 4, 3, 0, z * gaussian_sensitivity(ENV_L2_BOUND, VALUES), 0.0,
                      bytes(32), bytes(32), mechanism="gaussian", block=0, clip_norm=ENV_L2_BOUND)
    assert np.linalg.norm(gaussian_input(v, old)) == pytest.approx(ENV_L2_BOUND, rel=1e-12)
    # the ledger: the same multiplier at the larger clip; the declared plan's floor holds for it ...
    release = round_release(cfg, environment=True)
    assert release == GaussianRelease(sigma, gaussian_sensitivity(bound, VALUES), 1, 4)      # n_min − t shares
    policy = DeclaredPlan(8.0, 1e-5, 0.0, 0.0, 0.8, 0, "gaussian", 1.0, z).policy()
    policy.check(cfg, environment=True)
    # ... and σ sized for √12 is too little noise at the larger clip
    short = RoundConfig(1, (1, 2, 3, 4), VALUES, 4, 3, 0, old.sum_noise_scale, 0.0, bytes(32), bytes(32),
                        mechanism="gaussian", block=0, clip_norm=bound)
    strict = DeclaredPlan(8.0, 1e-5, 0.0, 0.0, 0.8, 0, "gaussian", z, z).policy()
    strict.check(old, environment=True)
    with pytest.raises(RoundRefused, match="noise multiplier"):
        strict.check(short, environment=True)
