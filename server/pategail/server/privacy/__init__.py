"""Privacy of the released rewards: the paper's noise calibration (Theorems 2-3) and a run's accountant."""
from .accountant import PrivacyAccountant, QueryRelease
from .calibration import (RewardAggregate, SumNoiseScales, aggregate_rewards, lambda_reward,
                          lambdas_compensated, sum_noise_scales)

__all__ = ["PrivacyAccountant", "QueryRelease", "RewardAggregate", "SumNoiseScales", "aggregate_rewards",
           "lambda_reward", "lambdas_compensated", "sum_noise_scales"]
