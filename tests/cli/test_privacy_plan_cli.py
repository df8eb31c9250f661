"""`pategail privacy-plan` says, per mechanism and granularity, the noise std on each released mean reward and
whether it is below the measured tolerance, then the guarantees the run will report; bad input is one line,
exit 2."""
from __future__ import annotations

import json
import math

import pytest

from pategail.cli import main
from pategail.server.privacy.feasibility import MEASURED_TOLERANCE, Feasibility, plan_feasibility
from pategail.server.privacy.gaussian import plan_gaussian
from pategail.server.privacy.plan import GaussianSpec, plan_gaussian_run, plan_privacy


def test_privacy_plan_prints_each_mechanism_against_the_tolerance(tmp_path, capsys):
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps({"rounds": 3, "days_per_round": 8}))
    assert main(["privacy-plan", "--devices", "20", "--epsilon", "2", "--config", str(cfg),
                 "--granularity", "pair", "day"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "20 devices, total ε = 2" in out[0] and out[4].startswith("The run over 20 devices")
    laplace, pair, day = out[1:4]
    assert laplace.startswith("laplace  pair") and pair.startswith("gaussian pair") and day.startswith("gaussian day")
    # the Gaussian day line is the calibrated σ over 20 devices, and its verdict follows the tolerance
    g = plan_gaussian(2.0, 1e-5, 8, 4, 12_657 + 3 * 180, 1.0, 0.1)    # + pategail-geolife's 180 regions
    std = g.noise_std / 20
    assert f"{std:9.4g}".strip() in day
    # and the environment release's noise against what a region must hold to be seen (3σ device weights)
    assert f"environment: noise std {g.env_noise_std:.3g}" in day and f"from {3 * g.env_noise_std:.3g} device" in day
    # the Laplace environment: one vector query, scale Δ₁ / (0.1 · ε), Δ₁ = 2 · 9 + 12,657 quanta (rounding)
    env_std = math.sqrt(2) * (18 + 12_657 / 2 ** 24) / (0.1 * 2.0)
    assert f"environment: noise std {env_std:.3g} on each cell sum" in laplace and "127" in laplace
    assert ("below" in day) == (std <= MEASURED_TOLERANCE["day"])
    if std > MEASURED_TOLERANCE["day"]:
        assert f"needs about {math.ceil(20 * std / MEASURED_TOLERANCE['day']):,} devices" in day


def test_privacy_plan_gives_the_environment_the_share_the_rewards_can_spare(capsys):
    """At 1,000 devices and ε = 8 the day rewards stay within their tolerance with share 0.5: the default run gets
    it; at 83 devices only with 0.1, which the run then keeps."""
    assert main(["privacy-plan", "--devices", "1000", "--epsilon", "8", "--granularity", "day"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("gaussian day") and "(environment share 0.5)" in out[2]
    rich = plan_gaussian(8.0, 1e-5, 96, 61, 12_657 + 3 * 180, 1.0, 0.5)
    assert f"{rich.noise_std / 1000:9.4g}".strip() in out[2] and f"noise std {rich.env_noise_std:.3g}" in out[2]
    assert rich.noise_std / 1000 <= MEASURED_TOLERANCE["day"] / 2
    assert "environment share 0.5 (chosen for this device count" in out[3]
    # the guarantees the run will report, under both relations, recomputed with dp-accounting: 60 planned rounds
    # and the environment release, with the rewards' sensitivity doubled and the environment's × √19/√12 for
    # replace-one (the layouts' bounds, pategail.server.privacy.adjacency)
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant
    q = 2.0 ** -24
    d_rewards, d_env = 0.5 * math.sqrt(96) * (1 + q), math.sqrt(12) + 0.5 * math.sqrt(13_197) * q

    def eps(f_rewards, d_env_relation):
        acc = rdp_privacy_accountant.RdpAccountant()
        acc.compose(dp_event.GaussianDpEvent(rich.env_noise_std / d_env_relation))
        acc.compose(dp_event.GaussianDpEvent(rich.noise_std / (f_rewards * d_rewards)), 60)
        return acc.get_epsilon(1e-5)
    zero, replace = eps(1, d_env), eps(2, math.sqrt(19) + math.sqrt(13_197) * q)
    assert f"ε = {zero:.3g} under zero-out adjacency" in out[4] and f"{replace:.3g} under replace-one" in out[4]
    assert out[5].strip().startswith("against observers of the published model and synthetic data: the same")
    # δ = 1e-5 against 1/N = 1e-3: what the smaller δ costs in noise
    weak = plan_gaussian(8.0, 1e-3, 96, 61, 12_657 + 3 * 180, 1.0, 0.5)
    assert "1/N = 0.001" in out[6] and f"against {weak.noise_std / 1000:.3g}" in out[6]
    assert main(["privacy-plan", "--devices", "83", "--epsilon", "8", "--granularity", "day"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "(environment share 0.1)" in out[2]
    assert plan_gaussian(8.0, 1e-5, 96, 61, 1, 1.0, 0.15).noise_std / 83 > MEASURED_TOLERANCE["day"] \
        >= plan_gaussian(8.0, 1e-5, 96, 61, 1, 1.0, 0.1).noise_std / 83


@pytest.mark.parametrize("argv, message", [(["--devices", "0", "--epsilon", "1"], "--devices 0"),
                                           (["--devices", "5", "--epsilon", "-1"], "--epsilon"),
                                           (["--devices", "5", "--epsilon", "1", "--granularity", "week"], "week")])
def test_privacy_plan_bad_input_is_one_line(capsys, argv, message):
    assert main(["privacy-plan", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_run_plan_s_own_line():
    laplace = plan_privacy(4.0, 1e-5, 2.0, 500)
    f = plan_feasibility(laplace, 20)
    assert f.noise_std == pytest.approx(math.sqrt(2) * laplace.sum_noise_scale / 20) and f.granularity == "pair"
    gauss = plan_gaussian_run(4.0, 1e-5, 2.0, 500, 0, GaussianSpec("day", 8, 4, 100, 1.0, 0.1))
    f = plan_feasibility(gauss, 20)
    assert f.noise_std == pytest.approx(gauss.gaussian["noise_std"] / 20) and f.tolerance == MEASURED_TOLERANCE["day"]
    assert f.env_noise_std == gauss.gaussian["env_noise_std"] and f.env_units_to_be_seen == 3 * f.env_noise_std
    # 20 devices of weight ≤ 1 can make at most ⌊20 / 3σ⌋ regions visible
    assert f"at most {int(20 // (3 * f.env_noise_std)):,} regions can be seen" in f.line()
    assert Feasibility("gaussian", "day", 20, 0.01, 0.3).can_learn and not Feasibility("g", "day", 1, 0.5, 0.3).can_learn
    assert Feasibility("gaussian", "block:3", 20, 0.01, None).can_learn is None


def test_privacy_plan_counts_the_action_rate_part_when_a_config_forces_it_on(tmp_path, capsys):
    """A private run with ``"action_prior": true`` releases 320 more environment values under larger bounds
    (Laplace L1 10 instead of 9, Gaussian L2 √(12 + 277/47²) instead of √12): the plan must show that noise."""
    from pategail.server.privacy.gaussian import env_l2_bound
    lines = {}
    for forced in (False, True):
        cfg = tmp_path / f"{forced}.json"
        cfg.write_text(json.dumps({"rounds": 3, "days_per_round": 8, "environment": {"action_prior": forced}}))
        assert main(["privacy-plan", "--devices", "20", "--epsilon", "2", "--config", str(cfg),
                     "--granularity", "day"]) == 0
        lines[forced] = capsys.readouterr().out.splitlines()
    assert "12,977 environment values" in lines[True][0] and "12,657 environment values" in lines[False][0]
    laplace_std = math.sqrt(2) * (2 * 10 + 12_977 / 2 ** 24) / (0.1 * 2.0)      # L1 bound 10 with the part
    assert f"environment: noise std {laplace_std:.3g} on each cell sum" in lines[True][1]
    g = plan_gaussian(2.0, 1e-5, 8, 4, 12_657 + 3 * 180 + 320, 1.0, 0.1, env_l2_bound(True))
    assert f"environment: noise std {g.env_noise_std:.3g}" in lines[True][2]
    assert g.env_noise_std > plan_gaussian(2.0, 1e-5, 8, 4, 12_657 + 3 * 180, 1.0, 0.1).env_noise_std


def test_privacy_plan_of_a_hybrid_run_says_the_noise_on_its_model_deltas(capsys):
    """A hybrid run releases rewards and model deltas with the Gaussian mechanism only: no Laplace row, the
    reward rows, then the delta releases' noise — the plan's noise multiplier on a delta's own sensitivity."""
    from pategail.sdk.accounting import gaussian_sensitivity
    from pategail.server.config import TrainConfig
    from pategail.server.fedavg.coordinator import policy_values

    assert main(["privacy-plan", "--method", "hybrid", "--devices", "1000", "--epsilon", "8", "--granularity",
                 "day"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("laplace") for line in out) and out[1].startswith("gaussian day")
    # 60 rounds + 1 in reserve of day rewards, environment share 0.5 at 1,000 devices (as a PateGail run)
    z = plan_gaussian(8.0, 1e-5, 96, 61, 12_657 + 3 * 180, 1.0, 0.5).noise_multiplier
    values = policy_values(TrainConfig(method="hybrid"), 4_210)
    per_value = z * gaussian_sensitivity(1.0, values) * 0.5 / 1000
    assert out[2].startswith(f"gaussian model-delta noise std {per_value:9.4g} on each of the mean model delta's "
                             f"{values:,} parameters")
    ratio = per_value * math.sqrt(values) / 0.5
    assert f"about {ratio:.3g}× the clip norm 0.5" in out[2]
    assert ratio > 1 and f"from about {math.ceil(1000 * ratio):,} devices" in out[2]
    assert "granularity day" in out[3]
