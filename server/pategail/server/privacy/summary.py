"""The privacy summary of a run, written once: the log line at the start of a run, the privacy section of
report.json and its line in report.md all come from here (the plan, and what the accountant counted)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pategail.sdk.accounting import composed_epsilon
from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.adjacency import CELLS, DESCRIPTION, REPLACE_ONE, ZERO_OUT
from pategail.server.privacy.plan import PrivacyPlan

if TYPE_CHECKING:
    from pategail.server.config import TrainConfig

NOTES = ("lambda: Laplace scale of the noise on the mean reward (sum scale / devices); lambda_c: the scale on "
         "the mean of D^2, from which the variance is computed with the noisy mean (Theorem 3's budget split, 3x "
         "less noise than the paper's lambda_c added to the variance at the same per-query epsilon); "
         "epsilon_total: composition of every release under the relation the target applies to (adjacency; "
         "guarantees gives both relations); epsilon_expected: the plan's composition of the "
         "planned releases and the retry reserve")


def privacy_section(plan: PrivacyPlan, accountant: PrivacyAccountant, devices: int, beta: float,
                    releases: int, config: TrainConfig | None = None) -> dict[str, Any]:
    """report.json's "privacy": the plan, what was spent, and the noise on a mean over ``devices``."""
    b, b_sq = plan.noise_scales
    return {
        "mechanism": plan.mechanism,
        "epsilon_total": accountant.epsilon_under(plan.factors(plan.adjacency)) if plan.private else None,
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
        **_mechanism_fields(plan, accountant, devices, config),
    }


def _mechanism_fields(plan: PrivacyPlan, accountant: PrivacyAccountant, devices: int,
                      config: TrainConfig | None) -> dict[str, Any]:
    """The mechanism's parameters, the budget's parts, the collusion assumption, and the two guarantees
    stated separately, each under both neighbouring relations."""
    if not plan.private:
        return {"granularity": plan.granularity, "guarantees": None}
    colluders = 0 if config is None else config.secagg.colluders
    min_survivors = 1.0 if config is None else config.secagg.min_survivors
    out: dict[str, Any] = {"granularity": plan.granularity,
           "collusion": (f"the distributed noise is sized for n_min − t honest survivors (n_min = "
                         f"{min_survivors:g} of the devices asked, t = {colluders}): the guarantee holds while "
                         + ("no device reveals" if colluders == 0 else f"at most {colluders} devices reveal")
                         + " their noise shares to the coordinator and colluders do not reach the secure "
                         "aggregation's threshold")}
    out.update(plan.scheme.summary_fields(plan, devices))
    if config is not None and config.method == "hybrid":
        out["model_delta_releases"] = {
            "planned": config.fedavg.hybrid_rounds,
            "note": "the hybrid's first rounds release DP-FedAvg's model deltas, planned among the rewards' "
                    "releases: each at their noise multiplier on its own sensitivity, so each costs what a reward "
                    "release costs (a retried round releases again)"}
    out["adjacency"] = plan.adjacency
    cells = plan.cell_release
    if cells is not None:
        out["cell_release"] = {**vars(cells), "epsilon_part": cell_release_epsilon(plan),
                               "counted": len(accountant.releases_of(CELLS)),
                               "note": "the cell table's release alone, at δ/2 under the target's relation (parts "
                                       "of a joint composition do not add up); the totals include it"}
    out["guarantees"] = guarantees(plan, accountant)
    return out


def cell_release_epsilon(plan: PrivacyPlan) -> float:
    """The ε of a run's cell-table release alone, at δ/2 under the target's relation (how the environment's and
    the rewards' parts are stated)."""
    cells = plan.cell_release
    assert cells is not None, "a run that releases its cell table"
    return composed_epsilon([cells.release().scaled(plan.factors(plan.adjacency).cells)], plan.target_delta / 2)


RELATIONS = (ZERO_OUT, REPLACE_ONE)


def epsilons(plan: PrivacyPlan, accountant: PrivacyAccountant, copies: int = 1) -> dict[str, float]:
    """The run's composed ε at its δ under each relation (``copies`` > 1: for a person behind that many
    devices, by the exact composition of sensitivities ``copies`` times larger)."""
    return {relation: accountant.epsilon_under(plan.factors(relation).times(copies)) for relation in RELATIONS}


def guarantees(plan: PrivacyPlan, accountant: PrivacyAccountant) -> dict[str, Any]:
    """The two guarantees of a private run, each under both neighbouring relations (report.json)."""
    eps = epsilons(plan, accountant)
    head = {"epsilon": eps[plan.adjacency], "epsilon_zero_out": eps[ZERO_OUT],
            "epsilon_replace_one": eps[REPLACE_ONE], "delta": plan.target_delta, "adjacency": plan.adjacency}
    return {
        "against_the_coordinator": {
            **head,
            "statement": "the coordinator knows who took part in every round and sees only the noisy secure sums: "
                         "the whole run is (ε, δ)-DP for each device's data under " + DESCRIPTION[ZERO_OUT]
                         + f" — ε = {eps[ZERO_OUT]:.3g} — and under " + DESCRIPTION[REPLACE_ONE]
                         + f" — ε = {eps[REPLACE_ONE]:.3g}; no amplification by sampling"},
        "against_observers_of_the_outputs": {
            **head,
            "statement": "anyone who sees only the published model and synthetic data gets post-processing of the "
                         "released sums: the same (ε, δ) under each relation; every device is asked every round "
                         "(no cohort sampling), so no amplification by sampling applies — a fleet that sampled "
                         "cohorts secretly could claim a smaller ε here, never against the coordinator"},
    }


def person_guarantee(plan: PrivacyPlan, accountant: PrivacyAccountant, copies: int) -> dict[str, Any]:
    """A resampled population's guarantee for a person: the guarantees above are per device, and a person
    whose data sits on ``copies`` devices moves every release ``copies`` times as far (group privacy, computed
    exactly on the composition rather than by the generic k·ε bound)."""
    eps = epsilons(plan, accountant, copies)
    return {"max_copies": int(copies), "epsilon_zero_out": eps[ZERO_OUT], "epsilon_replace_one": eps[REPLACE_ONE],
            "delta": plan.target_delta,
            "statement": f"the guarantees above are per device: this resampled population holds up to {copies} "
                         f"copies of one person, and such a person gets ε = {eps[ZERO_OUT]:.3g} (zero-out) / "
                         f"{eps[REPLACE_ONE]:.3g} (replace-one) at δ = {plan.target_delta:.3g}"}


def _relations(section: dict[str, Any]) -> str:
    g = section["guarantees"]["against_the_coordinator"]
    return (f"ε = {g['epsilon_zero_out']:.3g} under zero-out adjacency, {g['epsilon_replace_one']:.3g} under "
            f"replace-one, at δ = {g['delta']:.3g} (target ε {section['epsilon_target']:g} under "
            f"{g['adjacency']})")


def privacy_line(section: dict[str, Any]) -> str:
    """One line for report.md."""
    if section["epsilon_target"] is None:
        mechanism: str = section["mechanism"]
        return mechanism
    if section.get("noise_multiplier") is not None:
        parts, released = section["epsilon_parts"], section.get("released", "rewards")
        return (f"{section['mechanism']}, granularity {section['granularity']}: {_relations(section)}; each part "
                f"alone, at δ/2 and under {section['adjacency']} (parts of a joint composition do not add up): "
                f"environment ε {parts['environment']:.3g}, {released.replace('_', ' ')} ε "
                f"{parts[released]:.3g}; clip norm "
                f"{section['clip_norm']:.3g}, noise multiplier {section['noise_multiplier']:.3g} (environment "
                f"{section['env_noise_multiplier']:.3g}); noise std {section['noise_std_on_mean']:.3g} on each "
                "released mean reward" + ("" if section.get("reward_signal_share") is None else
                                          f"; the released rewards were {section['reward_signal_share']:.0%} signal "
                                          "on average over the rounds (1 − noise variance / their variance)"))
    env = section.get("epsilon_parts", {}).get("environment")
    return (f"{section['mechanism']}: {_relations(section)}; per-query ε = {section['epsilon_per_query']:.3g}; "
            f"λ = {section['lambda']:.3g}, λ_c = {section['lambda_c']:.3g}" + (
                "" if env is None else f"; environment: one vector query, pure ε = {env:.3g} under zero-out, noise "
                                       f"std {section['env_noise_std']:.3g} on each released sum"))


def guarantee_lines(section: dict[str, Any]) -> list[str]:
    """report.md's lines for the two guarantees, the per-person figure of a resampled population and the
    collusion assumption (none without privacy)."""
    if not section.get("guarantees"):
        return []
    g = section["guarantees"]
    lines = []
    for key, who in (("against_the_coordinator", "Against the coordinator"),
                     ("against_observers_of_the_outputs",
                      "Against observers of the published model and synthetic data")):
        lines.append(f"- {who}: (ε = {g[key]['epsilon_zero_out']:.3g} zero-out / {g[key]['epsilon_replace_one']:.3g} "
                     f"replace-one, δ = {g[key]['delta']:.3g}) — {g[key]['statement']}.")
    person = section.get("per_person")
    if person:
        lines.append(f"- Per person: {person['statement']}.")
    if section.get("cell_table"):
        lines.append(f"- Cell table: {section['cell_table']}.")
    lines.append(f"- Collusion assumption: {section['collusion']}.")
    return lines


def _target(plan: PrivacyPlan, devices: int) -> str:
    """The target, its relation, δ against 1/N, and what the whole budget is under both relations."""
    both = {r: plan.epsilon_under(r, reserve=True) for r in RELATIONS}
    return (f"(ε={plan.target_epsilon:g} under {plan.adjacency} adjacency, δ={plan.target_delta:.3g}; 1/N = "
            f"{1 / devices:.3g} for N = {devices:,} devices; the whole budget is ε {both[ZERO_OUT]:.3g} under "
            f"zero-out, {both[REPLACE_ONE]:.3g} under replace-one, per device)")


def plan_line(plan: PrivacyPlan, devices: int, beta: float, config: TrainConfig | None = None) -> str:
    """One line for the log at the start of a run."""
    if not plan.private:
        return f"privacy: {plan.mechanism}: the same protocol, masked sums released without noise"
    line = plan.scheme.plan_line(plan, devices, beta, _target(plan, devices))
    if config is not None and config.method == "hybrid":
        line += (f"; the hybrid's first {config.fedavg.hybrid_rounds} of these releases are DP-FedAvg's model deltas, "
                 "each at the rewards' noise multiplier on its own sensitivity (the same cost)")
    return line
