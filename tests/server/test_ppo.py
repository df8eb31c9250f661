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
