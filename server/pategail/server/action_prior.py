"""A rule model of the devices' decisions, released privately, as a warm start for the policy.

The devices' action-rate part of the environment vector (:mod:`pategail.sdk.action_rates`) sums to a table of
weighted decision counts by (time-of-day bucket, at home, distinct cells so far, action). The coordinator turns
it into P(action | slot bucket, at home, distinct bucket) (:func:`action_rates_from_noisy_sums`), samples days
from the EPR environment driven by those rates (:func:`sample_rule_days`) and pre-trains the policy on them by
behaviour cloning (:func:`behaviour_clone`) before round 1; PPO may then keep the policy near the pre-trained
one with a KL anchor (``PPOConfig.anchor_coef``). All of it is post-processing of the one release.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from pategail.sdk.action_rates import RATE_SHAPE, action_rate_length, count_bucket, slot_bucket
from pategail.sdk.epr import EPREnvironment
from pategail.sdk.features import EXPLORE, N_ACTIONS, SLOTS, action_mask, state_features
from pategail.server.policy import Policy, masked_log_probs

log = logging.getLogger(__name__)

RATE_SMOOTHING = 0.02
"""Pseudo-mass (in units of one full-weight device's decisions) that pulls each (slot, at home, count) state's
rates towards those of the state one count lower (the first count towards the slot's rates over all counts):
a state no device reached — five cells on a city whose days stop at four — behaves like the last one they did,
and a state seen a little keeps most of its own rates. Raised to twice the noise's std under privacy."""

SIGNAL_GATE = 10.0
"""The warm start is made only when the released total Σ (≈ Σw) is at least this many standard deviations of its
noise (σ·√entries): below that the table is noise, and cloning it would start the policy from near-uniform rates
(explore a quarter of the slots) — worse than no prior. The same gate as the explore factors'
(pategail.server.initial_states.SIGNAL_GATE)."""


RARE_DAY_SHARE = 1e-3
"""A day with one more distinct cell than k is *rare* when the released rates put fewer than this share of days
there (the invented-mode guard's 99.9th percentile of the real days, pategail.metrics.guard); the environment
then adds no cell to a day that holds k (:attr:`ActionRates.max_cells`)."""

NOISE_MARGIN = 3.0
"""Standard deviations of the release's noise the share of days reaching another cell must stay below
:data:`RARE_DAY_SHARE` by before a limit is drawn from it: under noise a limit is drawn only where the table
is clear, never from a noisy zero."""


@dataclass(frozen=True)
class ActionRates:
    """probs: float64 ``RATE_SHAPE`` (slot bucket, at home, distinct bucket, action), each row sums to 1 (before
    the environment's mask); mass: float64 ``RATE_SHAPE[:-1]``, the released weighted decisions of each state."""

    probs: np.ndarray
    mass: np.ndarray
    signal: float | None = None
    """Released total over its noise's standard deviation (None: released without noise)."""
    max_cells: int | None = None
    """The fewest distinct cells k (1–4) beyond which the released days (nearly) never go: the share of days
    that reach a (k + 1)-th cell is below :data:`RARE_DAY_SHARE` by :data:`NOISE_MARGIN` noise standard
    deviations (:func:`day_cells_limit`). None: the days go on exploring at every count the table tells apart."""

    @property
    def usable(self) -> bool:
        """Clear enough of the noise to warm-start from (:data:`SIGNAL_GATE`)."""
        return self.signal is None or self.signal >= SIGNAL_GATE

    def lookup(self, t: int | np.ndarray, at_home: np.ndarray, distinct: np.ndarray,
               mask: np.ndarray) -> np.ndarray:
        """float64 (n, 4): P(action) at decision slot t of n days (at_home bool (n,), distinct ≥ 1 (n,)),
        renormalised over the possible actions ``mask`` (n, 4)."""
        p = self.probs[slot_bucket(t), np.asarray(at_home, dtype=np.int64), count_bucket(distinct)] * mask
        total = p.sum(-1, keepdims=True)
        # a state whose possible actions all have zero rate (cannot happen with smoothing > 0): stay
        return np.where(total > 0, p / np.where(total > 0, total, 1.0), np.eye(N_ACTIONS)[0])

    def to_dict(self) -> dict:
        return {"probs": self.probs.ravel().tolist(), "mass": self.mass.ravel().tolist(), "signal": self.signal,
                "max_cells": self.max_cells}

    @classmethod
    def from_dict(cls, d: dict) -> "ActionRates":
        return cls(np.asarray(d["probs"], dtype=np.float64).reshape(RATE_SHAPE),
                   np.asarray(d["mass"], dtype=np.float64).reshape(RATE_SHAPE[:-1]), d.get("signal"),
                   d.get("max_cells"))


def action_rates_from_noisy_sums(sums: np.ndarray, noise_std: float = 0.0,
                                 smoothing: float = RATE_SMOOTHING) -> ActionRates:
    """The rate table from the noisy sums of the devices' action-rate parts (``action_rate_length()`` values).

    Negative noisy counts are clipped to 0; each (slot, at home) pair's rates over all counts get the
    pseudo-mass m = max(smoothing, 2·noise_std) of the uniform law, then count k's rates are
    (S_k + m · P_{k−1}) / (Σ S_k + m) with P_{−1} the slot's rates: a state with little or no mass inherits the
    previous count's rates."""
    sums = np.asarray(sums, dtype=np.float64)
    if len(sums) != action_rate_length():
        raise ValueError(f"noisy sums have {len(sums)} entries, the action-rate layout {action_rate_length()}")
    counts = np.clip(sums, 0.0, None).reshape(RATE_SHAPE)
    m = max(float(smoothing), 2.0 * max(float(noise_std), 0.0))
    slot_counts = counts.sum(2)                                             # (S, 2, A)
    prev = (slot_counts + m / N_ACTIONS) / (slot_counts.sum(-1, keepdims=True) + m)
    probs = np.empty(RATE_SHAPE)
    for k in range(RATE_SHAPE[2]):
        c = counts[:, :, k]
        prev = (c + m * prev) / (c.sum(-1, keepdims=True) + m)
        probs[:, :, k] = prev
    s = max(float(noise_std), 0.0)
    signal = None if s == 0 else float(sums.sum()) / (s * np.sqrt(len(sums)))
    return ActionRates(probs, counts.sum(-1), signal, day_cells_limit(sums, s))


def day_cells_limit(sums: np.ndarray, noise_std: float = 0.0) -> int | None:
    """The environment's limit on a day's distinct cells read from the released action-rate sums: the fewest
    k in 1..4 (the counts the table tells apart; its last bucket is "5 or more") such that the share of days
    that reach a (k + 1)-th cell, plus :data:`NOISE_MARGIN` standard deviations of its noise, is below
    :data:`RARE_DAY_SHARE`; None if there is none.

    A day reaches a (k + 1)-th cell by an explore taken with k distinct cells so far (an explore always goes to
    a cell the day has not seen) or by a first move home; the table cannot tell first moves home from later
    ones, so the share counts the explores only, and the limit also forbids a first move home at k cells.
    That assumes days that stop exploring at k cells do not reach a (k + 1)-th one by going home late — true
    where days start at home (they begin at midnight) and where a source caps the fixes a day, not for a
    city whose days mostly start away from home (``environment.day_cells_limit`` false turns it off).

    A device's part holds w × its share of decisions in each table cell, a day being ``SLOTS - 1`` decisions,
    so (SLOTS − 1) × Σ_(slot, at home) sums[·, ·, k, explore] / Σ sums is the w-weighted mean over the devices
    of the share of their days that explore on from k cells (the part's other shares weigh devices the same
    way). Its noise: 2 × N_SLOT_BUCKETS summed entries of std ``noise_std``.
    Post-processing of the release: no privacy cost."""
    table = np.asarray(sums, dtype=np.float64).reshape(RATE_SHAPE)
    total = float(np.clip(table, 0.0, None).sum())
    if total <= 0:
        return None
    decisions = SLOTS - 1
    explores = table[..., EXPLORE].sum(axis=(0, 1))                     # by distinct bucket
    share_std = decisions * noise_std * np.sqrt(2 * RATE_SHAPE[0]) / total
    for k in range(1, RATE_SHAPE[2]):
        if decisions * explores[k - 1] / total + NOISE_MARGIN * share_std < RARE_DAY_SHARE:
            return k
    return None


@dataclass(frozen=True, eq=False)
class RuleDays:
    """Days sampled from the rule model: days int32 (n, T), homes int32 (n,), actions int64 (n, T-1) and
    targets float64 (n, T-1, 4), the rule's action probabilities at every decision (the cloning targets)."""

    days: np.ndarray
    homes: np.ndarray
    actions: np.ndarray
    targets: np.ndarray
    max_cells: int | None = None
    """The environment's limit on distinct cells a day (:attr:`EPREnvironment.max_cells`) they were drawn under."""


def sample_rule_days(rates: ActionRates, env: EPREnvironment, homes: np.ndarray, first_cells: np.ndarray,
                     rng: np.random.Generator) -> RuleDays:
    """One day per initial state through ``env`` (the run's EPR environment: its explore law, place law and
    geometry), each decision drawn from ``rates``."""
    env.reset(homes, first_cells)
    n = len(homes)
    actions, targets = [], []
    while not env.done:
        t = env.t
        hist = env.history()
        p = rates.lookup(t, hist[:, -1] == env.homes, env.state.distinct, env.mask())
        a = np.minimum((np.cumsum(p, 1) < rng.random((n, 1))).sum(1), N_ACTIONS - 1)
        env.step(a)
        actions.append(a)
        targets.append(p)
    return RuleDays(env.days.copy(), np.asarray(homes, dtype=np.int32), np.stack(actions, 1).astype(np.int64),
                    np.stack(targets, 1), env.max_cells)


def behaviour_clone(policy: Policy, rule_days: RuleDays, cells: np.ndarray, *, epochs: int, lr: float,
                    batch_size: int, generator: torch.Generator) -> list[float]:
    """Fit ``policy``'s action head to the rule's probabilities on ``rule_days`` (cross-entropy with the soft
    targets over the possible actions, Adam); return the mean loss of each epoch."""
    days = rule_days.days
    feats = torch.from_numpy(state_features(days, rule_days.homes, cells))
    masks = torch.from_numpy(action_mask(days, rule_days.homes, rule_days.max_cells)[:, :-1])
    cells_t = torch.from_numpy(days.astype(np.int64))
    targets = torch.from_numpy(rule_days.targets.astype(np.float32))
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    losses = []
    policy.train()
    for epoch in range(epochs):
        order = torch.randperm(len(days), generator=generator)
        total, batches = 0.0, 0
        for start in range(0, len(days), batch_size):
            idx = order[start:start + batch_size]
            logits, _ = policy(cells_t[idx], feats[idx])
            logp = masked_log_probs(logits[:, :-1], masks[idx])
            # impossible actions have target 0 and log-prob ≈ MASKED_LOGIT: zero them before the product
            loss = -(targets[idx] * torch.where(masks[idx], logp, torch.zeros_like(logp))).sum(-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        losses.append(total / batches)
        log.info("behaviour cloning epoch %d/%d: cross-entropy %.4f", epoch + 1, epochs, losses[-1])
    return losses
