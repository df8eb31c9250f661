"""A training run of PateGail over a fleet of devices: the run directory (its marker, log and initial bundle),
the fleet (SDK devices or the population simulation), Algorithm 1 with progress, and the run's outputs.
`pategail train` and `pategail serve` parse their options and call these."""
from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from pategail.server.errors import PategailError

log = logging.getLogger(__name__)

SDK_FLEET_MAX = 200
"""With ``--fleet auto``: the SDK fleet (real devices, real cryptography) up to this many devices, the
population simulation beyond (the SDK fleet's round costs seconds per device on one core)."""


def check_cell_table(config, dataset, data: Path, accept_data_derived: bool = False) -> None:
    """A private run's cell table must be public or privately released: every bundle, model and region tree
    carries it, without noise. One built from the users' fixes is refused unless ``--data-derived-cells``
    accepts it; a released table (``privacy.cells`` released) is chosen from a public map's squares."""
    if config.privacy.released_cells:
        if accept_data_derived or not dataset.public_cell_table:
            raise PategailError(f"{data}: --cells released chooses the run's squares from a public map; this table "
                                "was built from the users' own fixes — make a public one with `pategail data "
                                "prepare ... --public-cells --bbox MIN_LAT,MIN_LON,MAX_LAT,MAX_LON`"
                                + (" (and leave out --data-derived-cells)" if accept_data_derived else ""))
        return
    if not config.private or dataset.public_cell_table:
        return
    if accept_data_derived:
        log.warning("%s: the cell table was built from the users' own fixes; it is released without noise and "
                    "the privacy guarantee does not cover it (--data-derived-cells)", data)
        return
    raise PategailError(f"{data}: its cell table was built from the users' own fixes (it reveals which squares "
                        "someone visited), so a private run refuses it; make a public map with `pategail data "
                        "prepare ... --public-cells --bbox MIN_LAT,MIN_LON,MAX_LAT,MAX_LON` (or accept it with "
                        "--data-derived-cells)")


def check_run_marker(run: Path, identity: dict, resume: bool) -> None:
    """What a run's journal and devices belong to, kept in ``run/run.json``: a resumed run must be the same
    run (a release in the journal is re-used, so it must come from the same configuration, seed, data and
    devices). Writes it for a new run; PategailError for a mismatch."""
    marker = run / "run.json"
    if marker.is_file():
        if not resume:
            raise PategailError(f"{run} holds a run already; add --resume to continue it, or choose another --out")
        recorded = json.loads(marker.read_text())
        from pategail.server.config import run_settings, setting_differences
        settings = run_settings(recorded.get("config", {}), identity.get("config", {}))
        recorded, compared = ({**marked, "config": config} for marked, config in zip((recorded, identity), settings))
        if set(recorded["config"]) != set(compared["config"]):
            raise PategailError(f"{marker}: this run was made by another version of pategail (its settings "
                                "differ in name, not only in value) and cannot be resumed; start it again in "
                                "another --out")
        if recorded != compared:
            changed = "; ".join(setting_differences(recorded, compared, "the run"))
            raise PategailError(f"{marker}: this run was started with other settings, data, seed or --devices "
                                f"({changed}); resume it with the same ones, or choose another --out")
    elif resume:
        raise PategailError(f"{run}: no run to resume")
    run.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(identity, indent=1) + "\n")


def make_fleet(kind: str, dataset, users, population, run: Path, config, seed: int, *, ray_address=None,
               ray_workers=None, threads=None, processes=None):
    """The devices: SDK devices (the emulator) or the population simulation, from the run's initial bundle."""
    from pategail.emulator import EmulatedFleet

    if config.privacy.released_cells:
        initial_bundle = public_map_bundle(config, dataset, seed, run)
    else:
        initial_bundle = ensure_initial_bundle(config, dataset, seed, run)
    if kind == "sdk":
        return EmulatedFleet(dataset, users, run / "devices", initial_bundle, seed=seed, population=population)
    from pategail.population.fleet import PopulationFleet
    from pategail.population.resample import one_device_per_user
    return PopulationFleet(dataset, population or one_device_per_user(users, seed, len(dataset.users)),
                           initial_bundle, seed=seed, state_dir=run / "population",
                           ray_address=ray_address, ray_workers=ray_workers,
                           workers=threads, processes=processes)


def public_map_bundle(config, dataset, seed: int, run: Path) -> Path:
    """``run/bundle-public-map``, the bundle the devices of a run that releases its cell table start from
    (written once): on the public map, where they hold their days until the released table is published, and
    declaring the cell release alone (a device answers nothing else under it)."""
    from pategail.server.cell_table import load_or_make_cell_plan, public_map_declaration

    bundle = run / "bundle-public-map"
    if not (bundle / "manifest.json").is_file():
        plan = load_or_make_cell_plan(config, dataset.n_cells, run / "checkpoint")
        write_initial_bundle(config, dataset, seed, bundle, privacy=public_map_declaration(config, plan))
    return bundle


def release_cells(config, dataset, run: Path, fleet, seed: int, signing_key=None):
    """A run with ``privacy.cells`` released: the cell table's release through ``fleet`` (the journalled one
    when the run is resumed), the bundle on the released table, and every device moving its days onto it.
    Returns the data set on the released table, the one this process evaluates the run with (its test days
    moved as the devices move theirs)."""
    from pategail.data.dataset import Dataset
    from pategail.sdk.cell_universe import release_mapping, remap_days
    from pategail.server.cell_table import release_cell_table

    released = release_cell_table(config, fleet, dataset.cells, run, seed, signing_key)
    mapping = release_mapping(dataset.cells, released)

    def moved(days):
        return None if days is None else remap_days(days, mapping)

    meta = {**dataset.meta, "cell_table": {"kind": "released", "universe": dataset.meta.get("cell_table"),
                                           "released": released.tolist()}}
    on_table = Dataset(dataset.cells[released], moved(dataset.train_days), dataset.train_users,
                       moved(dataset.test_days), dataset.test_users, meta, dataset.where,
                       moved(dataset.holdout_days), dataset.holdout_users)
    fleet.move_to_table(released, ensure_initial_bundle(config, on_table, seed, run,
                                                        universe=(dataset.cells, mapping)))
    return on_table


def ensure_initial_bundle(config, dataset, seed: int, run: Path, universe=None) -> Path:
    """``run/bundle-initial``, the bundle the devices start from (written once, declaring the run's plan);
    ``universe``: (the public map's squares, the cell each moves to) when the table was released from one."""
    from pategail.server.coordinator import run_plan

    initial_bundle = run / "bundle-initial"
    if not (initial_bundle / "manifest.json").is_file():
        write_initial_bundle(config, dataset, seed, initial_bundle,
                             privacy=run_plan(config, dataset.cells, run / "checkpoint").declare(
                                 config.secagg.min_survivors, config.secagg.colluders), universe=universe)
    return initial_bundle


def run_coordinator(config, dataset, run: Path, fleet, *, seed: int, resume: bool = False, progress: bool = True,
                    downstream_config=None, console_level: int = logging.INFO, population=None, signing_key=None,
                    on_progress=None) -> int:
    """Algorithm 1 over ``fleet`` (any :class:`~pategail.server.fleet.Fleet`) in ``run``, resumed with
    ``resume``, with a progress bar unless ``progress`` is false; then the outputs, the downstream evaluation and the final policy sent to the devices.
    ``on_progress(coordinator)``: called once resumed and after every round (the service's status)."""
    from pategail.metrics.guard import GUARD_QUANTILE, distinct_cells_threshold
    from pategail.server.fedavg.coordinator import coordinator_class
    from pategail.server.privacy.summary import plan_line

    coordinator = coordinator_class(config)(config, fleet, dataset.cells, run, seed=seed, signing_key=signing_key)
    if resume and not coordinator.resume():
        log.info("%s: no round was checkpointed yet; starting again (journalled releases are re-used)", run)
    n_devices = len(fleet.device_ids)
    line = plan_line(coordinator.plan, n_devices, config.privacy.beta, config)
    log.info(line)
    if coordinator.plan.private and config.method != "dp-fedavg":   # say whether it can learn, before training
        from pategail.server.privacy.feasibility import plan_feasibility
        feasible = plan_feasibility(coordinator.plan, n_devices)
        print(f"privacy plan: {feasible.line()}", flush=True)
        if feasible.can_learn is False:
            log.warning("this run cannot be expected to learn: the noise on each released mean reward (std %.3g) "
                        "is above the measured tolerance %g at granularity %s (pategail privacy-plan --devices %d "
                        "--epsilon %g compares mechanisms and granularities)", feasible.noise_std,
                        feasible.tolerance, feasible.granularity, n_devices, config.privacy.epsilon)
    if on_progress is not None:
        on_progress(coordinator)

    # The invented-mode guard per round: the emulator holds the data set, so it knows the real days' 99.9th
    # percentile of distinct cells; the coordinator only reports the generated days' histogram.
    threshold = distinct_cells_threshold(dataset.train_days)
    log.info("invented-mode guard: a generated day above %g distinct cells (the real training days' %gth "
             "percentile) counts as invented", threshold, GUARD_QUANTILE)

    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=config.rounds, initial=coordinator.round, desc="rounds", unit="round")

    def on_round(stats):
        hist = stats.distinct_histogram
        invented = sum(hist[int(threshold) + 1:]) / max(1, sum(hist))
        log.info("round %d: %.1f%% of generated days above %g distinct cells (invented mode), stay share %.2f",
                 stats.round, 100 * invented, threshold, stats.stay_share)
        if bar is not None:
            postfix = {"D acc": f"{stats.disc_accuracy:.2f}", "reward": f"{stats.mean_reward:.3f}",
                       "invented": f"{invented:.0%}", "stay": f"{stats.stay_share:.2f}"}
            if stats.epsilon is not None:
                postfix["ε"] = f"{stats.epsilon:.3g}"
            if stats.ppo.get("signal_share", 1.0) < 1.0:
                postfix["signal"] = f"{stats.ppo['signal_share']:.2f}"
            bar.set_postfix(postfix)
            bar.update(1)
        if on_progress is not None:
            on_progress(coordinator)

    from tqdm.contrib.logging import logging_redirect_tqdm

    from pategail.server.errors import IntegrityError
    from pategail.sdk.secagg.errors import AbortAfterUnmask, SecAggAbort, TamperDetected
    try:
        with logging_redirect_tqdm():
            set_console_level(console_level)     # tqdm's handler replaces the console one, without its level
            coordinator.train(on_round)
    except AbortAfterUnmask as err:
        raise PategailError(f"round {coordinator.round + 1} stopped after its unmasking ({err}); its release counts "
                            "against the budget; the run is checkpointed: add --resume to retry") from None
    except SecAggAbort as err:
        raise PategailError(f"round {coordinator.round + 1} released nothing ({err}); the run is checkpointed: "
                            "bring the devices back and add --resume") from None
    except TamperDetected as err:
        # the aggregator unmasked, so the attempt stays counted (its intent is kept); nothing of it was used
        which = (f"round {coordinator.round + 1}" if coordinator.initial_states is not None
                 else "round 0 (initial states)")
        raise IntegrityError(f"{which}: the secure aggregation failed the integrity check ({err}); its release "
                             f"counts against the budget; the run is checkpointed after round {coordinator.round}: "
                             "add --resume to retry") from None
    finally:
        if bar is not None:
            bar.close()

    from pategail.reporting import write_outputs
    write_outputs(coordinator, dataset, run, seed=seed, fleet=fleet.describe(),
                  population=None if population is None else {**population.describe(),
                                                                "max_copies": population.max_copies})
    if downstream_config is not None:
        from pategail.evaluation.options import extend_run_report
        extend_run_report(run, dataset, downstream_config)
    accepted = coordinator.publish_policy((run / "bundle" / "policy.onnx").read_bytes())
    log.info("%d of %d devices accepted the final policy", accepted, n_devices)
    print((run / "report.md").read_text())
    print(f"Log of every round: {run / 'train.log'}")
    return 0


def set_console_level(level: int) -> None:
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(level)


@contextlib.contextmanager
def run_log(path: Path, quiet_terminal: bool, max_bytes: int = 0):
    """Every INFO line of the run into ``path`` (appended: a resumed run continues its log); on the terminal
    only warnings while ``quiet_terminal`` (the progress bar carries the per-round figures). Yields the
    terminal's level. ``max_bytes``: rotate the log at that size, keeping 4 older ones (0: never)."""
    from logging.handlers import RotatingFileHandler

    root = logging.getLogger()
    consoles = [h for h in root.handlers if not isinstance(h, logging.FileHandler)]
    saved = root.level, [h.level for h in consoles]
    console_level = max(logging.WARNING if quiet_terminal else logging.INFO, root.level)
    file_handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=4 if max_bytes else 0,
                                       encoding="utf-8")
    file_handler.setLevel(logging.INFO)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    root.setLevel(min(root.level, logging.INFO))
    set_console_level(console_level)
    try:
        yield console_level
    finally:
        root.removeHandler(file_handler)
        file_handler.close()
        root.setLevel(saved[0])
        for h, level in zip(consoles, saved[1]):
            h.setLevel(level)


def discriminator_training(config):
    """The devices' discriminator training settings (baked into a bundle) for a TrainConfig."""
    from pategail.export.artifacts import TrainingConfig
    return TrainingConfig(expert_label=1.0 - config.discriminator.label_smoothing,
                          weight_decay=config.discriminator.weight_decay)


def write_initial_bundle(config, dataset, seed: int, out: Path, privacy=None, universe=None) -> Path:
    """The bundle the devices start from: the run's initial policy and a fresh discriminator (both seeded);
    ``privacy``: the privacy plan it declares to the devices (private runs), or None; ``universe``: (squares,
    cell of each) of the public map a released cell table was chosen from, or None."""
    import torch

    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.server.coordinator import policy_config
    from pategail.server.policy import Policy

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy0 = Policy(policy_config(config, dataset.n_cells))
        torch.manual_seed(seed + 1)
        discriminator = Discriminator()
    return export_bundle(policy0, discriminator, out, training_config=discriminator_training(config),
                         environment=Environment(dataset.cells, config.environment.alpha, config.environment.candidates,
                                                       action_rates=config.uses_action_prior,
                                                       initial_states_days_cap=config.initial_states_days_cap,
                                                       universe=None if universe is None else universe[0],
                                                       table=None if universe is None else universe[1]),
                         privacy=privacy,
                         policy_training=config.method != "pategail")


