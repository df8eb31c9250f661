"""What a private run promises, stated exactly: the defaults of --epsilon, δ from the device count, the ε of
both neighbouring relations and of a person behind several devices — every ε recomputed here with
dp-accounting from the noise and the sensitivities, not read back from the code's own composition."""
from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from pategail.sdk.accounting import GaussianRelease, gaussian_sensitivity
from pategail.server.config import TrainConfig
from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.adjacency import REPLACE_ONE, ZERO_OUT, gaussian_env_factor, laplace_env_factor
from pategail.server.privacy.defaults import default_delta, environment_share
from pategail.server.privacy.gaussian import ENV_L2_BOUND
from pategail.server.privacy.mechanisms import GAUSSIAN_PLAN, LAPLACE_PLAN
from pategail.server.privacy.plan import GaussianSpec, plan_gaussian_run, plan_privacy
from pategail.server.privacy.summary import guarantee_lines, guarantees, person_guarantee, privacy_line

Q = 2.0 ** -24                     # one quantum of the fixed point, in value units


def _rdp(events, delta):
    acc = rdp_privacy_accountant.RdpAccountant()
    for z, count in events:
        acc.compose(dp_event.GaussianDpEvent(z), count)
    return acc.get_epsilon(delta)


def test_epsilon_alone_gives_the_gaussian_day_mechanism_and_no_privacy_keeps_the_paper_s_layout():
    private = TrainConfig(privacy={"epsilon": 8.0})
    assert (private.privacy.mechanism, private.privacy.granularity, private.privacy.adjacency) == ("gaussian", "day", "zero-out")
    assert private.privacy.region_cells > 0                                     # region sums for the environment
    plain = TrainConfig()                                               # `make run`: --no-privacy
    assert (plain.privacy.mechanism, plain.privacy.granularity, plain.privacy.region_cells) == ("laplace", "pair", 0)
    resolved = plain.for_devices(10)                                    # what a no-privacy run records
    assert (resolved.privacy.delta, resolved.privacy.env_epsilon_fraction) == (1e-5, 0.1)
    paper = TrainConfig(privacy={"epsilon": 8.0, "mechanism": "laplace"})
    assert paper.privacy.granularity == "pair" and paper.for_devices(1000).privacy.env_epsilon_fraction == 0.1


def test_default_delta_is_well_below_one_over_n():
    assert default_delta(83) == 1e-5 and default_delta(1000) == 1e-5
    assert default_delta(100_000) == pytest.approx(10 ** -5.5) and default_delta(10 ** 7) == pytest.approx(10 ** -7.7)
    for n in (10, 1000, 35_000, 10 ** 6):
        assert default_delta(n) <= n ** -1.1 + 1e-18 and default_delta(n) < 1 / n
    assert TrainConfig(privacy={"epsilon": 1.0}).for_devices(100_000).privacy.delta == pytest.approx(10 ** -5.5)
    assert TrainConfig(privacy={"epsilon": 1.0, "delta": 1e-7}).for_devices(100_000).privacy.delta == 1e-7


def test_the_environment_share_follows_the_device_count():
    """The rewards keep within the day tolerance (0.3): at 83 devices only share 0.1 does, at 1,000 share 0.5
    does even at ε = 1; in between the largest share on the 0.05 grid that does."""
    config = TrainConfig(privacy={"epsilon": 8.0, "delta": 1e-5})
    assert environment_share(config, 83) == 0.1 and environment_share(config, 1000) == 0.5
    assert environment_share(TrainConfig(privacy={"epsilon": 1.0, "delta": 1e-5}), 1000) == 0.5
    low = TrainConfig(privacy={"epsilon": 4.0, "delta": 1e-5})
    share = environment_share(low, 200)
    assert 0.1 < share < 0.5

    def std(f, n):            # σ of the day rewards over n devices at share f
        plan = plan_gaussian_run(4.0, 1e-5, 2.0, 1, 0, GaussianSpec("day", 96, 61, 1, 1.0, f))
        return plan.gaussian["noise_std"] / n
    assert std(share, 200) <= 0.3 < std(share + 0.05, 200)


def test_replace_one_sensitivity_factors_follow_the_layouts():
    f = GAUSSIAN_PLAN.relation_factors(REPLACE_ONE, env_bound=ENV_L2_BOUND, env_values=13_197)
    assert f.rewards == 2.0
    assert f.environment == pytest.approx(math.sqrt(19 / 12), rel=1e-6) and f.environment < math.sqrt(2)
    with_rates = gaussian_env_factor(math.sqrt(12 + 0.125), 10)         # an action-rate part of L2 ≤ b, b² = 1/8
    assert with_rates == pytest.approx(math.sqrt(19 + 2 * 0.125) / math.sqrt(12.125), rel=1e-6)
    laplace = LAPLACE_PLAN.relation_factors(REPLACE_ONE, env_bound=9.0, env_values=12_657)
    assert laplace.rewards == 1.0 and laplace.environment == pytest.approx((26 + 2 * 12_657 * Q) / (18 + 12_657 * Q), rel=1e-12)
    assert laplace_env_factor(10.0, 0) == pytest.approx(30 / 20)
    assert GAUSSIAN_PLAN.relation_factors(ZERO_OUT, env_bound=ENV_L2_BOUND, env_values=5).environment == 1.0


def test_honest_environment_vectors_stay_within_the_replace_one_bounds():
    """Two devices' environment vectors, built by the SDK's own code from random days, are never farther apart
    than the replace-one bounds (L2 √19 with region sums; L1 of x and x² together 26 without), and some pairs
    are farther apart than the zero-out bound: replace-one really costs more."""
    from pategail.sdk.environment_vector import environment_vector

    rng = np.random.default_rng(3)
    cells = np.column_stack([39.9 + 0.01 * (np.arange(40) // 8), 116.3 + 0.01 * (np.arange(40) % 8)])
    vectors, laplace = [], []
    for _ in range(24):
        n_days = int(rng.integers(1, 160)) if len(vectors) % 2 else int(rng.integers(100, 160))  # w = 1
        home = int(rng.integers(40))
        places = rng.choice(40, size=int(rng.integers(1, 6)), replace=False)
        days = rng.choice(places, size=(n_days, 48))
        days[:, :int(rng.integers(0, 20))] = home
        vectors.append(environment_vector(days, home, cells, 0.55, 10, region_cells=8))
        laplace.append(environment_vector(days, home, cells, 0.55, 10))
    for i in range(len(vectors)):
        assert np.linalg.norm(vectors[i]) <= ENV_L2_BOUND + 1e-9
        for j in range(i):
            d = np.linalg.norm(vectors[i] - vectors[j])
            assert d <= math.sqrt(19) + 1e-9
            l1 = np.abs(laplace[i] - laplace[j]).sum() + np.abs(laplace[i] ** 2 - laplace[j] ** 2).sum()
            assert l1 <= 26 + 1e-9
    # and a pair farther apart than any zero-out neighbour: a full-weight device that leaves home and returns,
    # against one that starts its days elsewhere and stays at home in another region
    a = np.repeat(np.array([0] * 10 + [1] * 10 + [2] * 10 + [1] * 10 + [0] * 8)[None], 120, axis=0)
    b = np.repeat(np.array([38] * 5 + [39] * 43)[None], 120, axis=0)
    d = np.linalg.norm(environment_vector(a, 0, cells, 0.55, 10, region_cells=8)
                       - environment_vector(b, 39, cells, 0.55, 10, region_cells=8))
    assert ENV_L2_BOUND < d <= math.sqrt(19)


def test_a_replace_one_target_calibrates_on_the_larger_sensitivities():
    """A Gaussian plan for (8, 1e-5) under replace-one: its noise, composed by dp-accounting with twice the
    rewards' sensitivity and √(19/12)× the environment's, is 8; the zero-out ε of the same noise is smaller."""
    spec = GaussianSpec("day", 96, 61, 13_197, 1.0, 0.5, adjacency=REPLACE_ONE)
    plan = plan_gaussian_run(8.0, 1e-5, 2.0, 13_197 + 60 * 4512, 4512, spec)
    g = plan.gaussian
    d_rewards = 0.5 * math.sqrt(96) + 0.5 * math.sqrt(96) * Q
    d_env = math.sqrt(12) + 0.5 * math.sqrt(13_197) * Q
    d_env_replace = math.sqrt(19) + math.sqrt(13_197) * Q
    replace = _rdp([(g["env_noise_std"] / d_env_replace, 1), (g["noise_std"] / (2 * d_rewards), 61)], 1e-5)
    zero = _rdp([(g["env_noise_std"] / d_env, 1), (g["noise_std"] / d_rewards, 61)], 1e-5)
    assert replace == pytest.approx(8.0, abs=2e-3) and zero < 0.7 * replace
    # the multipliers it declares to devices stay zero-out's: σ / Δ of the zero-out sensitivity
    assert g["noise_multiplier"] == pytest.approx(g["noise_std"] / d_rewards, rel=1e-9)
    assert plan.epsilon_under(REPLACE_ONE, reserve=True) == pytest.approx(replace, rel=1e-6)
    assert plan.epsilon_under(ZERO_OUT, reserve=True) == pytest.approx(zero, rel=1e-6)


def test_a_laplace_replace_one_plan_only_grows_the_environment_release():
    zero = plan_privacy(4.0, 1e-5, 2.0, 1 + 2000, env_values=500, env_fraction=0.1)
    replace = plan_privacy(4.0, 1e-5, 2.0, 1 + 2000, env_values=500, env_fraction=0.1, adjacency=REPLACE_ONE)
    delta_zero, delta_replace = 18 + 500 * Q, 26 + 1000 * Q
    assert zero.env_sum_noise_scale == pytest.approx(delta_zero / 0.4) and \
        replace.env_sum_noise_scale == pytest.approx(delta_replace / 0.4)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.LaplaceDpEvent(replace.env_sum_noise_scale / delta_replace))
    acc.compose(dp_event.LaplaceDpEvent(replace.sum_noise_scale), 2000)
    acc.compose(dp_event.LaplaceDpEvent(replace.sq_sum_noise_scale), 2000)
    assert acc.get_epsilon(1e-5) <= 4.0 + 1e-6 and acc.get_epsilon(1e-5) == pytest.approx(4.0, abs=0.05)


def test_the_report_states_both_relations_and_a_person_s_group_figure():
    plan = plan_gaussian_run(8.0, 1e-5, 2.0, 13_197 + 60 * 4512, 4512,
                             GaussianSpec("day", 96, 61, 13_197, 1.0, 0.5))
    acc = PrivacyAccountant(1e-5)
    env, rewards = plan.planned_releases()
    acc.record_release(env[0], environment=True)
    acc.record_release(rewards[0])
    g = plan.gaussian
    d_rewards = gaussian_sensitivity(g["clip_norm"], 96)
    d_env = gaussian_sensitivity(g["env_clip_norm"], 13_197)
    d_env_replace = math.sqrt(19) + math.sqrt(13_197) * Q
    zero = _rdp([(g["env_noise_std"] / d_env, 1), (g["noise_std"] / d_rewards, 60)], 1e-5)
    replace = _rdp([(g["env_noise_std"] / d_env_replace, 1), (g["noise_std"] / (2 * d_rewards), 60)], 1e-5)
    person = _rdp([(g["env_noise_std"] / (12 * d_env), 1), (g["noise_std"] / (12 * d_rewards), 60)], 1e-5)
    out = guarantees(plan, acc)["against_the_coordinator"]
    assert out["epsilon_zero_out"] == pytest.approx(zero, rel=1e-6) and out["adjacency"] == "zero-out"
    assert out["epsilon_replace_one"] == pytest.approx(replace, rel=1e-6) and replace > 1.5 * zero
    assert "zero-out adjacency" in out["statement"] and "replace-one adjacency" in out["statement"]
    p = person_guarantee(plan, acc, 12)
    assert p["epsilon_zero_out"] == pytest.approx(person, rel=1e-6) and 200 < person < 300
    # report.md: the parts are said to be parts (at δ/2, not additive), never written as a sum
    section = {"epsilon_target": 8.0, "noise_multiplier": g["noise_multiplier"], "mechanism": "gaussian", "granularity": "day", "adjacency": "zero-out", "clip_norm": 1.0, "env_noise_multiplier": 1.0, "noise_std_on_mean": 0.03, "epsilon_parts": {"environment": g["env_epsilon"], "rewards": 5.5}, "guarantees": guarantees(plan, acc), "collusion": "none", "per_person": p}
    line = privacy_line(section)
    assert " + " not in line and "do not add up" in line and f"{replace:.3g} under replace-one" in line
    lines = guarantee_lines(section)
    assert lines[0].startswith("- Against the coordinator: (ε = ") and f"{replace:.3g} replace-one" in lines[0]
    assert any(s.startswith("- Per person:") and "12 copies" in s and "per device" in s for s in lines)


def test_the_budget_check_counts_in_the_target_s_relation():
    acc = PrivacyAccountant(1e-5)
    acc.record_release(GaussianRelease(4.0, 3.0, 1), environment=True)
    acc.record_release(GaussianRelease(50.0, 5.0, 10))
    factors = GAUSSIAN_PLAN.relation_factors(REPLACE_ONE, env_bound=ENV_L2_BOUND, env_values=0)
    extra = GaussianRelease(50.0, 5.0, 1)
    expected = _rdp([(4.0 / (3.0 * factors.environment), 1), (50.0 / 10.0, 11)], 1e-5)
    assert acc.epsilon_under(factors, extra=extra) == pytest.approx(expected, rel=1e-6)
    assert acc.epsilon_under(factors, extra=extra) > acc.epsilon_after_release(extra)


def test_the_relation_and_the_mechanism_are_options_of_a_private_run(tmp_path, capsys):
    from pategail.cli import main
    from pategail.server.errors import PategailError

    with pytest.raises(PategailError, match="adjacency must be one of zero-out, replace-one"):
        TrainConfig(privacy={"epsilon": 1.0, "adjacency": "add-remove"})
    assert TrainConfig.from_dict({"privacy": {"adjacency": "replace-one", "epsilon": 2}}).privacy.adjacency == "replace-one"
    for option in (["--adjacency", "replace-one"], ["--mechanism", "laplace"]):
        assert main(["-q", "train", "--data", str(tmp_path), "--out", str(tmp_path / "run"), "--no-privacy",
                     *option]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{option[0]} goes with --epsilon" in err[0]


def test_the_defaults_benchmark_prints_the_plans_of_the_defaults(monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "privacy_defaults.py"
    spec = importlib.util.spec_from_file_location("privacy_defaults", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DEVICES", (1000,))
    monkeypatch.setattr(module, "EPSILONS", (8.0,))
    row = module.rows()[2]
    assert row.startswith("| 1,000 | 8 | 1e-05 | 0.5 | 0.0345 / 3.12 | 7.96 | 14.9 | 264 / 641 |")
