"""PPO's loss terms and update step on tiny cases valued by hand.

A table "policy" (one learnable logit row and value per day and slot) stands in for the transformer, so
the probabilities, ratios, advantages and entropies that ``ppo_update`` sees are known exactly. With one
epoch and one minibatch, the diagnostics it returns are the loss terms at the starting parameters.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pategail.server.ppo import PPOConfig, Rollout, ppo_update


class TablePolicy(torch.nn.Module):
    """logits[day, slot, action] and values[day, slot] as free parameters; the day is cells[:, 0]."""

    def __init__(self, logits: np.ndarray, values: np.ndarray):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))
        self.values = torch.nn.Parameter(torch.as_tensor(values, dtype=torch.float32))

    def forward(self, cells, features):
        day = cells[:, 0]
        return self.logits[day], self.values[day]


N, T = 2, 3                    # two days, two decisions each (slot 2 is the day's end)
# slot 0: all four actions possible; slot 1: stay and explore only; slot 2 (no decision): stay only
MASKS = np.zeros((N, T, 4), dtype=bool)
MASKS[:, 0, :] = True
MASKS[:, 1, [0, 3]] = True
MASKS[:, 2, 0] = True
ACTIONS = np.array([[1, 3], [2, 0]])
# uniform over the possible actions: log π = ln(1/4) at slot 0, ln(1/2) at slot 1
LOGP_NOW = np.log(np.array([[0.25, 0.5], [0.25, 0.5]]))
RATIOS = np.array([[0.9, 1.5], [1.1, 0.5]])
REWARDS = np.array([[1.0, 2.0], [3.0, -2.0]])


def rollout(rewards=REWARDS, ratios=RATIOS, masks=MASKS):
    cells = np.repeat(np.arange(N)[:, None], T, axis=1)
    feats = np.zeros((N, T, 11), dtype=np.float32)
    old = (LOGP_NOW - np.log(ratios)).astype(np.float32)   # ratio = π_now / π_old
    return Rollout(cells, feats, masks, ACTIONS, old, np.zeros((N, T - 1), np.float32),
                   np.asarray(rewards, np.float32))


def one_step(config: PPOConfig, logits=None, values=None, lr=0.0, **kw):
    policy = TablePolicy(np.zeros((N, T, 4)) if logits is None else logits,
                         np.zeros((N, T)) if values is None else values)
    opt = torch.optim.SGD(policy.parameters(), lr=lr)
    stats = ppo_update(policy, opt, rollout(**kw), config, torch.Generator().manual_seed(0))
    return policy, stats


# gae_lambda = 0 and zero values: A_t = r_t exactly, returns = r_t (rewards as given: scale_rewards, on by
# on by default, would divide them by their returns' spread; it has its own test in test_ppo.py)
BASE = dict(n_epochs=1, batch_size=N, gae_lambda=0.0, gamma=0.5, clip_range=0.2, max_grad_norm=1e6,
            scale_rewards=False)


def test_clipped_surrogate_takes_the_minimum_with_normalised_advantages():
    _, stats = one_step(PPOConfig(**BASE))
    # advantages [1, 2, 3, -2]: mean 1, sample std sqrt(14/3) -> normalised [0, 1, 2, -3] / s
    s = math.sqrt(14 / 3)
    # ratios 0.9, 1.5, 1.1, 0.5 with clip 0.2: min(rA, clip(r)A) = 0, 1.2/s, 2.2/s, min(-1.5, -2.4)/s
    expected = -(0 + 1.2 + 2.2 - 2.4) / s / 4
    assert stats["policy_loss"] == pytest.approx(expected, abs=1e-5)
    # the max instead of the min would give -(0 + 1.5 + 2.2 - 1.5) / s / 4: clearly different
    assert abs(expected + 2.2 / s / 4) > 0.1


def test_surrogate_without_advantage_normalisation():
    _, stats = one_step(PPOConfig(**BASE, normalize_advantage=False))
    # raw advantages [1, 2, 3, -2]: 0.9, min(3, 2.4), 3.3, min(-1, -1.6)
    assert stats["policy_loss"] == pytest.approx(-(0.9 + 2.4 + 3.3 - 1.6) / 4, abs=1e-5)


def test_clip_range_sets_what_is_clipped():
    _, stats = one_step(PPOConfig(**{**BASE, "clip_range": 0.6}))
    # nothing is clipped at 0.6: the plain ratio-weighted advantages
    s = math.sqrt(14 / 3)
    assert stats["policy_loss"] == pytest.approx(-(0 + 1.5 + 2.2 - 1.5) / s / 4, abs=1e-5)
    assert stats["clip_fraction"] == 0.0


def test_clip_fraction_and_approx_kl_by_hand():
    _, stats = one_step(PPOConfig(**BASE))
    assert stats["clip_fraction"] == pytest.approx(0.5)            # 1.5 and 0.5 are outside [0.8, 1.2]
    kl = np.mean([(r - 1) - math.log(r) for r in RATIOS.ravel()])
    assert stats["approx_kl"] == pytest.approx(kl, rel=1e-5)


def test_entropy_is_that_of_the_masked_distribution_of_the_decision_slots():
    _, stats = one_step(PPOConfig(**BASE))
    # uniform over 4 possible actions at slot 0 and over 2 at slot 1; slot 2's single action never counts
    assert stats["entropy"] == pytest.approx((math.log(4) + math.log(2)) / 2, rel=1e-6)


def test_masks_of_slot_t_apply_to_the_decision_at_slot_t():
    # only slot 1 is restricted: any shift of the masks changes the probability of slot 1's action
    masks = np.ones((N, T, 4), dtype=bool)
    masks[:, 1, [1, 2]] = False
    _, stats = one_step(PPOConfig(**BASE), masks=masks)
    assert stats["entropy"] == pytest.approx((math.log(4) + math.log(2)) / 2, rel=1e-6)
    # slot 1's actions (3 and 0) have probability 1/2 there: the ratios are exactly those built in
    kl = np.mean([(r - 1) - math.log(r) for r in RATIOS.ravel()])
    assert stats["approx_kl"] == pytest.approx(kl, rel=1e-5)


def test_value_loss_is_the_mean_squared_error_to_the_returns():
    values = np.array([[0.5, -1.0, 7.0], [2.0, 0.0, 9.0]])   # slot 2's value is not a prediction target
    config = PPOConfig(**{**BASE, "gamma": 1.0})
    _, stats = one_step(config, values=values)
    # the rollout's recorded values are zero: returns = GAE(λ=0) + 0 = r_t + γ·0 - 0 = rewards
    expected = np.mean((values[:, :2] - REWARDS) ** 2)
    assert stats["value_loss"] == pytest.approx(expected, rel=1e-6)


def test_one_sgd_step_follows_the_gradient_of_the_documented_loss():
    """Parameter change = -lr * d/dθ [policy_loss + vf_coef * value_loss - ent_coef * entropy]."""
    rng = np.random.default_rng(3)
    logits0, values0 = rng.normal(size=(N, T, 4)), rng.normal(size=(N, T))
    config = PPOConfig(**{**BASE, "ent_coef": 0.3, "vf_coef": 0.7})
    policy, _ = one_step(config, logits=logits0, values=values0, lr=0.1)

    # the same loss written out independently, differentiated by autograd
    lg = torch.tensor(logits0, requires_grad=True)
    v = torch.tensor(values0, requires_grad=True)
    m = torch.as_tensor(MASKS[:, :-1])
    logp_all = torch.log_softmax(lg[:, :-1].masked_fill(~m, -1e9), -1)
    logp = logp_all.gather(-1, torch.as_tensor(ACTIONS)[..., None])[..., 0]
    old = torch.as_tensor(LOGP_NOW - np.log(RATIOS))
    ratio = torch.exp(logp - old)
    adv = torch.as_tensor(REWARDS)
    adv = (adv - adv.mean()) / adv.std()
    pl = -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    vl = ((v[:, :-1] - torch.as_tensor(REWARDS)) ** 2).mean()
    ent = -(logp_all.exp() * logp_all).sum(-1).mean()
    (pl + 0.7 * vl - 0.3 * ent).backward()
    np.testing.assert_allclose(policy.logits.detach().numpy(), logits0 - 0.1 * lg.grad.numpy(), atol=1e-5)
    np.testing.assert_allclose(policy.values.detach().numpy(), values0 - 0.1 * v.grad.numpy(), atol=1e-5)


def test_entropy_bonus_raises_the_entropy():
    """With every advantage zero, the only force on the logits is the entropy bonus: entropy must rise."""
    logits = np.zeros((N, T, 4))
    logits[:, :, 0] = 2.0
    config = PPOConfig(**{**BASE, "ent_coef": 0.5})
    policy, before = one_step(config, logits=logits, lr=0.5, rewards=np.zeros((N, T - 1)))
    _, after = one_step(config, logits=policy.logits.detach().numpy(), rewards=np.zeros((N, T - 1)))
    assert after["entropy"] > before["entropy"] + 1e-3


def test_gradient_norm_is_clipped():
    rng = np.random.default_rng(4)
    logits0, values0 = rng.normal(size=(N, T, 4)), 10 * rng.normal(size=(N, T))
    config = PPOConfig(**{**BASE, "max_grad_norm": 0.25})
    policy, _ = one_step(config, logits=logits0, values=values0, lr=1.0)
    step = np.concatenate([(policy.logits.detach().numpy() - logits0).ravel(),
                           (policy.values.detach().numpy() - values0).ravel()])
    assert np.linalg.norm(step) == pytest.approx(0.25, rel=1e-4)   # the raw gradient is far larger


def test_gae_discount_and_lambda_enter_the_advantages():
    # λ = 1, γ = 0.5, zero values: A_0 = r_0 + 0.5 r_1; without normalisation the surrogate at ratio 1 is -mean(A)
    ratios = np.ones((N, T - 1))
    config = PPOConfig(**{**BASE, "gae_lambda": 1.0, "normalize_advantage": False})
    _, stats = one_step(config, ratios=ratios)
    adv = [1 + 0.5 * 2, 2, 3 + 0.5 * -2, -2]
    assert stats["policy_loss"] == pytest.approx(-np.mean(adv), abs=1e-5)
    assert stats["approx_kl"] == pytest.approx(0.0, abs=1e-6) and stats["clip_fraction"] == 0.0


def test_minibatches_of_one_day_normalise_within_the_day():
    # day 0: A = [1, 2] -> [-1, 1]/sqrt(2); day 1: A = [3, -2] -> [1, -1]/sqrt(2) (sample std of two values)
    # day 0: min(0.9·-a, 0.9·-a) + min(1.5a, 1.2a); day 1: min(1.1a, 1.1a) + min(0.5·-a, 0.8·-a), a = 1/sqrt(2)
    _, stats = one_step(PPOConfig(**{**BASE, "batch_size": 1}))
    a = 1 / math.sqrt(2)
    losses = [-(-0.9 * a + 1.2 * a) / 2, -(1.1 * a - 0.8 * a) / 2]
    assert stats["policy_loss"] == pytest.approx(np.mean(losses), abs=1e-5)
    assert stats["clip_fraction"] == pytest.approx(0.5)


def test_a_single_advantage_is_not_normalised():
    ratios = np.array([[1.5, 1.0], [1.0, 1.0]])
    rollout_one = rollout(ratios=ratios)
    policy = TablePolicy(np.zeros((N, T, 4)), np.zeros((N, T)))
    one_day = Rollout(rollout_one.cells[:1], rollout_one.features[:1], rollout_one.masks[:1],
                      rollout_one.actions[:1, :1], rollout_one.log_probs[:1, :1], rollout_one.values[:1, :1],
                      rollout_one.rewards[:1, :1])
    stats = ppo_update(policy, torch.optim.SGD(policy.parameters(), lr=0.0), one_day, PPOConfig(**BASE),
                       torch.Generator().manual_seed(0))
    # one decision, A = r_0 = 1 (λ = 0, episode ends after it): min(1.5, 1.2) = 1.2
    assert stats["policy_loss"] == pytest.approx(-1.2, abs=1e-5)


class CountingSGD(torch.optim.SGD):
    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


@pytest.mark.parametrize("n_epochs, batch_size, steps", [(1, 2, 1), (3, 2, 3), (2, 1, 4), (3, 5, 3)])
def test_one_optimizer_step_per_minibatch_and_epoch(n_epochs, batch_size, steps):
    policy = TablePolicy(np.zeros((N, T, 4)), np.zeros((N, T)))
    opt = CountingSGD(policy.parameters(), lr=0.01)
    ppo_update(policy, opt, rollout(), PPOConfig(**{**BASE, "n_epochs": n_epochs, "batch_size": batch_size}),
               torch.Generator().manual_seed(0))
    assert opt.steps == steps


class SharedPolicy(torch.nn.Module):
    """One logit row per slot shared by all days: the minibatch order changes where SGD ends up."""

    def __init__(self):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(T, 4))
        self.values = torch.nn.Parameter(torch.zeros(T))

    def forward(self, cells, features):
        b = cells.shape[0]
        return self.logits.expand(b, T, 4), self.values.expand(b, T)


def test_minibatch_order_comes_from_the_generator():
    def run(seed):
        policy = SharedPolicy()
        ppo_update(policy, torch.optim.SGD(policy.parameters(), lr=0.5), rollout(),
                   PPOConfig(**{**BASE, "batch_size": 1, "n_epochs": 3}), torch.Generator().manual_seed(seed))
        return policy.logits.detach().clone()
    same = run(0)
    assert torch.equal(same, run(0))
    assert any(not torch.equal(same, run(s)) for s in range(1, 6))


def test_explained_variance_of_the_rollout_is_reported():
    values = np.array([[0.5, 1.0], [2.0, -1.0]], dtype=np.float32)
    r = rollout()
    r = Rollout(r.cells, r.features, r.masks, r.actions, r.log_probs, values, r.rewards)
    policy = TablePolicy(np.zeros((N, T, 4)), np.zeros((N, T)))
    stats = ppo_update(policy, torch.optim.SGD(policy.parameters(), lr=0.0), r, PPOConfig(**BASE),
                       torch.Generator().manual_seed(0))
    # λ = 0, γ = 0.5: returns = r_t + 0.5 V_{t+1} (0 after the last step)
    returns = np.array([[1 + 0.5 * 1.0, 2.0], [3 + 0.5 * -1.0, -2.0]])
    ev = 1 - np.var(returns - values) / np.var(returns)
    assert stats["explained_variance"] == pytest.approx(ev, rel=1e-6)


@pytest.mark.parametrize("field, good, bad", [
    ("learning_rate", 1e-9, 0.0), ("n_epochs", 1, 0), ("batch_size", 1, 0), ("gamma", 1.0, 1.01),
    ("gamma", 1e-9, 0.0), ("gae_lambda", 0.0, -0.01), ("gae_lambda", 1.0, 1.01), ("clip_range", 1e-9, 0.0),
    ("ent_coef", 0.0, -0.01), ("vf_coef", 0.0, -0.01), ("max_grad_norm", 1e-9, 0.0)])
def test_config_limits(field, good, bad):
    PPOConfig(**{field: good})
    with pytest.raises(ValueError):
        PPOConfig(**{field: bad})


def test_step_scale_moves_the_policy_that_share_of_the_full_update():
    """With Adam (whose step does not shrink with its gradients) the policy ends exactly ``step_scale`` of the
    way to where the full update takes it; 0 leaves it where it was."""
    def update(scale):
        policy = TablePolicy(np.zeros((N, T, 4)), np.zeros((N, T)))
        opt = torch.optim.Adam(policy.parameters(), lr=0.05)
        ppo_update(policy, opt, rollout(), PPOConfig(**{**BASE, "n_epochs": 3}), torch.Generator().manual_seed(0),
                   step_scale=scale)
        return [p.detach().clone() for p in policy.parameters()]

    full, third, none = update(1.0), update(1 / 3), update(0.0)
    assert max(float(p.abs().max()) for p in full) > 0.05           # the full update moved something
    for f, t, z in zip(full, third, none):
        torch.testing.assert_close(t, f / 3, rtol=1e-5, atol=1e-7)
        assert not z.any()
    with pytest.raises(ValueError, match="step_scale"):
        update(1.5)
