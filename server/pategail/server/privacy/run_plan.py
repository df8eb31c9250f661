"""A training run's privacy plan from its configuration — one calculation for the coordinator, which makes the
plan once and keeps it with its checkpoint before the initial bundle declares it, and for `pategail
privacy-plan`, which prints it before anything runs."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pategail.sdk.contribution import reward_count
from pategail.sdk.files import write_atomic
from pategail.server.privacy.cell_release import CellReleasePlan
from pategail.server.privacy.plan import PLAN_FILE, PrivacyPlan

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


def make_run_plan(config: TrainConfig, env_values: int, directory: Path | None = None,
                  cells: CellReleasePlan | None = None) -> PrivacyPlan:
    """The plan of a run of ``config`` (resolved for its device count: δ and the environment's share set)
    whose environment vector, in the layout of its mechanism, has ``env_values`` values. With ``directory`` the
    plan is the one kept there when it was made for these settings, else a new one written there first.

    A run that releases its cell table (``privacy.cells`` released) passes that release's plan as ``cells``:
    the environment and rewards are planned for the ε it leaves (``PrivacySettings.rest_epsilon``), and the
    plan records the cell release and the target, so that everything it composes includes the release."""
    planned_queries, reserve = run_queries(config, env_values)
    if not config.privacy.released_cells:
        return config.privacy.scheme.make_plan(config, env_values, planned_queries, reserve, directory)
    if cells is None:
        raise ValueError("a run that releases its cell table is planned with that release's plan")
    rest = replace(config, privacy=replace(config.privacy, epsilon=config.privacy.rest_epsilon, cells="dataset"))
    plan = rest.privacy.scheme.make_plan(rest, env_values, planned_queries, reserve, None)
    plan = replace(plan, target_epsilon=config.privacy.epsilon, cells=vars(cells))
    plan = replace(plan, expected_epsilon=plan.epsilon_under(plan.adjacency, reserve=True))
    if directory is not None:
        path = Path(directory) / PLAN_FILE
        if path.is_file():
            kept = PrivacyPlan.from_dict(json.loads(path.read_text()))
            if kept == plan:                    # made for these settings: the one kept
                return kept
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(plan.to_dict(), indent=1) + "\n").encode())
    return plan
