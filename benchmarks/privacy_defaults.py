"""What `pategail train --epsilon E` plans at each device count with the defaults: δ, the environment share, the
noise, and the ε its report will give under zero-out and replace-one adjacency and for a person behind 12
devices (pategail-geolife's environment length; no cell table needed). Markdown on stdout:

    .venv/bin/python benchmarks/privacy_defaults.py
"""
from __future__ import annotations

from pategail.cli.privacy import ENV_REGIONS_GEOLIFE, ENV_VALUES_GEOLIFE, run_plan_of
from pategail.server.config import TrainConfig
from pategail.server.privacy.feasibility import plan_feasibility

DEVICES = (83, 1000, 10_000, 100_000)
EPSILONS = (1.0, 4.0, 8.0)
COPIES = 12


def rows() -> list[str]:
    out = ["| devices | ε target (zero-out) | δ | env share | noise std on a mean reward / on an environment sum | "
           f"ε zero-out (planned rounds) | ε replace-one | ε of a person with {COPIES} copies (zero-out / "
           "replace-one) |", "|---|---|---|---|---|---|---|---|"]
    for n in DEVICES:
        for e in EPSILONS:
            config = TrainConfig(privacy={"epsilon": e}).for_devices(n)
            plan = run_plan_of(config, ENV_VALUES_GEOLIFE, ENV_VALUES_GEOLIFE + 3 * ENV_REGIONS_GEOLIFE)
            noise = plan_feasibility(plan, n)
            person = [plan.epsilon_under(r, COPIES) for r in ("zero-out", "replace-one")]
            out.append(f"| {n:,} | {e:g} | {config.privacy.delta:.3g} | {config.privacy.env_epsilon_fraction:g} | "
                       f"{noise.noise_std:.3g} / {noise.env_noise_std:.3g} | {plan.epsilon_under('zero-out'):.3g} | "
                       f"{plan.epsilon_under('replace-one'):.3g} | {person[0]:.3g} / {person[1]:.3g} |")
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
