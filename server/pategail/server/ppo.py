"""Proximal policy optimisation (Schulman et al. 2017) of the day policy on aggregated rewards R̂.

One flat loop in the manner of cleanrl / Stable-Baselines3: GAE(γ, λ) as a pure function, then
``n_epochs`` passes over minibatches of whole days (the policy is causal, so one forward pass over a day
gives π(·|s_t) for all its slots), with the clipped surrogate, a value loss, an entropy bonus, per-minibatch
advantage normalisation and gradient-norm clipping. The original code's ratio was identically 1 (old and new
log-probs came from the same forward pass) and its entropy term was 0: here the old log-probs are the ones
recorded at sampling time and the entropy is that of the masked action distribution.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from pategail.server.policy import Policy, masked_log_probs


@dataclass(frozen=True)
class PPOConfig:
    """PPO knobs, named as in Stable-Baselines3; the defaults are the training runs' (chosen on training days,
    the measurements are in the benchmarks' history, ``git show 65b3a3e:BENCHMARKS.md``, "How the defaults were
    chosen")."""

    learning_rate: float = 3e-4
    """Adam step size of the policy and value networks."""
    n_epochs: int = 10
    """Passes over each round's rollout (SB3's default). With 4, the sparse city's policy, nearly all "stay"
    late in training, moved ~1e-4 in KL a round and never learned when real days explore; 10 cut its Radius,
    DailyLoc and I-rank 2.7–2.9× and kept the other cities' metrics."""
    batch_size: int = 64
    """Days per minibatch (each day contributes its 47 decisions)."""
    gamma: float = 0.9
    """Discount factor of the return. A short horizon: the reward of (s, a) already says how real action a looks
    in state s; γ = λ = 0.9 beat SB3's 0.99 / 0.95 on all five km metrics of the training days."""
    gae_lambda: float = 0.9
    """GAE bias/variance trade-off (Schulman et al. 2016)."""
    clip_range: float = 0.2
    """Clipping of the probability ratio in the surrogate."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus: keeps the policy from collapsing on one action early in GAIL."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping: a single large R̂ (noisy rewards under DP) must not blow up an update."""
    normalize_advantage: bool = True
    """Standardise advantages per minibatch, which makes the step size independent of the reward scale."""
    scale_rewards: bool = True
    """Divide the rewards by the standard deviation of their discounted returns before GAE (what
    Stable-Baselines3's VecNormalize does with a running estimate), so that returns and the value loss are
    O(1). Without it, unit-variance rewards at γ = 0.9 gave returns of std 6.3; the value loss's gradient was
    7× the policy loss's, and the shared gradient-norm clip (0.5) shrank every policy step ~40× (approx_kl
    0.001, no ratio ever clipped): the policy hardly followed its advantages."""


    anchor_coef: float = 10.0
    """Weight of KL(π_anchor ‖ π_θ) over the rollout's possible actions, added to the loss when the coordinator
    holds an anchor policy (the behaviour-cloned warm start of the environment's ``action_prior``): GAIL then
    refines the rule model instead of drifting away from it. On the sparse city 10 kept the warm start's day
    shape through 60 rounds (invented days under 1%); 1 let it drift to 4.5%, none to 7.6%."""
    signal_scaled_step: bool = False
    """Under noise, move the policy each round only the estimated share of signal in the released rewards
    (``pategail.server.rewards.reward_signal_share``) of the way PPO's update would: standardised rewards and
    normalised advantages otherwise make a round of mostly noise move the policy as far as a clear one."""

    def __post_init__(self):
        if not self.anchor_coef >= 0:
            raise ValueError(f"anchor_coef must be >= 0, got {self.anchor_coef}")
        if not (self.learning_rate > 0 and self.n_epochs >= 1 and self.batch_size >= 1):
            raise ValueError("learning_rate must be > 0, n_epochs and batch_size >= 1")
        if not (0 < self.gamma <= 1 and 0 <= self.gae_lambda <= 1 and self.clip_range > 0):
            raise ValueError("need 0 < gamma <= 1, 0 <= gae_lambda <= 1, clip_range > 0")
        if min(self.ent_coef, self.vf_coef) < 0 or self.max_grad_norm <= 0:
            raise ValueError("ent_coef and vf_coef must be >= 0, max_grad_norm > 0")


@dataclass(frozen=True)
class Rollout:
    """A batch of sampled days and what PPO needs from the sampling pass (n days, T slots).

    cells int64 (n, T); features float32 (n, T, F) (state features of every slot); masks bool (n, T, 4);
    actions int64 (n, T-1); log_probs float32 (n, T-1) of the actions when sampled; values float32 (n, T-1);
    rewards float32 (n, T-1) — R̂ of each (s_t, a_t).
    """

    cells: np.ndarray
    features: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    rewards: np.ndarray


def compute_gae(rewards: np.ndarray, values: np.ndarray, gamma: float, gae_lambda: float,
                last_values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over a batch of episodes of equal length.

    rewards, values: (n, S) for steps 0..S-1. The episode ends after step S-1; ``last_values`` (n,) is the
    value to bootstrap from there (default 0: the day is over). Returns (advantages, returns), both (n, S):
    δ_t = r_t + γ V_{t+1} − V_t,  A_t = δ_t + γλ A_{t+1},  returns = A + V.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    n, S = rewards.shape
    next_values = np.zeros(n) if last_values is None else np.asarray(last_values, dtype=np.float64)
    adv = np.zeros((n, S))
    running = np.zeros(n)
    for t in range(S - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        running = delta + gamma * gae_lambda * running
        adv[:, t] = running
        next_values = values[:, t]
    return adv, adv + values


def discounted_returns(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """(n, S): G_t = Σ_{k>=t} γ^(k−t) r_k of each episode (rewards (n, S); episodes end after step S−1)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(rewards)
    running = np.zeros(len(rewards))
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + gamma * running
        out[:, t] = running
    return out


def explained_variance(predicted: np.ndarray, target: np.ndarray) -> float:
    """1 − Var[target − predicted] / Var[target]: 1 is perfect, 0 no better than a constant, < 0 worse."""
    var = np.var(target)
    return float("nan") if var == 0 else float(1 - np.var(target - predicted) / var)


def anchor_log_probs(anchor: Policy, cells: torch.Tensor, features: torch.Tensor,
                     masks: torch.Tensor) -> torch.Tensor:
    """float32 (n, T-1, 4): log π_anchor over the possible actions of every decision of a rollout."""
    anchor.eval()
    with torch.no_grad():
        logits, _ = anchor(cells, features)
    return masked_log_probs(logits[:, :-1], masks)


def anchor_kl(logp: torch.Tensor, anchor_logp: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Per-decision KL(π_anchor ‖ π_θ) (...,) from log π_θ and log π_anchor over the 4 actions (..., 4) and the
    possible actions (masks bool, (..., 4)); impossible actions (probability 0 under both) add nothing."""
    return (anchor_logp.exp() * torch.where(masks, anchor_logp - logp, torch.zeros_like(logp))).sum(-1)


class PolicyOptimizer(Protocol):
    """The policy's optimiser as PPO and the coordinator use it (stepped, checkpointed): any
    ``torch.optim.Optimizer``, or the hybrid method's pair of them (``pategail.server.fedavg.hybrid``)."""

    def step(self) -> None: ...

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


def ppo_update(policy: Policy, optimizer: PolicyOptimizer, rollout: Rollout, config: PPOConfig,
               generator: torch.Generator, anchor: Policy | None = None, step_scale: float = 1.0) -> dict:
    """Update ``policy`` in place on one rollout; return the diagnostics of the last epoch and overall.
    ``anchor``: with ``config.anchor_coef`` > 0, the policy the KL term pulls towards. ``step_scale`` in [0, 1]:
    the policy ends ``step_scale`` of the way from where it was to where the update took it (whatever the
    optimiser: Adam's step does not shrink with its gradients)."""
    if not 0.0 <= step_scale <= 1.0:
        raise ValueError(f"step_scale must be in [0, 1], got {step_scale}")
    before = [p.detach().clone() for p in policy.parameters()] if step_scale < 1.0 else None
    rewards = rollout.rewards
    if config.scale_rewards:
        rewards = rewards / (discounted_returns(rewards, config.gamma).std() + 1e-8)
    advantages, returns = compute_gae(rewards, rollout.values, config.gamma, config.gae_lambda)
    cells = torch.as_tensor(rollout.cells, dtype=torch.int64)
    feats = torch.as_tensor(rollout.features, dtype=torch.float32)
    masks = torch.as_tensor(rollout.masks[:, :-1], dtype=torch.bool)
    actions = torch.as_tensor(rollout.actions, dtype=torch.int64)
    old_logp = torch.as_tensor(rollout.log_probs, dtype=torch.float32)
    adv_all = torch.as_tensor(advantages, dtype=torch.float32)
    ret_all = torch.as_tensor(returns, dtype=torch.float32)
    anchored = anchor is not None and config.anchor_coef > 0
    anchor_logp = anchor_log_probs(anchor, cells, feats, masks) if anchor is not None and anchored else None
    n = len(cells)
    stats: dict[str, list[float]] = {"policy_loss": [], "value_loss": [], "entropy": [], "approx_kl": [],
                                     "clip_fraction": []}
    if anchored:
        stats["anchor_kl"] = []
    policy.train()
    for _ in range(config.n_epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, config.batch_size):
            idx = order[start:start + config.batch_size]
            logits, values = policy(cells[idx], feats[idx])
            logp_all = masked_log_probs(logits[:, :-1], masks[idx])
            logp = logp_all.gather(-1, actions[idx, :, None]).squeeze(-1)
            adv = adv_all[idx]
            if config.normalize_advantage and adv.numel() > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            log_ratio = logp - old_logp[idx]
            ratio = log_ratio.exp()
            surrogate = torch.min(ratio * adv, ratio.clamp(1 - config.clip_range, 1 + config.clip_range) * adv)
            policy_loss = -surrogate.mean()
            value_loss = ((values[:, :-1] - ret_all[idx]) ** 2).mean()
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy
            if anchor_logp is not None:
                kl = anchor_kl(logp_all, anchor_logp[idx], masks[idx]).mean()
                loss = loss + config.anchor_coef * kl
                stats["anchor_kl"].append(kl.item())
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
            with torch.no_grad():
                stats["policy_loss"].append(policy_loss.item())
                stats["value_loss"].append(value_loss.item())
                stats["entropy"].append(entropy.item())
                # the low-variance KL estimator of Schulman (2020): E[(r - 1) - log r]
                stats["approx_kl"].append(((ratio - 1) - log_ratio).mean().item())
                stats["clip_fraction"].append(((ratio - 1).abs() > config.clip_range).float().mean().item())
    if before is not None:
        with torch.no_grad():
            for p, p0 in zip(policy.parameters(), before):
                p.copy_(p0 + step_scale * (p - p0))
    out = {k: float(np.mean(v)) for k, v in stats.items()}
    out["explained_variance"] = explained_variance(rollout.values.ravel(), returns.ravel())
    return out
