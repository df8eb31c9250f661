"""A training run's privacy plan from its configuration — one calculation for the coordinator, which makes the
plan once and keeps it with its checkpoint before the initial bundle declares it, and for `pategail
privacy-plan`, which prints it before anything runs."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pategail.sdk.contribution import env_l1_bound, reward_count
from pategail.server.privacy.gaussian import env_l2_bound
from pategail.server.privacy.plan import (GaussianSpec, PrivacyPlan, load_or_make_plan, plan_gaussian_run,
                                          plan_privacy)

if TYPE_CHECKING:
    from pategail.server.config import TrainConfig


def run_queries(config: TrainConfig, env_values: int) -> tuple[int, int]:
    """(planned, reserve) queries of an uninterrupted run of ``config`` whose environment vector has
    ``env_values`` values: the environment (one vector query with the Laplace mechanism; the Gaussian plan counts
    its values, for the record), then 47 per generated day of every round; the reserve is ``retry_rounds``
    rounds' worth of reward queries."""
    rewards = reward_count(config.days_per_round)
    env = 1 if config.privacy.mechanism == "laplace" else env_values
    return env + config.rounds * rewards, config.privacy.retry_rounds * rewards


def make_run_plan(config: TrainConfig, env_values: int, directory: Path | None = None) -> PrivacyPlan:
    """The plan of a run of ``config`` (resolved for its device count: δ and the environment's share set)
    whose environment vector, in the layout of its mechanism, has ``env_values`` values. With ``directory`` the
    plan is the one kept there when it was made for these settings, else a new one written there first."""
    privacy = config.privacy
    assert privacy.delta is not None and privacy.env_epsilon_fraction is not None, "resolve with for_devices"
    planned, reserve = run_queries(config, env_values)
    gaussian = None
    if privacy.mechanism == "gaussian":
        gaussian = GaussianSpec(str(privacy.granularity), privacy.reward_granularity.count(config.days_per_round),
                                config.rounds + privacy.retry_rounds, env_values, privacy.clip_share,
                                privacy.env_epsilon_fraction, env_l2_bound(config.uses_action_prior),
                                privacy.adjacency)
    if directory is not None:
        return load_or_make_plan(directory, privacy.epsilon, privacy.delta, privacy.kappa, planned, reserve,
                                 gaussian, env_values if gaussian is None else 0, privacy.env_epsilon_fraction,
                                 env_l1_bound(config.uses_action_prior), privacy.adjacency)
    if gaussian is not None:
        return plan_gaussian_run(privacy.epsilon, privacy.delta, privacy.kappa, planned, reserve, gaussian)
    return plan_privacy(privacy.epsilon, privacy.delta, privacy.kappa, planned, reserve_queries=reserve,
                        env_values=env_values, env_fraction=privacy.env_epsilon_fraction,
                        env_l1_bound=env_l1_bound(config.uses_action_prior), adjacency=privacy.adjacency)
