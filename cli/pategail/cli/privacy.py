"""`pategail privacy-plan`: before training, the guarantees a private run will report and whether it can learn —
for each mechanism and reward granularity, the noise std on each released mean reward against the measured
tolerance (a DP-FedAvg or hybrid run: the noise on its mean model delta against the clip norm); then the run's
own mechanism, its ε under both neighbouring relations and what its δ costs."""
from __future__ import annotations

import math
from pathlib import Path

from pategail.server.errors import PategailError

GRANULARITIES = ("pair", "block:8", "day")
CELLS_GEOLIFE = 4_210
"""Cells of pategail-geolife's table: they size the policy (and so a model delta) without --data."""
ENV_VALUES_GEOLIFE = 12_657
"""Environment values of pategail-geolife's 4,210 cells (initial states, explore law and place law); used
without --data."""
UNIVERSE_BEIJING = 3_621
"""Squares of the public map of Beijing (39.7–40.2 N, 116.0–116.7 E at 0.01°): the candidates of a released
cell table without --data."""
ENV_REGIONS_GEOLIFE = 180
"""Regions of pategail-geolife's cell table (``pategail.sdk.regions.REGION_CELLS`` = 64): the Gaussian
mechanism's environment vector adds 3 values per region; used without --data."""


def register(sub) -> None:
    p = sub.add_parser("privacy-plan", help="the guarantees a private run will report, and the noise on each released "
                                            "mean reward per mechanism and granularity against the measured "
                                            "tolerance", description=__doc__.splitlines()[0])
    p.add_argument("--devices", required=True, type=int, help="devices taking part in every round")
    p.add_argument("--epsilon", required=True, type=float, help="total ε of the whole run")
    p.add_argument("--delta", type=float, default=None,
                   help="total δ (default: the config's, else min(1e-5, N^-1.1) for N devices)")
    p.add_argument("--adjacency", choices=("zero-out", "replace-one"), default=None,
                   help="the relation the target ε applies to (default: the config's, zero-out)")
    p.add_argument("--method", choices=("pategail", "dp-fedavg", "hybrid"), default=None,
                   help="the run's method, as `train --method` (default: the config's, pategail)")
    p.add_argument("--mechanism", choices=("gaussian", "laplace"), default=None,
                   help="the run's mechanism (default: the config's, gaussian under --epsilon)")
    p.add_argument("--cells", choices=("dataset", "released"), default=None,
                   help="the run's cell table (default: the config's, dataset): released plans the cell table's "
                        "private release first, over the public map of --data (default: Beijing's "
                        f"{UNIVERSE_BEIJING:,} squares)")
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


def run_plan_of(config, env_values: int, gaussian_env_values: int, universe: int = UNIVERSE_BEIJING,
                n_cells: int = CELLS_GEOLIFE):
    """The privacy plan a run of ``config`` (resolved for its devices) makes, without a cell table:
    ``env_values`` / ``gaussian_env_values`` are its environment vector's length in the Laplace / Gaussian layout;
    ``universe``: the public map's squares a released cell table is chosen from (``privacy.cells`` released);
    ``n_cells``: the cell table's size, which sizes a DP-FedAvg run's model delta."""
    from pategail.server.privacy.cell_release import plan_cell_release
    from pategail.server.privacy.run_plan import make_run_plan

    env = gaussian_env_values if config.privacy.scheme.region_sums else env_values
    p = config.privacy
    if config.method == "dp-fedavg" and p.private:
        from pategail.server.fedavg.coordinator import plan_delta_run, policy_values
        return plan_delta_run(config, policy_values(config, n_cells), env)
    if not (p.released_cells and p.private):
        return make_run_plan(config, env)
    return make_run_plan(config, env, cells=plan_cell_release(p.epsilon, p.delta, universe, adjacency=p.adjacency))


def delta_line(config, plan, devices: int, n_cells: int) -> str:
    """A DP-FedAvg or hybrid run's delta releases: the noise on each parameter of the mean model delta and its
    L2 norm against the clip norm, which bounds each device's delta (so the mean's signal); then the
    environment's line. No tolerance was measured for it."""
    from pategail.server.fedavg.coordinator import delta_noise_norm, delta_release_noise, policy_values
    from pategail.server.privacy.feasibility import plan_feasibility

    values = policy_values(config, n_cells)
    clip = config.fedavg.clip_norm
    per_value = delta_release_noise(plan, config.method, values).sum_scale * clip / devices
    ratio = delta_noise_norm(plan, config.method, values, devices)
    need = "" if ratio <= 1 else f"; at most the clip norm from about {math.ceil(devices * ratio):,} devices"
    fa = config.fedavg
    step = f"; server optimiser {fa.server_optimizer} at step {fa.server_lr:g}" if fa.resolved else ""
    return (f"gaussian {'model-delta':8s} noise std {per_value:9.4g} on each of the mean model delta's {values:,} "
            f"parameters: its L2 norm is about {ratio:.3g}× the clip norm {clip:g}, which bounds each device's delta "
            f"(no tolerance measured){need}{step}{plan_feasibility(plan, devices).env_line()}")


def feasibility_table(devices: int, config, env_values: int, granularities, gaussian_env_values: int | None = None,
                      laplace: bool = True, universe: int = UNIVERSE_BEIJING) -> list:
    """One Feasibility per mechanism and granularity: the paper's Laplace (pair), then the Gaussian mechanism
    at each of ``granularities`` — each calibrated as a run of ``config`` over ``devices`` devices would be (its
    environment share, when the config leaves it unset, chosen for that mechanism and granularity).
    ``gaussian_env_values``: the Gaussian mechanism's environment vector (with its coarse parts), default
    ``env_values``; ``laplace`` False: the Gaussian rows only. A config that forces ``action_prior`` on is
    planned with the larger environment bounds its action-rate part needs."""
    from dataclasses import replace

    from pategail.server.privacy.feasibility import plan_feasibility

    gaussian_env_values = env_values if gaussian_env_values is None else gaussian_env_values
    rows: list = []
    if config.method == "dp-fedavg":              # no reward releases: its delta releases' line says it
        return rows
    pategail = config.method == "pategail"        # the other methods release deltas with the Gaussian mechanism
    runs = ([("laplace", "pair")] if laplace and pategail and not config.privacy.released_cells else []) \
        + [("gaussian", name) for name in granularities]
    for mechanism, name in runs:
        run = replace(config, privacy=replace(config.privacy, mechanism=mechanism, granularity=name))
        run = run.for_devices(devices)
        plan = run_plan_of(run, env_values, gaussian_env_values, universe)
        row = plan_feasibility(plan, devices)
        rows.append(replace(row, env_share=run.privacy.env_epsilon_fraction))
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
    privacy = {"epsilon": args.epsilon} | ({} if args.delta is None else {"delta": args.delta})
    privacy |= {k: getattr(args, k) for k in ("adjacency", "mechanism", "cells") if getattr(args, k) is not None}
    overrides: dict = {"privacy": privacy} | ({} if args.method is None else {"method": args.method})
    unresolved = (TrainConfig.from_file(args.config, overrides) if args.config
                  else TrainConfig.from_dict(overrides, where="options"))
    universe, n_cells = UNIVERSE_BEIJING, CELLS_GEOLIFE
    if args.data is not None:
        from pategail.data.dataset import load_dataset
        universe = n_cells = load_dataset(args.data).n_cells
    config = unresolved.for_devices(args.devices, n_cells)
    from pategail.sdk.regions import REGION_CELLS
    env_values = _environment_values(args.data, config.environment.candidates, action_rates=config.uses_action_prior)
    gaussian_env = _environment_values(args.data, config.environment.candidates, REGION_CELLS, config.uses_action_prior)
    print(f"{args.devices:,} devices, total ε = {config.privacy.epsilon:g} under {config.privacy.adjacency} adjacency, "
          f"δ = {config.privacy.delta:.3g}, {config.rounds} rounds of {config.days_per_round} generated days "
          f"(+{config.privacy.retry_rounds} in reserve), {env_values:,} environment values ({gaussian_env:,} with the "
          f"Gaussian mechanism's region sums); tolerance: {TOLERANCE_SOURCE}", flush=True)
    for row in feasibility_table(args.devices, unresolved, env_values, args.granularity, gaussian_env,
                                 universe=universe):
        need = "" if not row.tolerance or row.can_learn else \
            f"; needs about {math.ceil(args.devices * row.noise_std / row.tolerance):,} devices"
        print(row.line() + need, flush=True)
    if config.method != "pategail" and config.privacy.private:
        print(delta_line(config, run_plan_of(config, env_values, gaussian_env, universe, n_cells), args.devices,
                         n_cells), flush=True)
    for line in guarantee_report(unresolved, config, args.devices, env_values, gaussian_env, universe, n_cells):
        print(line, flush=True)
    return 0


def guarantee_report(unresolved, config, devices: int, env_values: int, gaussian_env: int,
                     universe: int = UNIVERSE_BEIJING, n_cells: int = CELLS_GEOLIFE) -> list[str]:
    """The guarantees the run will report (both relations; per device), its cell release when it has one, and
    what its δ costs."""
    from dataclasses import replace

    from pategail.server.privacy.adjacency import REPLACE_ONE, ZERO_OUT
    from pategail.server.privacy.defaults import DELTA_CAP, DELTA_EXPONENT
    from pategail.server.privacy.feasibility import plan_feasibility

    plan = run_plan_of(config, env_values, gaussian_env, universe, n_cells)
    eps = {r: plan.epsilon_under(r) for r in (ZERO_OUT, REPLACE_ONE)}
    share = ("set in the config" if unresolved.privacy.env_epsilon_fraction is not None
             else "chosen for this device count: pategail.server.privacy.defaults.environment_share")
    delta = ("set" if unresolved.privacy.delta is not None
             else f"the default min({DELTA_CAP:g}, N^-{DELTA_EXPONENT:g})")
    lines = [f"The run over {devices:,} devices: "
             f"{plan.mechanism_name}, granularity {plan.granularity}, environment share "
             f"{config.privacy.env_epsilon_fraction:g} ({share}); it will report, per device:",
             f"  against the coordinator: ε = {eps[ZERO_OUT]:.3g} under zero-out adjacency (one user's data "
             f"replaced by nothing, the device still taking part), {eps[REPLACE_ONE]:.3g} under replace-one (one "
             f"user's data swapped for another's), at δ = {config.privacy.delta:.3g}; the target "
             f"{config.privacy.epsilon:g} applies to {config.privacy.adjacency} and holds with the retry reserve spent "
             f"({plan.epsilon_under(config.privacy.adjacency, reserve=True):.4g})",
             "  against observers of the published model and synthetic data: the same figures (every device is "
             "asked every round: no amplification by sampling applies)"]
    cells = plan.cell_release
    if cells is not None:
        from pategail.server.privacy.summary import cell_release_epsilon
        lines.append(f"  cell table: privately released first, from the public map's {universe:,} squares (each device "
                     f"marks its {cells.max_cells} most-visited): noise std {cells.noise_std:.3g} on each square's count "
                     f"of devices, threshold {cells.threshold:.3g} (more when more than n_min devices contribute); "
                     f"{cells.rho_share:g} of the target's ρ, ε part {cell_release_epsilon(plan):.3g} alone at δ/2; "
                     f"the environment and rewards are planned for ε = {config.privacy.rest_epsilon:.4g} and the "
                     "figures above include the release (the environment's length is the public map's here: the "
                     "released table is smaller)")
    weakest = 1.0 / devices
    if weakest > config.privacy.delta and plan.private:
        at_weakest = plan_feasibility(run_plan_of(replace(config, privacy=replace(config.privacy, delta=weakest)), env_values,
                                                  gaussian_env, universe, n_cells),
                                      devices)
        ours = plan_feasibility(plan, devices)
        released = "mean reward" if config.method != "dp-fedavg" else "parameter of the mean model delta, in clip norms,"
        lines.append(f"  δ = {config.privacy.delta:.3g} ({delta}; 1/N = {weakest:.3g}): its cost, noise std "
                     f"{ours.noise_std:.3g} on each released {released} and {ours.env_noise_std:.3g} on each "
                     f"environment sum, against {at_weakest.noise_std:.3g} and {at_weakest.env_noise_std:.3g} "
                     f"at δ = 1/N (+{100 * (ours.noise_std / at_weakest.noise_std - 1):.0f}%)")
    return lines
