"""A privately released cell table: its noise for a share of the target's ρ, its threshold, what one device can
move, and the run's total with the release composed in — every ε recomputed with dp-accounting."""
from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from pategail.sdk.cell_universe import visited_vector
from pategail.server.privacy.adjacency import REPLACE_ONE, ZERO_OUT
from pategail.server.privacy.cell_release import (FALSE_CELLS, plan_cell_release, remaining_epsilon,
                                                  replace_one_factor)
from pategail.server.privacy.plan import GaussianSpec, plan_gaussian_run

Q = 2.0 ** -24                     # one quantum of the fixed point, in value units
DELTA = 1e-5


def _rdp(multipliers, delta=DELTA):
    acc = rdp_privacy_accountant.RdpAccountant()
    for z, count in multipliers:
        acc.compose(dp_event.GaussianDpEvent(z), count)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("epsilon, share", [(8.0, 0.2), (1.0, 0.5)])
def test_the_release_spends_its_share_of_the_target_s_rho(epsilon, share):
    plan = plan_cell_release(epsilon, DELTA, 3621, max_cells=32, rho_share=share)
    z = plan.noise_std / (math.sqrt(32) + 0.5 * math.sqrt(3621) * Q)          # σ over its L2 sensitivity
    # the rest of the run, one Gaussian of the remaining ρ: together they are exactly the target
    z_rest = z * math.sqrt(share / (1 - share))
    assert _rdp([(z, 1), (z_rest, 1)]) == pytest.approx(epsilon, rel=2e-3)
    assert _rdp([(z_rest, 1)]) == pytest.approx(remaining_epsilon(epsilon, DELTA, plan), rel=2e-3)
    assert _rdp([(z, 1)]) < remaining_epsilon(epsilon, DELTA, plan) < epsilon


def test_a_square_nobody_visits_clears_the_threshold_rarely():
    plan = plan_cell_release(8.0, DELTA, 3621)
    assert 3621 * NormalDist(0, plan.noise_std).cdf(-plan.threshold) == pytest.approx(FALSE_CELLS, rel=1e-6)
    # drawn: 400 noisy universes of 500 empty squares with 0.5 false squares expected each → ~200 released
    small = plan_cell_release(8.0, DELTA, 500, false_cells=0.5)
    rng = np.random.default_rng(7)
    released = sum(len(small.select(rng.normal(0, small.noise_std, 500))) for _ in range(400))
    assert 150 < released < 250
    # a square 4σ above the threshold is released almost surely; one device alone never clears it
    counts = np.zeros(500)
    counts[[3, 9]] = [small.threshold + 4 * small.noise_std, 1.0]
    assert 3 in small.select(counts) and 9 not in small.select(counts)
    assert small.threshold > 3 * small.noise_std > 1


def test_the_threshold_follows_the_noise_the_sum_carries():
    plan = plan_cell_release(8.0, DELTA, 3621)
    # 1,000 devices each adding a share sized for n_min = 800: the sum's noise is σ·√1.25
    tau = plan.threshold_for(1000, 800)
    assert tau == pytest.approx(plan.threshold * math.sqrt(1.25))
    assert 3621 * NormalDist(0, plan.noise_std * math.sqrt(1.25)).cdf(-tau) == pytest.approx(FALSE_CELLS, rel=1e-6)
    assert plan.threshold_for(800, 800) == plan.threshold == plan.threshold_for(700, 800)    # never below τ
    counts = np.zeros(3621)
    counts[5] = (plan.threshold + tau) / 2
    assert 5 in plan.select(counts) and 5 not in plan.select(counts, tau)


def test_one_device_moves_the_counts_by_no_more_than_the_recorded_sensitivity():
    plan = plan_cell_release(8.0, DELTA, 400, max_cells=8)
    rng = np.random.default_rng(3)
    for _ in range(100):
        a = visited_vector(rng.integers(0, 400, size=(int(rng.integers(1, 20)), 48)), 400, 8)
        b = visited_vector(rng.integers(0, 400, size=(int(rng.integers(1, 20)), 48)), 400, 8)
        assert np.linalg.norm(a) <= plan.sensitivity                                        # zero-out
        assert np.linalg.norm(a - b) <= plan.sensitivity * replace_one_factor(8, 400)      # replace-one
    assert replace_one_factor(8, 400) == pytest.approx(math.sqrt(2), rel=1e-6)
    replace = plan_cell_release(8.0, DELTA, 400, max_cells=8, adjacency=REPLACE_ONE)
    assert replace.noise_std == pytest.approx(plan.noise_std * replace_one_factor(8, 400))
    assert plan.adjacency == ZERO_OUT and replace.release().sensitivity == plan.sensitivity   # recorded at zero-out


def test_the_run_with_its_cell_release_composes_to_the_target_under_both_relations():
    from pategail.server.privacy.cell_release import composed_epsilon_with_cells

    cells = plan_cell_release(8.0, DELTA, 3621)
    rest = remaining_epsilon(8.0, DELTA, cells)
    spec = GaussianSpec("day", 96, 61, 13197, 1.0, 0.5)
    run = plan_gaussian_run(rest, DELTA, 2.0, 60 * 96 * 47 + 13197, 96 * 47, spec)
    zero = composed_epsilon_with_cells(cells, run, ZERO_OUT, reserve=True)
    replace = composed_epsilon_with_cells(cells, run, REPLACE_ONE, reserve=True)
    # recomputed: the cell release, the environment and every budgeted reward round as Gaussians of σ/Δ
    g = run.gaussian
    z_cells = cells.noise_std / cells.sensitivity
    env_delta = g["env_clip_norm"] + 0.5 * math.sqrt(13197) * Q
    reward_delta = g["clip_norm"] + 0.5 * math.sqrt(96) * Q
    expected = _rdp([(z_cells, 1), (g["env_noise_std"] / env_delta, 1), (g["noise_std"] / reward_delta, 61)])
    assert zero == pytest.approx(expected, rel=2e-3) and zero <= 8.0 * 1.002
    assert zero == pytest.approx(8.0, rel=5e-3)                # the run spends what it promises, no more
    assert replace > 1.5 * zero                                 # rewards ×2, cells ×√2, environment ×1.26
    person = composed_epsilon_with_cells(cells, run, ZERO_OUT, copies=12, reserve=True)
    assert person > 10 * zero


def test_a_run_that_releases_its_table_is_planned_with_the_release_in_every_figure():
    """make_run_plan: the environment and rewards at the ε the release leaves, the release recorded in the plan,
    and every ε the plan states (target check, both relations, per person) composing the release with them."""
    from pategail.server.config import TrainConfig
    from pategail.server.privacy.cell_release import composed_epsilon_with_cells, rest_epsilon
    from pategail.server.privacy.run_plan import make_run_plan

    config = TrainConfig(privacy={"epsilon": 8.0, "cells": "released"}).for_devices(1000)
    assert config.privacy.rest_epsilon == pytest.approx(rest_epsilon(8.0, DELTA)) and config.privacy.rest_epsilon < 7.1
    cells = plan_cell_release(8.0, DELTA, 3621)
    plan = make_run_plan(config, 13197, cells=cells)
    public = make_run_plan(TrainConfig(privacy={"epsilon": 8.0}).for_devices(1000), 13197)
    assert plan.target_epsilon == 8.0 and plan.cell_release == cells and public.cell_release is None
    assert plan.gaussian["noise_std"] > 1.05 * public.gaussian["noise_std"]     # the rest gets less of the budget
    assert plan.expected_epsilon == pytest.approx(8.0, rel=5e-3) and plan.expected_epsilon <= 8.0 * 1.002
    for relation in (ZERO_OUT, REPLACE_ONE):
        for copies in (1, 12):
            assert plan.epsilon_under(relation, copies, reserve=True) == pytest.approx(
                composed_epsilon_with_cells(cells, plan, relation, copies, reserve=True), rel=1e-9)
    # without the release the same environment and rewards compose to the rest's ε only
    rest = replace(plan, cells=None).epsilon_under(ZERO_OUT, reserve=True)
    assert rest == pytest.approx(config.privacy.rest_epsilon, rel=5e-3) and rest < 0.9 * plan.expected_epsilon


def test_the_accountant_scales_each_kind_of_release_by_its_own_factor():
    from pategail.sdk.accounting import GaussianRelease
    from pategail.server.privacy.accountant import PrivacyAccountant
    from pategail.server.privacy.adjacency import CELLS, ENVIRONMENT, SensitivityFactors

    acc = PrivacyAccountant(DELTA)
    cell, env, reward = GaussianRelease(8.0, 5.7, 1), GaussianRelease(3.0, 3.5, 1), GaussianRelease(20.0, 1.0, 1)
    acc.record_release(cell, kind=CELLS)
    acc.record_release(env, environment=True)
    acc.record_release(reward)
    acc.record_release(reward)
    assert acc.releases_of(CELLS) == [cell] and acc.releases_of(ENVIRONMENT) == [env]
    scaled = acc.releases_under(SensitivityFactors(2.0, 1.25, 1.4))
    assert [r.sensitivity for r in scaled] == pytest.approx([5.7 * 1.4, 3.5 * 1.25, 2.0])
    assert scaled[-1].count == 2
    expected = _rdp([(8.0 / (5.7 * 1.4), 1), (3.0 / (3.5 * 1.25), 1), (20.0 / 2.0, 2)])
    assert acc.epsilon_under(SensitivityFactors(2.0, 1.25, 1.4)) == pytest.approx(expected, rel=1e-6)
