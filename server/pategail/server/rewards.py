"""From a released noisy aggregate to the rewards PPO trains on — pure functions."""
from __future__ import annotations

import numpy as np

from pategail.sdk.contribution import reward_count, reward_matrix
from pategail.server.checkpoint import Release
from pategail.server.config import TrainConfig
from pategail.server.privacy.calibration import aggregate_rewards


def rewards_from_release(release: Release, config: TrainConfig, public_count: int | None = None) -> np.ndarray:
    """float32 (days_per_round, 47): the reward of every generated decision, standardised over the round.

    - ``laplace`` at ``pair`` granularity (the paper's): R̂ = R − βξ from Σ D and Σ D².
    - ``gaussian``: the release holds Σ_u of each device's clipped centred block means; divided by the fixed
      ``public_count`` (the run's devices, known before the round), plus ½, each decision gets its block's
      mean. β does not apply (no Σ D² is released).
    - without privacy at a coarser granularity (an experiment): the block means of Σ D / n.

    Standardised because every day has 47 decisions, so shifting all rewards by a constant changes no
    policy's ranking, and scaling by a positive one neither — but it keeps returns O(1), which the value
    head (Adam, clipped gradients) can follow; raw R̂ sums to ~15 and left it stuck near 0.
    """
    days, granularity = config.days_per_round, config.privacy.reward_granularity
    if config.privacy.scheme.releases_vectors and release.count == granularity.count(days):
        if public_count is None or public_count < 1:
            raise ValueError("the Gaussian mechanism's release is divided by a fixed public count of devices")
        means = np.asarray(release.sum, dtype=np.float64) / public_count + 0.5
    elif granularity.block == 1 and not config.privacy.scheme.releases_vectors:  # Σ D and Σ D² per pair
        agg = aggregate_rewards(release.sum, release.sq_sum, release.n_survivors, config.privacy.beta)
        return _standardised(reward_matrix(agg.r_hat, days))
    elif release.count == reward_count(days):          # per-pair Σ D without noise: averaged here
        means = granularity.block_means(np.asarray(release.sum, dtype=np.float64) / release.n_survivors, days)
    else:
        raise ValueError(f"a release of {release.count} values does not fit {config.privacy.mechanism} rewards at "
                         f"granularity {config.privacy.granularity} over {days} days")
    return _standardised(reward_matrix(granularity.expand(means, days), days))


def reward_signal_share(release: Release, config: TrainConfig, public_count: int | None, noise_std: float) -> float:
    """The estimated share of signal in the variance of a round's released reward values, in [0, 1]:
    1 − s²/var, where var is the variance of the released mean rewards over the round's values and s the
    standard deviation of the noise on each of them (``noise_std`` on a released sum, divided by the fixed
    ``public_count``). 1 without noise.

    Why it matters: the rewards are standardised every round and PPO normalises its advantages, so a round
    whose rewards are mostly noise moves the policy as far as a round with a clear signal. The share is the
    weight a Gaussian estimate of the signal gives the observation (var_signal / (var_signal + s²)), so a step
    scaled by it moves the policy as far as the evidence supports. Estimated from one round's values (96 days at
    day granularity), it carries a sampling error of about √(2/96) ≈ 0.14 in relative terms.

    Defined for the Gaussian mechanism's releases and releases without noise; the Laplace mechanism's β-corrected
    rewards have no simple per-value noise variance, so a noisy Laplace release returns 1 (steps unscaled)."""
    if noise_std <= 0 or not config.privacy.scheme.releases_vectors:
        return 1.0
    if public_count is None or public_count < 1:
        raise ValueError("the Gaussian mechanism's release is divided by a fixed public count of devices")
    means = np.asarray(release.sum, dtype=np.float64) / public_count
    if len(means) < 2:
        return 1.0
    observed = float(np.var(means, ddof=1))
    noise = (noise_std / public_count) ** 2
    return float(np.clip(1.0 - noise / observed, 0.0, 1.0)) if observed > 0 else 0.0


def _standardised(rewards: np.ndarray) -> np.ndarray:
    return ((rewards - rewards.mean()) / (rewards.std() + 1e-8)).astype(np.float32)


def ensemble_verdict(release: Release, config: TrainConfig | None = None,
                     public_count: int | None = None) -> tuple[float, float]:
    """(mean reward R, discriminator accuracy): the noisy mean D over devices, averaged over the released
    values, and the share of them the ensemble calls generated (mean D below 1/2). A Gaussian release holds
    centred sums over ``public_count`` devices."""
    if config is not None and config.privacy.scheme.releases_vectors and \
            release.count == config.privacy.reward_granularity.count(config.days_per_round):
        assert public_count is not None                     # given for a Gaussian release
        mean = np.asarray(release.sum, dtype=np.float64) / public_count + 0.5
    else:
        mean = np.asarray(release.sum, dtype=np.float64) / release.n_survivors
    return float(np.mean(mean)), float(np.mean(mean < 0.5))
