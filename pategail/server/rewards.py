"""From a released noisy aggregate to the rewards PPO trains on — pure functions."""
from __future__ import annotations

import numpy as np

from pategail.sdk.contribution import reward_matrix
from pategail.server.checkpoint import Release
from pategail.server.config import TrainConfig
from pategail.server.privacy.calibration import aggregate_rewards


def rewards_from_release(release: Release, config: TrainConfig) -> np.ndarray:
    """float32 (days_per_round, 47): R̂ = R − βξ of every generated decision (or log max(R̂, floor), as
    ``config.reward`` says), standardised over the round.

    Standardised because every day has 47 decisions, so shifting all rewards by a constant changes no
    policy's ranking, and scaling by a positive one neither — but it keeps returns O(1), which the value
    head (Adam, clipped gradients) can follow; raw R̂ sums to ~15 and left it stuck near 0.
    """
    agg = aggregate_rewards(release.sum, release.sq_sum, release.n_survivors, config.beta)
    r_hat = agg.r_hat if config.reward == "r_hat" else np.log(np.maximum(agg.r_hat, config.reward_floor))
    rewards = reward_matrix(r_hat, config.days_per_round)
    return ((rewards - rewards.mean()) / (rewards.std() + 1e-8)).astype(np.float32)


def ensemble_verdict(release: Release) -> tuple[float, float]:
    """(mean reward R, discriminator accuracy): the noisy mean D over devices, averaged over the queries, and
    the share of generated pairs the ensemble calls generated (mean D below 1/2)."""
    mean = np.asarray(release.sum, dtype=np.float64) / release.n_survivors
    return float(np.mean(mean)), float(np.mean(mean < 0.5))
