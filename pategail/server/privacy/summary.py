"""The privacy summary of a run, written once: the log line at the start of a run, the privacy section of
report.json and its line in report.md all come from here (the plan, and what the accountant counted)."""
from __future__ import annotations

import math

from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.plan import PrivacyPlan

NOTES = ("lambda: Laplace scale of the noise on the mean reward (sum scale / devices); lambda_c: the scale on "
         "the mean of D^2, from which the variance is computed with the noisy mean (Theorem 3's budget split, 3x "
         "less noise than the paper's lambda_c added to the variance at the same per-query epsilon); "
         "epsilon_total: PLD composition of every release; epsilon_expected: the plan's composition of the "
         "planned releases and the retry reserve")


def tolerance_label(config) -> str | None:
    """The label of a non-private noise-tolerance experiment (None for any other run)."""
    if config is None or not config.tolerance_experiment:
        return None
    return (f"NON-PRIVATE EXPERIMENT: no privacy; Gaussian noise of std {config.tolerance_noise_std:g} added by "
            f"the coordinator to each released mean reward at granularity {config.granularity} "
            "(tolerance_noise_std)")


def privacy_section(plan: PrivacyPlan, accountant: PrivacyAccountant, devices: int, beta: float,
                    releases: int, config=None) -> dict:
    """report.json's "privacy": the plan, what was spent, and the noise on a mean over ``devices``."""
    b, b_sq = plan.noise_scales
    label = tolerance_label(config)
    return {
        "mechanism": label or plan.mechanism,
        "non_private_experiment": None if label is None else {"tolerance_noise_std": config.tolerance_noise_std,
                                                              "granularity": config.granularity},
        "epsilon_total": accountant.epsilon() if plan.private else None,
        "delta": plan.target_delta if plan.private else None,
        "epsilon_target": plan.target_epsilon,
        "epsilon_expected": plan.expected_epsilon,
        "epsilon_per_query": plan.per_query_epsilon,
        "lambda": b / devices, "lambda_c": b_sq / devices,
        "sum_noise_scale": b, "sq_sum_noise_scale": b_sq,
        "beta": beta, "kappa": plan.kappa, "devices": devices, "releases": releases,
        "queries": accountant.num_queries if plan.private else None,
        "planned_queries": plan.planned_queries,
        "reserve_queries": plan.reserve_queries,
        "plan": plan.to_dict(),
        "notes": NOTES,
    }


def privacy_line(section: dict) -> str:
    """One line for report.md."""
    if section["epsilon_target"] is None:
        return section["mechanism"]
    return (f"total ε = {section['epsilon_total']:.3g} at δ = {section['delta']:g} (target "
            f"{section['epsilon_target']:g}); per-query ε = {section['epsilon_per_query']:.3g}; λ = "
            f"{section['lambda']:.3g}, λ_c = {section['lambda_c']:.3g}")


def plan_line(plan: PrivacyPlan, devices: int, beta: float, config=None) -> str:
    """One line for the log at the start of a run."""
    if tolerance_label(config):
        return f"privacy: {tolerance_label(config)}"
    if not plan.private:
        return f"privacy: {plan.mechanism}: the same protocol, masked sums released without noise"
    b = plan.sum_noise_scale
    return (f"privacy: total (ε={plan.target_epsilon:g}, δ={plan.target_delta:g}) over {plan.budgeted_queries} "
            f"queries ({plan.planned_queries} planned + {plan.reserve_queries} in reserve for retries; together "
            f"they compose to ε={plan.expected_epsilon:.4g}); per-query ε "
            f"{plan.per_query_epsilon:.3g}; Laplace scale on each sum {b:.3g} (std {math.sqrt(2) * b / devices:.3g} "
            f"on a mean reward over {devices} devices); κ={plan.kappa:g}, β={beta:g}")
