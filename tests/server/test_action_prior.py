"""The rule-model warm start (pategail.server.action_prior): decoding the released rate table, sampling days
from it, behaviour cloning that reproduces a known table, PPO's KL anchor, and the privacy plan's bound."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from pategail.sdk.action_rates import (RATE_SHAPE, action_rate_contribution, action_rate_length, count_bucket,
                                       decision_counts, distinct_so_far)
from pategail.sdk.epr import CellGeometry, EPREnvironment
from pategail.sdk.features import EXPLORE, HOME, RETURN, STAY
from pategail.server.action_prior import (RARE_DAY_SHARE, ActionRates, action_rates_from_noisy_sums,
                                          behaviour_clone, day_cells_limit, sample_rule_days)
from pategail.server.policy import Policy, PolicyConfig


def test_decoding_keeps_well_observed_rates_and_inherits_empty_counts():
    counts = np.zeros(RATE_SHAPE)
    counts[:, :, 0] = [10.0, 0.0, 0.0, 10.0]                # 1 cell: half stay, half explore
    counts[:, :, 1] = [30.0, 10.0, 0.0, 0.0]                # 2 cells: never explore
    counts[:, 1, :, HOME] = 0.0                             # (home is impossible at home anyway)
    counts[0, 0, 2] = [-1.0, 0.0, 0.0, 0.0]                 # noise below zero: clipped, an empty state
    rates = action_rates_from_noisy_sums(counts.ravel(), smoothing=1e-6)
    assert rates.probs.shape == RATE_SHAPE and np.allclose(rates.probs.sum(-1), 1.0)
    assert np.allclose(rates.probs[:, 0, 0], [0.5, 0, 0, 0.5], atol=1e-6)
    assert np.allclose(rates.probs[:, 0, 1], [0.75, 0.25, 0, 0], atol=1e-6)
    # counts 3, 4, 5+ were never reached: the 2-cell rates carry over (no explore past the cap)
    assert np.allclose(rates.probs[:, 0, 2:], rates.probs[:, 0, 1:2], atol=1e-6)
    assert rates.mass[0, 0, 2] == 0.0 and rates.mass[0, 0, 1] == 40.0
    # smoothing pulls a thinly observed state toward the previous count: pseudo-mass m against mass 40
    smooth = action_rates_from_noisy_sums(counts.ravel(), smoothing=40.0)
    assert smooth.probs[0, 0, 1, EXPLORE] == pytest.approx((0 + 40 * smooth.probs[0, 0, 0, EXPLORE]) / 80)
    # noise: the pseudo-mass is at least twice its std
    assert action_rates_from_noisy_sums(counts.ravel(), noise_std=20.0).probs[0, 0, 1, EXPLORE] == pytest.approx(
        smooth.probs[0, 0, 1, EXPLORE])
    assert ActionRates.from_dict(rates.to_dict()).probs.tolist() == rates.probs.tolist()
    # the gate: a released total (here 879) under 10 noise stds of the total (σ·√320) is not used
    assert counts.sum() == 879 and rates.signal is None and rates.usable
    assert action_rates_from_noisy_sums(counts.ravel(), noise_std=4.0).usable           # 879 / 71.6 = 12.3
    weak = action_rates_from_noisy_sums(counts.ravel(), noise_std=6.0)                  # 879 / 107.3 = 8.2
    assert weak.signal == pytest.approx(counts.sum() / (6.0 * np.sqrt(320))) and not weak.usable
    with pytest.raises(ValueError, match="action-rate layout"):
        action_rates_from_noisy_sums(np.zeros(action_rate_length() + 1))


def _day(cells: list[int]) -> np.ndarray:
    """A 48-slot day that starts at home (cell 0) and visits ``cells`` in turn, 4 slots each, then goes home."""
    day = np.zeros(48, dtype=np.int64)
    for i, c in enumerate(cells):
        day[4 + 4 * i: 8 + 4 * i] = c
    return day


def _released(devices: list[list[list[int]]]) -> np.ndarray:
    """The summed action-rate parts of devices, each a list of days (lists of the cells visited after home)."""
    return sum(action_rate_contribution(np.stack([_day(d) for d in days]), 0, 100) for days in devices)


def test_the_day_cells_limit_is_where_the_released_days_stop():
    # days of 1–4 cells (home and up to three more): the released rates never explore from a fourth cell
    sparse = [[[], [1], [1, 2], [1, 2, 3]] * 5, [[4, 5, 6], [4]] * 10]
    assert day_cells_limit(_released(sparse)) == 4
    assert action_rates_from_noisy_sums(_released(sparse)).max_cells == 4
    # one device of three has days of at most 2 cells; the others' days stop at 3: 3
    assert day_cells_limit(_released([[[1]] * 4, [[1, 2]] * 6, [[7, 8]] * 9])) == 3
    # a fifth cell on some days: the table cannot tell 5 from 6 or 20, so no limit
    assert day_cells_limit(_released(sparse + [[[1, 2, 3, 4]] + [[1]] * 9])) is None
    # the share by hand: 30 devices of one-cell days (home all day) and one device whose days all reach a second
    # cell; the share of days reaching two cells is 1/31 (devices of equal weight): above 0.1%, and none
    # reaches a third
    assert day_cells_limit(_released([[[]]] * 30 + [[[1]]])) == 2
    # ... and with 2,000 such devices the one's share is 1/2001 < 0.1%: the limit is one cell
    assert day_cells_limit(_released([[[]]] * 2000 + [[[1]]])) == 1
    assert 1 / 2001 < RARE_DAY_SHARE < 1 / 31
    # nothing released: no limit
    assert day_cells_limit(np.zeros(action_rate_length())) is None


def test_under_noise_the_limit_needs_a_clear_table():
    sums = _released([[[1], [1, 2], [1, 2, 3]]] * 200)               # 200 devices, days of at most 4 cells
    assert day_cells_limit(sums) == 4
    # noise of std 0.01 an entry: the share's std is 47 · 0.01 · 4 / ~200 ≈ 0.009, far above 0.1%: no limit,
    # even though the noise-free counts say so (and even with a lucky draw that puts them at zero)
    assert day_cells_limit(sums, noise_std=0.01) is None
    assert action_rates_from_noisy_sums(sums, noise_std=0.01).max_cells is None
    # a very small noise leaves it
    assert day_cells_limit(sums, noise_std=1e-6) == 4
    rates = action_rates_from_noisy_sums(sums)
    assert ActionRates.from_dict(rates.to_dict()).max_cells == 4
    old = rates.to_dict()
    del old["max_cells"]                                            # a checkpoint written before the limit
    assert ActionRates.from_dict(old).max_cells is None


def test_rule_days_and_cloning_keep_the_environments_limit():
    geometry = _geometry()
    rng = np.random.default_rng(2)
    homes = rng.integers(0, 40, 200).astype(np.int32)
    rates = _capped_rates(explore=0.3)                 # explores with 1–3 cells: would reach 4
    days = sample_rule_days(rates, EPREnvironment(geometry, rng=rng, max_cells=3), homes, homes.copy(), rng)
    k = np.array([len(np.unique(d)) for d in days.days])
    assert k.max() == 3 and days.max_cells == 3
    # the cloning targets are the table's rates renormalised over the limited mask: no explore at 3 cells
    at_limit = distinct_so_far(days.days)[:, :-1] == 3
    assert at_limit.any() and (days.targets[..., EXPLORE][at_limit] == 0).all()
    assert (days.targets[..., EXPLORE][~at_limit] > 0.2).all()

    def clone(rule_days):
        torch.manual_seed(0)
        return behaviour_clone(Policy(PolicyConfig(n_cells=40, d_model=16, n_layers=1)), rule_days, geometry.cells,
                               epochs=1, lr=1e-3, batch_size=64, generator=torch.Generator().manual_seed(0))

    # cloning normalises over the limited mask: the untrained policy's explore share at the limit is left out
    limited, unlimited = clone(days), clone(replace(days, max_cells=None))
    assert np.isfinite(limited).all() and limited[0] < unlimited[0]


def _geometry(n=40, seed=3):
    rng = np.random.default_rng(seed)
    cells = np.column_stack([39.9 + rng.random(n) * 0.2, 116.3 + rng.random(n) * 0.2])
    return CellGeometry.build(cells, candidates=20)


def _capped_rates(explore=0.08) -> ActionRates:
    """Explore with probability ``explore`` with 1–3 distinct cells so far, never with 4 or more (days stop at 4
    cells); return 0.02, home 0.05 away."""
    probs = np.zeros(RATE_SHAPE)
    probs[..., STAY] = 1.0
    probs[:, :, :3, EXPLORE] = explore
    probs[..., RETURN] = 0.02
    probs[:, 0, :, HOME] = 0.05
    probs[..., STAY] -= probs[..., 1:].sum(-1)
    return ActionRates(probs, np.ones(RATE_SHAPE[:-1]))


def test_rule_days_follow_the_table_and_respect_its_cap():
    geometry = _geometry()
    rng = np.random.default_rng(0)
    n = 400
    homes = rng.integers(0, 40, n).astype(np.int32)
    env = EPREnvironment(geometry, rng=rng)
    days = sample_rule_days(_capped_rates(), env, homes, homes.copy(), rng)
    k = np.array([len(np.unique(d)) for d in days.days])
    assert k.max() == 4 and (k == 4).mean() > 0.3           # the cap, reached often
    assert days.actions.shape == (n, 47) and np.allclose(days.targets.sum(-1), 1.0)
    # the realised decisions' frequencies by state are the table's (masked) rates
    counts = decision_counts(days.days, days.homes)
    away_1 = counts[:, 0, 0].sum(0)                           # away from home with one cell: never (start home)
    at_home_1 = counts[:, 1, 0].sum(0)
    assert away_1.sum() == 0
    assert at_home_1[EXPLORE] / at_home_1.sum() == pytest.approx(0.08, abs=0.01)
    assert counts[:, :, 3:, EXPLORE].sum() == 0


def test_behaviour_cloning_reproduces_a_known_rate_table():
    """After cloning, the policy's own π(explore | state) on fresh rule days matches the table: ~0.15 below
    the cap, ~0 at it — the day-level cap learned from rates alone."""
    geometry = _geometry()
    rates = _capped_rates(explore=0.15)
    rng = np.random.default_rng(1)
    homes = rng.integers(0, 40, 512).astype(np.int32)
    train = sample_rule_days(rates, EPREnvironment(geometry, rng=rng), homes, homes.copy(), rng)
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(n_cells=40, d_model=32, n_layers=1))
    losses = behaviour_clone(policy, train, geometry.cells, epochs=30, lr=3e-3, batch_size=64,
                             generator=torch.Generator().manual_seed(0))
    assert losses[-1] < losses[0] * 0.6
    from pategail.sdk.features import action_mask, state_features
    from pategail.server.policy import masked_log_probs
    test = sample_rule_days(rates, EPREnvironment(geometry, rng=rng), homes[:256], homes[:256].copy(), rng)
    feats = torch.from_numpy(state_features(test.days, test.homes, geometry.cells))
    masks = torch.from_numpy(action_mask(test.days, test.homes)[:, :-1])
    with torch.no_grad():
        p = masked_log_probs(policy(torch.from_numpy(test.days.astype(np.int64)), feats)[0][:, :-1], masks).exp()
    k = count_bucket(np.round(feats[:, :-1, 5].numpy() * 48).astype(int))
    explore = p[..., EXPLORE].numpy()
    assert explore[k < 3].mean() == pytest.approx(0.15, abs=0.04)
    assert explore[k == 3].mean() < 0.03                     # at the cap (4 cells): the table says 0
    assert np.abs(p.numpy() - test.targets).sum(-1).mean() < 0.1    # whole distributions, every state


def _rollout(policy, geometry, n=16, seed=0):
    from pategail.server.sampling import sample_rollout
    rng = np.random.default_rng(seed)
    homes = rng.integers(0, 40, n).astype(np.int32)
    rollout, _ = sample_rollout(policy, geometry, homes, homes.copy(), rng, alpha=0.96)
    return rollout.__class__(**{**vars(rollout), "rewards": rng.random(rollout.actions.shape).astype(np.float32)})


def test_the_anchor_off_is_the_update_as_before_and_on_pulls_toward_the_anchor():
    from pategail.server.ppo import PPOConfig, ppo_update
    geometry = _geometry()
    torch.manual_seed(0)
    base = Policy(PolicyConfig(n_cells=40, d_model=16, n_layers=1))
    rollout = _rollout(base, geometry)
    anchor = Policy(base.config)
    anchor.load_state_dict(base.state_dict())

    def update(cfg, anchor_policy):
        p = Policy(base.config)
        p.load_state_dict(base.state_dict())
        opt = torch.optim.Adam(p.parameters(), lr=cfg.learning_rate)
        stats = ppo_update(p, opt, rollout, cfg, torch.Generator().manual_seed(0), anchor_policy)
        return p, stats

    plain, _ = update(PPOConfig(n_epochs=3, learning_rate=3e-3), None)
    zero, stats = update(PPOConfig(n_epochs=3, learning_rate=3e-3, anchor_coef=0.0), anchor)   # no term
    assert "anchor_kl" not in stats
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), zero.state_dict().values()))
    strong, stats = update(PPOConfig(n_epochs=3, learning_rate=3e-3, anchor_coef=50.0), anchor)
    assert stats["anchor_kl"] >= 0

    def kl_to_anchor(p):
        from pategail.server.ppo import anchor_log_probs
        cells = torch.from_numpy(rollout.cells)
        feats = torch.from_numpy(rollout.features)
        masks = torch.from_numpy(rollout.masks[:, :-1])
        ref = anchor_log_probs(anchor, cells, feats, masks)
        cur = anchor_log_probs(p, cells, feats, masks)
        return float((ref.exp() * torch.where(masks, ref - cur, torch.zeros_like(ref))).sum(-1).mean())

    assert kl_to_anchor(strong) < 0.5 * kl_to_anchor(plain)
    with pytest.raises(ValueError, match="anchor_coef"):
        PPOConfig(anchor_coef=-1.0)


def test_the_plan_accounts_the_larger_l1_bound_and_old_plans_read_as_before():
    from pategail.sdk.accounting import laplace_vector_sensitivity
    from pategail.server.privacy.plan import PrivacyPlan, plan_privacy
    values = 12_977
    old = plan_privacy(8.0, 1e-5, 2.0, 2_001, env_values=values, env_fraction=0.1)
    new = plan_privacy(8.0, 1e-5, 2.0, 2_001, env_values=values, env_fraction=0.1, env_l1_bound=10.0)
    assert old.env_l1_bound == 9.0 and new.env_l1_bound == 10.0
    assert new.env_sum_noise_scale == pytest.approx(laplace_vector_sensitivity(10.0, values) / 0.8, rel=1e-12)
    assert new.env_noise_multiplier == pytest.approx(old.env_noise_multiplier, rel=1e-12) == 1.25
    noise = new.release_noise("initial_states")
    assert noise.env_l1_bound == 10.0
    assert noise.accounting(values) == old.release_noise("initial_states").accounting(values)
    legacy = {k: v for k, v in old.to_dict().items() if k != "env_l1_bound"}
    assert PrivacyPlan.from_dict(legacy) == old


def test_a_device_with_the_part_checks_and_clips_at_the_larger_bound():
    from pategail.sdk.accounting import QueryRelease, laplace_vector_sensitivity
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.errors import RoundRefused
    from pategail.sdk.secagg.ledger import round_release
    from pategail.sdk.secagg.policy import DeclaredPlan
    m = 1000
    d10 = laplace_vector_sensitivity(10.0, m)
    cfg = RoundConfig(1, (1, 2, 3, 4), m, 4, 3, 0, 1.25 * d10, 1.25 * d10, bytes(32), bytes(32))
    assert round_release(cfg, environment=True, env_l1_bound=10.0) == QueryRelease(1.25, None, 1)
    policy = DeclaredPlan(8.0, 1e-5, 500.0, 500.0, 0.8, env_noise_multiplier=1.25).policy()
    policy.check(cfg, environment=True, env_l1_bound=10.0)
    # noise sized for the layout without the part (bound 9) is too little for a device that sends it
    short = RoundConfig(1, (1, 2, 3, 4), m, 4, 3, 0, 1.25 * laplace_vector_sensitivity(9.0, m),
                        1.25 * laplace_vector_sensitivity(9.0, m), bytes(32), bytes(32))
    policy.check(short, environment=True)
    with pytest.raises(RoundRefused, match="environment noise multiplier"):
        policy.check(short, environment=True, env_l1_bound=10.0)
