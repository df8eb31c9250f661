"""A training run's privacy plan from its configuration — one calculation for the coordinator, which makes the
plan once and keeps it with its checkpoint before the initial bundle declares it, and for `pategail
privacy-plan`, which prints it before anything runs."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pategail.sdk.contribution import reward_count
from pategail.server.privacy.plan import PrivacyPlan

if TYPE_CHECKING:
    from pategail.server.config import TrainConfig


def run_queries(config: TrainConfig, env_values: int) -> tuple[int, int]:
    """(planned, reserve) queries of an uninterrupted run of ``config`` whose environment vector has
    ``env_values`` values: the environment (one vector query with the Laplace mechanism; the Gaussian plan counts
    its values, for the record), then 47 per generated day of every round; the reserve is ``retry_rounds``
    rounds' worth of reward queries."""
    rewards = reward_count(config.days_per_round)
    env = config.privacy.scheme.environment_queries(env_values)
    return env + config.rounds * rewards, config.privacy.retry_rounds * rewards


def make_run_plan(config: TrainConfig, env_values: int, directory: Path | None = None) -> PrivacyPlan:
    """The plan of a run of ``config`` (resolved for its device count: δ and the environment's share set)
    whose environment vector, in the layout of its mechanism, has ``env_values`` values. With ``directory`` the
    plan is the one kept there when it was made for these settings, else a new one written there first."""
    planned_queries, reserve = run_queries(config, env_values)
    return config.privacy.scheme.make_plan(config, env_values, planned_queries, reserve, directory)
