import numpy as np
import pytest
import torch

from pategail.server.policy import Policy, PolicyConfig
from pategail.server.ppo import PPOConfig, Rollout, compute_gae, explained_variance, ppo_update


def test_gae_hand_computed():
    # two steps, gamma 0.5, lambda 0.5, values [1, 2], rewards [1, 1], episode ends after step 1:
    # delta_1 = 1 + 0 - 2 = -1;            A_1 = -1
    # delta_0 = 1 + 0.5*2 - 1 = 1;         A_0 = 1 + 0.25 * (-1) = 0.75
    adv, ret = compute_gae(np.array([[1.0, 1.0]]), np.array([[1.0, 2.0]]), 0.5, 0.5)
    np.testing.assert_allclose(adv, [[0.75, -1.0]])
    np.testing.assert_allclose(ret, [[1.75, 1.0]])
    # bootstrapping from a last value of 4: delta_1 = 1 + 2 - 2 = 1, A_1 = 1, A_0 = 1 + 0.25 = 1.25
    adv, _ = compute_gae(np.array([[1.0, 1.0]]), np.array([[1.0, 2.0]]), 0.5, 0.5, last_values=np.array([4.0]))
    np.testing.assert_allclose(adv, [[1.25, 1.0]])


def test_gae_lambda_one_is_discounted_return_minus_value():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(3, 6)), rng.normal(size=(3, 6))
    adv, ret = compute_gae(r, v, 0.9, 1.0)
    disc = np.array([[sum(0.9 ** k * r[i, t + k] for k in range(6 - t)) for t in range(6)] for i in range(3)])
    np.testing.assert_allclose(ret, disc)
    np.testing.assert_allclose(adv, disc - v)


def test_explained_variance():
    y = np.array([1.0, 2.0, 3.0])
    assert explained_variance(y, y) == 1.0
    assert explained_variance(np.full(3, 2.0), y) == 0.0


def _rollout(rng, n=32, T=6, n_cells=5):
    cells = rng.integers(0, n_cells, (n, T))
    feats = rng.normal(size=(n, T, 11)).astype(np.float32)
    masks = np.ones((n, T, 4), dtype=bool)
    return cells, feats, masks


def test_ppo_raises_the_probability_of_rewarded_actions():
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    policy = Policy(PolicyConfig(n_cells=5, d_model=16, n_heads=2, n_layers=1, cell_dim=8, d_ff=32))
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    cells, feats, masks = _rollout(rng)
    gen = torch.Generator().manual_seed(0)

    def p_home():
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(cells), torch.as_tensor(feats))
            return torch.softmax(logits[:, :-1], -1)[..., 1].mean().item()

    before = p_home()
    for _ in range(5):
        actions = rng.integers(0, 4, (32, 5))
        with torch.no_grad():
            logits, values = policy(torch.as_tensor(cells), torch.as_tensor(feats))
            logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, torch.as_tensor(actions)[..., None])[..., 0]
        rollout = Rollout(cells, feats, masks, actions, logp.numpy(), values[:, :-1].numpy(),
                          (actions == 1).astype(np.float32))           # only "home" is rewarded
        stats = ppo_update(policy, opt, rollout, PPOConfig(n_epochs=2, batch_size=8, ent_coef=0.0), gen)
    assert p_home() > before + 0.1
    assert set(stats) >= {"approx_kl", "clip_fraction", "explained_variance", "entropy"}
    assert stats["approx_kl"] > 1e-4                    # the policy moved away from the one that sampled


def test_ratio_is_one_on_the_first_minibatch_and_clipping_acts_later():
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    cells, feats, masks = _rollout(rng)
    actions = rng.integers(0, 4, (32, 5))

    def fresh():
        torch.manual_seed(0)
        policy = Policy(PolicyConfig(n_cells=5, d_model=16, n_heads=2, n_layers=1, cell_dim=8, d_ff=32))
        with torch.no_grad():
            logits, values = policy(torch.as_tensor(cells), torch.as_tensor(feats))
            logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, torch.as_tensor(actions)[..., None])[..., 0]
        rollout = Rollout(cells, feats, masks, actions, logp.numpy(), values[:, :-1].numpy(),
                          np.random.default_rng(3).normal(size=(32, 5)).astype(np.float32))
        return policy, rollout

    # one epoch, one minibatch: the log-probs recorded at sampling are the current ones, so ratio == 1
    policy, rollout = fresh()
    opt = torch.optim.Adam(policy.parameters(), lr=0.05)
    first = ppo_update(policy, opt, rollout, PPOConfig(n_epochs=1, batch_size=32, learning_rate=0.05),
                       torch.Generator().manual_seed(0))
    assert first["approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert first["clip_fraction"] == 0.0
    # later epochs see the moved policy: with big steps the ratios leave the clip range
    policy, rollout = fresh()
    opt = torch.optim.Adam(policy.parameters(), lr=0.05)
    stats = ppo_update(policy, opt, rollout, PPOConfig(n_epochs=6, batch_size=32, learning_rate=0.05),
                       torch.Generator().manual_seed(0))
    assert stats["clip_fraction"] > 0.05 and stats["approx_kl"] > 1e-3    # the original code's never did


def test_config_is_validated():
    with pytest.raises(ValueError):
        PPOConfig(gamma=0)
    with pytest.raises(ValueError):
        PPOConfig(batch_size=0)


def test_discounted_returns_hand_computed():
    from pategail.server.ppo import discounted_returns
    np.testing.assert_allclose(discounted_returns(np.array([[1.0, 2.0, 4.0]]), 0.5), [[1 + 1 + 1, 2 + 2, 4]])


def test_scaled_rewards_make_the_update_independent_of_the_reward_scale():
    """With scale_rewards, multiplying every reward by 10 changes nothing (advantages are normalised anyway,
    and the value targets are divided by the returns' spread); without it the value loss grows 100-fold and
    the clipped gradient step of the policy shrinks."""
    from dataclasses import replace
    rng = np.random.default_rng(2)
    cells, feats, masks = _rollout(rng)
    actions = rng.integers(0, 4, (32, 5))
    rollout = Rollout(cells, feats, masks, actions, np.full((32, 5), np.log(0.25), np.float32),
                      np.zeros((32, 5), np.float32), rng.normal(size=(32, 5)).astype(np.float32))
    outcome = {}
    for scaled in (True, False):
        for factor in (1.0, 10.0):
            torch.manual_seed(0)
            policy = Policy(PolicyConfig(n_cells=5, d_model=16, n_heads=2, n_layers=1, cell_dim=8, d_ff=32))
            optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
            cfg = PPOConfig(n_epochs=2, batch_size=8, scale_rewards=scaled)
            stats = ppo_update(policy, optimizer, replace(rollout, rewards=rollout.rewards * factor), cfg,
                               torch.Generator().manual_seed(0))
            outcome[scaled, factor] = (torch.cat([p.detach().flatten() for p in policy.parameters()]),
                                       stats["value_loss"])
    assert torch.allclose(outcome[True, 1.0][0], outcome[True, 10.0][0], atol=1e-5)
    assert outcome[True, 1.0][1] == pytest.approx(outcome[True, 10.0][1], rel=1e-4)
    assert not torch.allclose(outcome[False, 1.0][0], outcome[False, 10.0][0], atol=1e-5)
    assert outcome[False, 10.0][1] > 50 * outcome[False, 1.0][1]


def test_distinct_balance_weights_give_every_count_the_same_total_weight():
    from pategail.server.ppo import distinct_balance_weights

    features = np.zeros((2, 4, 11), np.float32)
    features[..., 5] = np.array([[1, 1, 1, 2], [1, 1, 1, 5]]) / 48          # six decisions at 1 cell, one at 2, one at 5
    w = distinct_balance_weights(features)
    assert w.mean() == pytest.approx(1.0)
    counts = np.rint(features[..., 5] * 48)
    totals = [w[counts == k].sum() for k in (1, 2, 5)]
    np.testing.assert_allclose(totals, totals[0], rtol=1e-6)
    assert w[0, 3] == pytest.approx(6 * w[0, 0])


def test_balancing_lets_a_rare_state_outweigh_a_common_one():
    """One decision in a rare state (5 cells) is rewarded for "home", 31 in the common state (1 cell) for
    "stay"; with balance_distinct the rare state's preference moves its probability more than without."""
    rng = np.random.default_rng(4)
    cells, feats, masks = _rollout(rng)
    feats[..., 5] = 1 / 48
    feats[0, :, 5] = 5 / 48                                  # day 0 is the rare state throughout
    actions = rng.integers(0, 4, (32, 5))
    rewards = np.where(actions == 0, 1.0, -1.0).astype(np.float32)
    rewards[0] = np.where(actions[0] == 1, 1.0, -1.0)
    rollout = Rollout(cells, feats, masks, actions, np.full((32, 5), np.log(0.25), np.float32),
                      np.zeros((32, 5), np.float32), rewards)
    p_home = {}
    for balanced in (False, True):
        torch.manual_seed(0)
        policy = Policy(PolicyConfig(n_cells=5, d_model=16, n_heads=2, n_layers=1, cell_dim=8, d_ff=32,
                                     distinct_embedding=True))
        optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
        for _ in range(3):
            ppo_update(policy, optimizer, rollout, PPOConfig(n_epochs=2, batch_size=8, ent_coef=0.0, gamma=0.01,
                                                             gae_lambda=0.0, balance_distinct=balanced),
                       torch.Generator().manual_seed(0))
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(cells[:1]), torch.as_tensor(feats[:1]))
        p_home[balanced] = torch.softmax(logits[0, :-1], -1)[:, 1].mean().item()
    assert p_home[True] > p_home[False] + 0.02


def test_tempered_balance_weights_grow_with_the_square_root_of_a_counts_frequency():
    from pategail.server.ppo import distinct_balance_weights

    features = np.zeros((2, 5, 11), np.float32)
    features[..., 5] = np.array([[1, 1, 1, 1, 2], [1, 1, 1, 1, 1]]) / 48          # nine decisions at 1 cell, one at 2
    w = distinct_balance_weights(features, exponent=0.5)
    assert w.mean() == pytest.approx(1.0)
    assert w[0, 4] == pytest.approx(3 * w[0, 0])                                 # (1/9)^-0.5 / (1/1)^-0.5
    counts = np.rint(features[..., 5] * 48)
    assert w[counts == 1].sum() == pytest.approx(3 * w[counts == 2].sum())      # total ∝ √frequency
    np.testing.assert_allclose(distinct_balance_weights(features, exponent=0.0), 1.0)


def test_advantages_by_distinct_centre_each_count_and_keep_its_order():
    from pategail.server.ppo import advantages_by_distinct

    features = np.zeros((2, 4, 11), np.float32)
    features[..., 5] = np.array([[1, 1, 1, 3], [3, 3, 1, 7]]) / 48
    adv = np.array([[5.0, 6.0, 7.0, -2.0], [-1.0, -3.0, 6.0, 9.0]])
    out = advantages_by_distinct(adv, features)
    counts = np.rint(features[..., 5] * 48)
    for k in (1, 3):
        assert out[counts == k].mean() == pytest.approx(0.0, abs=1e-12)
    assert out[1, 3] == 0.0                                                      # a count seen once
    assert out.std() == pytest.approx(1.0)
    # the order within a count is kept: -1 > -2 > -3 at three cells although all lie below the mean
    assert out[1, 0] > out[0, 3] > out[1, 1] and out[1, 0] > 0


def test_per_count_advantages_let_a_rare_state_keep_its_own_order():
    """In a rare state (5 cells) the mostly taken action 0 is better than action 1, but both are rewarded
    far below the common state (1 cell), where the reward does not depend on the action. Standardised per
    minibatch, both advantages are negative there and the many action-0 samples push action 0 down against
    action 1; centred per count, action 0 gains on it."""
    rng = np.random.default_rng(5)
    cells, feats, masks = _rollout(rng)
    feats[..., 5] = 1 / 48
    feats[:4, :, 5] = 5 / 48                                   # days 0-3 are the rare state throughout
    actions = rng.integers(0, 4, (32, 5))
    rewards = rng.uniform(1.0, 2.0, (32, 5)).astype(np.float32)          # the common state: no preference
    actions[:4] = np.where(rng.random((4, 5)) < 0.85, 0, 1)
    rewards[:4] = np.where(actions[:4] == 0, -1.0, -2.0)
    rollout = Rollout(cells, feats, masks, actions, np.full((32, 5), np.log(0.25), np.float32),
                      np.zeros((32, 5), np.float32), rewards)
    p_stay = {}
    for by_count in (None, False, True):
        torch.manual_seed(0)
        policy = Policy(PolicyConfig(n_cells=5, d_model=16, n_heads=2, n_layers=1, cell_dim=8, d_ff=32,
                                     distinct_embedding=True))
        optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
        if by_count is not None:                                # None: the initial policy
            ppo_update(policy, optimizer, rollout, PPOConfig(n_epochs=2, batch_size=8, ent_coef=0.0, gamma=0.01,
                                                             gae_lambda=0.0, advantage_by_distinct=by_count),
                       torch.Generator().manual_seed(0))
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(cells[:4]), torch.as_tensor(feats[:4]))
        p = torch.softmax(logits[:, :-1], -1)
        p_stay[by_count] = (p[..., 0] / (p[..., 0] + p[..., 1])).mean().item()     # action 0 against action 1
    assert p_stay[True] > p_stay[None] + 0.01 and p_stay[False] < p_stay[None] - 0.01


def test_ppo_config_refuses_a_negative_balance_exponent():
    with pytest.raises(ValueError, match="balance_exponent"):
        PPOConfig(balance_exponent=-0.5)
