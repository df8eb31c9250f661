"""`pategail privacy-plan`: before training, whether a population of devices at a total (ε, δ) can learn — for
each mechanism and reward granularity, the noise std on each released mean reward against the measured
tolerance (issue 13 point 5)."""
from __future__ import annotations

import math
from pathlib import Path

from pategail.errors import PategailError

GRANULARITIES = ("pair", "block:8", "day")
ENV_VALUES_GEOLIFE = 12_657
"""Environment values of pategail-geolife's 4,210 cells (initial states, explore law and place law); used
without --data."""
ENV_REGIONS_GEOLIFE = 180
"""Regions of pategail-geolife's cell table (``pategail.sdk.regions.REGION_CELLS`` = 64): the Gaussian
mechanism's environment vector adds 3 values per region; used without --data."""


RICHER_ENV_FRACTION = 0.5
"""The environment share ``privacy-plan`` suggests when the rewards can afford it: their noise stays at most half
the measured tolerance. At 1,000 devices and ε = 8 (day granularity) it cuts the environment's noise ~4× for
rewards still ~6× below the tolerance (BENCHMARKS.md, issue 13's environment release)."""


def register(sub) -> None:
    p = sub.add_parser("privacy-plan", help="noise on each released mean reward per mechanism and granularity, "
                                            "against the measured tolerance", description=__doc__.splitlines()[0])
    p.add_argument("--devices", required=True, type=int, help="devices taking part in every round")
    p.add_argument("--epsilon", required=True, type=float, help="total ε of the whole run")
    p.add_argument("--delta", type=float, default=None, help="total δ (default: the config's, 1e-5)")
    p.add_argument("--config", type=Path, default=None, help="JSON file of TrainConfig settings (rounds, days "
                                                             "per round, clip_share, env_epsilon_fraction, ...)")
    p.add_argument("--data", type=Path, default=None,
                   help=f"prepared data set whose cell table sizes the environment release (default: "
                        f"{ENV_VALUES_GEOLIFE:,} values, pategail-geolife's)")
    p.add_argument("--granularity", nargs="+", default=list(GRANULARITIES),
                   help=f"granularities of the Gaussian mechanism (default: {' '.join(GRANULARITIES)})")
    p.set_defaults(func=run_privacy_plan)


def _environment_values(data: Path | None, candidates: int, region_cells: int = 0,
                        action_rates: bool = False) -> int:
    if data is None:
        from pategail.sdk.action_rates import action_rate_length
        return (ENV_VALUES_GEOLIFE + (3 * ENV_REGIONS_GEOLIFE if region_cells else 0)
                + (action_rate_length() if action_rates else 0))
    import numpy as np

    from pategail.data.dataset import load_dataset
    from pategail.sdk.epr import CellGeometry
    from pategail.server.coordinator import environment_length
    cells = load_dataset(data).cells
    return environment_length(cells, CellGeometry.build(np.asarray(cells, dtype=np.float64), candidates=candidates),
                              region_cells, action_rates)


def feasibility_table(devices: int, config, env_values: int, granularities, gaussian_env_values: int | None = None,
                      laplace: bool = True) -> list:
    """One Feasibility per mechanism and granularity: the paper's Laplace (pair), then the Gaussian mechanism
    at each of ``granularities`` — each calibrated as a run of ``config`` would be. ``gaussian_env_values``:
    the Gaussian mechanism's environment vector (with its coarse parts), default ``env_values``; ``laplace``
    False: the Gaussian rows only. A config that forces ``action_prior`` on is planned with the larger
    environment bounds its action-rate part needs (Laplace L1 10, Gaussian L2 √(12 + 277/47²))."""
    from pategail.sdk.contribution import Granularity, env_l1_bound, reward_count
    from pategail.server.privacy.feasibility import Feasibility, plan_feasibility, tolerance_for
    from pategail.server.privacy.gaussian import env_l2_bound, plan_gaussian
    from pategail.server.privacy.plan import plan_privacy

    eps, delta, days = config.target_epsilon, config.target_delta, config.days_per_round
    rows = []
    if laplace:
        rows.append(plan_feasibility(plan_privacy(eps, delta, config.kappa, 1 + config.rounds * reward_count(days),
                                                  reserve_queries=config.retry_rounds * reward_count(days),
                                                  env_values=env_values, env_fraction=config.env_epsilon_fraction,
                                                  env_l1_bound=env_l1_bound(config.uses_action_prior)),
                                     devices))
    for name in granularities:
        values = Granularity.parse(name).count(days)
        g = plan_gaussian(eps, delta, values, config.rounds + config.retry_rounds,
                          env_values if gaussian_env_values is None else gaussian_env_values, config.clip_share,
                          config.env_epsilon_fraction, env_l2_bound(config.uses_action_prior))
        rows.append(Feasibility("gaussian", name, devices, g.noise_std / devices, tolerance_for(name),
                                g.env_noise_std))
    return rows


def run_privacy_plan(args) -> int:
    from pategail.sdk.contribution import Granularity
    from pategail.server.config import TrainConfig
    from pategail.server.privacy.feasibility import TOLERANCE_SOURCE

    if args.devices < 1:
        raise PategailError(f"--devices {args.devices}: must be at least 1")
    for name in args.granularity:
        try:
            Granularity.parse(name)
        except ValueError as err:
            raise PategailError(f"--granularity: {err}") from None
    overrides = {"target_epsilon": args.epsilon} | ({} if args.delta is None else {"target_delta": args.delta})
    config = (TrainConfig.from_file(args.config, **overrides) if args.config
              else TrainConfig.from_dict(overrides, where="options"))
    from pategail.sdk.regions import REGION_CELLS
    env_values = _environment_values(args.data, config.candidates, action_rates=config.uses_action_prior)
    gaussian_env = _environment_values(args.data, config.candidates, REGION_CELLS, config.uses_action_prior)
    print(f"{args.devices:,} devices, total ε = {config.target_epsilon:g}, δ = {config.target_delta:g}, "
          f"{config.rounds} rounds of {config.days_per_round} generated days (+{config.retry_rounds} in reserve), "
          f"{env_values:,} environment values ({gaussian_env:,} with the Gaussian mechanism's region sums; "
          f"env_epsilon_fraction {config.env_epsilon_fraction:g}); tolerance: {TOLERANCE_SOURCE}", flush=True)
    rows = feasibility_table(args.devices, config, env_values, args.granularity, gaussian_env)
    richer = {}
    if config.env_epsilon_fraction < RICHER_ENV_FRACTION:
        from dataclasses import replace
        richer = {r.granularity: r for r in feasibility_table(
            args.devices, replace(config, env_epsilon_fraction=RICHER_ENV_FRACTION), env_values,
            args.granularity, gaussian_env, laplace=False)}
    for row in rows:
        need = "" if not row.tolerance or row.can_learn else \
            f"; needs about {math.ceil(args.devices * row.noise_std / row.tolerance):,} devices"
        print(row.line() + need, flush=True)
        alt = richer.get(row.granularity) if row.mechanism == "gaussian" else None
        if alt is not None and alt.tolerance and alt.noise_std <= alt.tolerance / 2:
            print(f"  env_epsilon_fraction {RICHER_ENV_FRACTION:g} would keep this noise at {alt.noise_std:.3g} "
                  f"(at most half the tolerance) and lower the environment's to {alt.env_noise_std:.3g}", flush=True)
    return 0
