"""The coordinator: the paper's Algorithm 1 over a population of devices it reaches only through bytes.

Each round: sample generated days from π_θ with the EPR environment → send them to every device
(``RoundRequest``) → each device trains its discriminator and scores the generated pairs → secure noisy
aggregation of Σ D_u and Σ D_u² (:mod:`pategail.server.releases`) → R, ξ, R̂ = R − βξ
(:mod:`pategail.server.rewards`) → a PPO update of π_θ. Before the first round, the initial states (home,
first cell) of generated days are learned through the same secure noisy aggregation.

The coordinator never sees a data set: it gets a :class:`~pategail.server.fleet.Fleet` (device ids, public
keys, a request/reply byte channel and one secure sum per release) and the public cell table; ``signing_key``
is its Ed25519 key (a served run keeps one across restarts: devices pin it).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.sdk.contribution import EnvironmentLayout
from pategail.sdk.epr import CellGeometry, EPREnvironment, n_rank_bins
from pategail.sdk.features import STAY, distinct_cells
from pategail.sdk.messages import InitialStatesRequest, PolicyUpdate, RoundRequest, to_bytes
from pategail.sdk.places import PlaceLaw
from pategail.sdk.regions import region_map
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.action_prior import SIGNAL_GATE, behaviour_clone, sample_rule_days
from pategail.server.averaging import TailAverage
from pategail.server.checkpoint import Release, load_checkpoint, save_checkpoint
from pategail.server.config import TrainConfig, run_settings, setting_differences
from pategail.server.fleet import Fleet
from pategail.server.initial_states import InitialStates
from pategail.server.places import rank_calibrated_factors, tempered
from pategail.server.policy import Policy, PolicyConfig
from pategail.server.ppo import PolicyOptimizer, ppo_update
from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.plan import PrivacyPlan
from pategail.server.privacy.run_plan import make_run_plan, run_queries
from pategail.server.privacy.summary import privacy_section
from pategail.server.releases import SecureReleases
from pategail.server.rewards import ensemble_verdict, reward_signal_share, rewards_from_release
from pategail.server.run_state import RoundStats, RunState, RunSummary
from pategail.server.sampling import sample_rollout

log = logging.getLogger(__name__)


def environment_layout(cells: np.ndarray, geometry: CellGeometry, region_cells: int = 0,
                       action_rates: bool = False) -> EnvironmentLayout:
    """The environment release's layout: initial states, explore law, the place law's n_cells + 3, with
    ``region_cells`` > 0 the coarse parts over the table's regions (``TrainConfig.region_cells``), and with
    ``action_rates`` the action-rate part (``TrainConfig.action_prior``)."""
    n_regions = int(region_map(cells, region_cells).max()) + 1 if region_cells else 0
    return EnvironmentLayout(len(cells), n_rank_bins(geometry.candidates), place_law=True, n_regions=n_regions,
                             action_rates=action_rates)


def environment_length(cells: np.ndarray, geometry: CellGeometry, region_cells: int = 0,
                       action_rates: bool = False) -> int:
    """Values of the environment release (:func:`environment_layout`)."""
    return environment_layout(cells, geometry, region_cells, action_rates).length


def planned_queries(config: TrainConfig, cells: np.ndarray, geometry: CellGeometry) -> int:
    """Every query an uninterrupted run releases (:func:`pategail.server.privacy.run_plan.run_queries`)."""
    env = environment_length(cells, geometry, config.privacy.region_cells, config.uses_action_prior)
    return run_queries(config, env)[0]


def run_plan(config: TrainConfig, cells: np.ndarray, ckpt_dir: Path,
             geometry: CellGeometry | None = None) -> PrivacyPlan:
    """The run's privacy plan: made once, the first time it is asked for (before the initial bundle that
    declares it), and read back from ``ckpt_dir`` by every later caller — the coordinator included
    (:func:`pategail.server.privacy.run_plan.make_run_plan` over this cell table's environment vector)."""
    if not config.resolved:
        if config.private:
            raise ValueError("a private run's plan needs its device count: call run_plan with "
                             "config.for_devices(devices)")
        config = config.for_devices(1)        # without privacy δ and the share do not depend on it
    geometry = geometry or CellGeometry.build(np.asarray(cells, dtype=np.float64),
                                              candidates=config.environment.candidates)
    if config.method == "dp-fedavg" and config.private:       # releases model deltas, not rewards
        from pategail.server.fedavg.coordinator import fedavg_plan
        return fedavg_plan(config, cells, ckpt_dir, geometry)
    env = environment_length(cells, geometry, config.privacy.region_cells, config.uses_action_prior)
    if config.privacy.released_cells and config.private:      # planned after the cell release it composes with
        from pategail.server.cell_table import load_cell_plan
        return make_run_plan(config, env, ckpt_dir, load_cell_plan(ckpt_dir))
    return make_run_plan(config, env, ckpt_dir)


def policy_config(config: TrainConfig, n_cells: int) -> PolicyConfig:
    """The shape of a run's policy (the coordinator's and the initial bundle's)."""
    return PolicyConfig(n_cells=n_cells, d_model=config.policy.d_model, n_heads=config.policy.n_heads,
                        n_layers=config.policy.n_layers)


def _setting_names(settings: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted names of a nested dict of settings (``ppo.n_epochs``)."""
    for key, value in settings.items():
        if isinstance(value, dict):
            yield from _setting_names(value, f"{prefix}{key}.")
        else:
            yield prefix + key


class Coordinator:
    """Runs and checkpoints a training run in ``run_dir``; ``train()`` resumes where a checkpoint left off."""

    def __init__(self, config: TrainConfig, fleet: Fleet, cells: np.ndarray, run_dir: Path, seed: int = 0,
                 geometry: CellGeometry | None = None, signing_key: Ed25519PrivateKey | None = None):
        config = config.for_devices(len(fleet.device_ids), len(cells))    # δ and the environment's share
        self.config = config
        self.fleet = fleet
        self.cells = np.asarray(cells, dtype=np.float64)
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoint"
        self.seed = seed
        self.geometry = geometry or CellGeometry.build(self.cells, candidates=config.environment.candidates)
        streams = np.random.SeedSequence(seed).spawn(3)
        self.rng_sampling = np.random.default_rng(streams[0])    # initial states, actions, destinations
        self.torch_gen = torch.Generator().manual_seed(int(streams[2].generate_state(1)[0]))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.policy = Policy(policy_config(config, len(self.cells)))
        self.optimizer: PolicyOptimizer = torch.optim.Adam(self.policy.parameters(), lr=config.ppo.learning_rate)
        self.anchor: Policy | None = None
        """The behaviour-cloned warm start PPO's KL anchor pulls towards (``action_prior`` with
        ``ppo.anchor_coef`` > 0), else None."""
        self.average = TailAverage(first_round=config.rounds - config.average_rounds)
        self.state = RunState()
        self.releases = SecureReleases(config, fleet, self.ckpt_dir, seed, signing_key)
        self.plan: PrivacyPlan = run_plan(config, self.cells, self.ckpt_dir, self.geometry)
        """The run's privacy, fixed when the run was created (kept in the checkpoint directory)."""
        self.releases.factors = self.plan.factors(self.plan.adjacency)

    @property
    def round(self) -> int:
        """Rounds completed."""
        return self.state.round

    @property
    def initial_states(self) -> InitialStates | None:
        return self.state.initial_states

    @property
    def history(self) -> list[dict[str, Any]]:
        """One RoundStats (as a dict) per completed round."""
        return self.state.history

    @property
    def accountant(self) -> PrivacyAccountant:
        """The privacy accountant: every release of the run so far (rebuilt from the journal)."""
        return self.releases.accountant

    @property
    def policy_sum_count(self) -> int:
        """Rounds in the tail average so far."""
        return self.average.count

    # -- plan ---------------------------------------------------------------------------------------------
    def planned_queries(self) -> int:
        """Every query the run releases: the environment vector (initial states, explore law and the place
        law's n_cells + 3 entries), then 47 per generated day of every round."""
        return planned_queries(self.config, self.cells, self.geometry)

    def _environment_length(self) -> int:
        return environment_length(self.cells, self.geometry, self.config.privacy.region_cells, self.config.uses_action_prior)

    def declared_plan(self) -> DeclaredPlan | None:
        """The privacy plan the run's bundles declare to devices (None without privacy)."""
        return self.plan.declare(self.config.secagg.min_survivors, self.config.secagg.colluders)

    def _check_budget(self, round_: int, length: int, kind: str) -> None:
        """No release past the target is started (BudgetExhausted, exit status 4): checked before the devices
        are asked for round ``round_``."""
        self.releases.check_budget(round_, length, self.plan.release_noise(kind), self.config.privacy.retry_rounds)

    def _released_length(self, n_queries: int) -> int:
        """Values the secure aggregation sums for a round of ``n_queries`` scored pairs: one per pair, or one
        per block of the Gaussian mechanism's granularity."""
        if self.plan.scheme.releases_vectors:
            return self.config.privacy.reward_granularity.count(self.config.days_per_round)
        return n_queries

    # -- checkpoint ---------------------------------------------------------------------------------------
    def resume(self) -> bool:
        """Load the last checkpoint (and the release journal); False when there is none."""
        state = load_checkpoint(self.ckpt_dir)
        if state is None:
            return False
        from pategail.server.errors import PategailError
        if "privacy_plan" not in state:
            raise PategailError(f"{self.ckpt_dir}: the checkpoint was made by an older version of pategail (it "
                                "has no privacy plan) and cannot be resumed; start the run again in another --out")
        # a setting added or removed by a later version (its config differs in names, not only in values) is
        # not read at a default: the shape or the meaning of what was trained could differ silently
        # (the settings the method never reads are left out: a later version may rename or re-default them)
        method = {"method": state["config"].get("method", "pategail")}       # first: it says which settings count
        if method["method"] != self.config.method:
            changed = setting_differences(method, {"method": self.config.method}, "the checkpoint")
            raise PategailError(f"{self.ckpt_dir}: the checkpoint was made with another configuration or seed "
                                f"({changed[0]}); use the same settings to resume, or another --out")
        recorded, current = run_settings(state["config"], self.config.to_dict())
        if set(_setting_names(recorded)) != set(_setting_names(current)):
            raise PategailError(f"{self.ckpt_dir}: the checkpoint was made by another version of pategail (its "
                                "settings differ in name, not only in value) and cannot be resumed; start the run "
                                "again in another --out")
        saved, current = run_settings(TrainConfig.from_dict(recorded, where=str(self.ckpt_dir)).to_dict(),
                                      self.config.to_dict())
        changed = setting_differences({**saved, "seed": state["seed"]}, {**current, "seed": self.seed},
                                      "the checkpoint")
        if changed:
            raise PategailError(f"{self.ckpt_dir}: the checkpoint was made with another configuration or seed "
                                f"({'; '.join(changed)}); use the same settings to resume, or another --out")
        self.state = RunState.from_dict(state)
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng_sampling.bit_generator.state = state["rng_sampling"]
        self.torch_gen.set_state(state["torch_gen"])
        self.plan = PrivacyPlan.from_dict(state["privacy_plan"])
        self.average.sum, self.average.count = state["policy_sum"], state["policy_sum_count"]
        if state.get("anchor") is not None:
            self.anchor = Policy(self.policy.config)
            self.anchor.load_state_dict(state["anchor"])
        log.info("resumed %s after round %d", self.run_dir, self.round)
        return True

    def _checkpoint(self) -> None:
        save_checkpoint(self.ckpt_dir, {
            **self.state.to_dict(), "config": self.config.to_dict(), "seed": self.seed,
            "policy": self.policy.state_dict(), "policy_config": vars(self.policy.config),
            "optimizer": self.optimizer.state_dict(), "rng_sampling": self.rng_sampling.bit_generator.state,
            "torch_gen": self.torch_gen.get_state(), "privacy_plan": self.plan.to_dict(),
            "policy_sum": self.average.sum, "policy_sum_count": self.average.count,
            **({} if self.anchor is None else {"anchor": self.anchor.state_dict()})})

    # -- the run ------------------------------------------------------------------------------------------
    def learn_initial_states(self) -> None:
        t0 = time.perf_counter()
        participants: list[int] = []
        noise = self.plan.release_noise("initial_states")
        if 0 not in self.releases.journal():               # else the journalled release is re-used
            self._check_budget(0, self._environment_length(), "initial_states")
            request = InitialStatesRequest(0, self.config.privacy.region_cells)
            participants, _, _ = self.releases.broadcast(to_bytes(request),
                                                         self._environment_length())
        release, _, _ = self.releases.release(0, "initial_states", participants, self._environment_length(),
                                              noise)
        std = noise.scheme.device.noise_std(release.sum_scale)
        region_of = region_map(self.cells, self.config.privacy.region_cells) if self.config.privacy.region_cells else None
        self.state.initial_states = InitialStates.from_noisy_sums(
            release.sum, len(self.cells), n_rank_bins(self.geometry.candidates), noise_std=std, region_of=region_of,
            action_rates=self.config.uses_action_prior)
        states = self.state.initial_states
        places = self.place_law()
        if places is not None:
            # the released factors calibrate the classic law; re-scale them for the relevance-weighted one
            # (post-processing of released values), from the cells days start from: the homes
            self.state.initial_states = replace(states, explore_factors=rank_calibrated_factors(
                self.geometry.neighbours, self.config.environment.alpha, states.explore_factors, places.relevance,
                states.home_weights))
        log.info("initial states learned from %d devices", release.n_survivors)
        if self.max_day_cells() is not None:
            log.info("environment: the released rates show (almost) no day beyond %d distinct cells; a generated day "
                     "adds no cell past them", self.max_day_cells())
        if self.config.uses_action_prior:
            self.warm_start()
        self.state.initial_seconds += time.perf_counter() - t0
        self._checkpoint()

    def warm_start(self) -> None:
        """Behaviour-clone the policy on days of the released rule model (``TrainConfig.action_prior``), from
        streams of its own (the seed's), so a run resumed after the release clones the same; keep a copy as
        PPO's anchor when ``ppo.anchor_coef`` > 0."""
        cfg = self.config
        rates = self._released_states().action_rates
        assert rates is not None, "released with the action-rate part when TrainConfig.action_prior is on"
        if not rates.usable:
            log.warning("action prior: the released rates are %.1f noise standard deviations (< %g): no warm start",
                        rates.signal, SIGNAL_GATE)
            return
        rng = np.random.default_rng([self.seed, 0xB0C])
        homes, firsts = self.sample_initial_states(cfg.environment.action_prior_days, rng)
        env = EPREnvironment(self.geometry, alpha=cfg.environment.alpha,
                             explore_factors=self._released_states().explore_factors, rng=rng, places=self.place_law(),
                             max_cells=self.max_day_cells())
        days = sample_rule_days(rates, env, homes, firsts, rng)
        t0 = time.perf_counter()
        losses = behaviour_clone(self.policy, days, self.cells, epochs=cfg.environment.action_prior_epochs,
                                 lr=cfg.environment.action_prior_lr, batch_size=cfg.ppo.batch_size,
                                 generator=torch.Generator().manual_seed(self.seed))
        log.info("warm start: policy cloned on %d rule-model days in %.1f s (cross-entropy %s)", len(homes),
                 time.perf_counter() - t0, f"{losses[-1]:.4f}" if losses else "n/a")
        if cfg.ppo.anchor_coef > 0:
            self.anchor = Policy(self.policy.config)
            self.anchor.load_state_dict(self.policy.state_dict())

    def run_round(self, round_: int) -> RoundStats:
        t0 = time.perf_counter()
        cfg = self.config
        homes, firsts = self.sample_initial_states(cfg.days_per_round, self.rng_sampling)
        rollout, homes = sample_rollout(self.policy, self.geometry, homes, firsts, self.rng_sampling, cfg.environment.alpha,
                                        self._released_states().explore_factors, self.place_law(), self.max_day_cells())
        journal = self.releases.journal()
        down = up = None                           # unknown for a release re-used after a crash
        if round_ in journal:
            release = journal[round_]
        else:
            request = RoundRequest(round_, cfg.discriminator.steps, cfg.discriminator.batch_size, rollout.cells.astype(np.int32),
                                   homes, rollout.actions.astype(np.int8))
            released = self._released_length(request.n_queries)
            self._check_budget(round_, released, "rewards")
            participants, down, up = self.releases.broadcast(to_bytes(request), request.n_queries)
            release, d2, u2 = self.releases.release(round_, "rewards", participants, released,
                                                    self.plan.release_noise("rewards"))
            down, up = down + d2, up + u2
        public_count = self.releases.public_count()
        rollout = replace(rollout, rewards=rewards_from_release(release, cfg, public_count))
        signal = reward_signal_share(release, cfg, public_count, self._reward_noise_std(release))
        ppo_stats = ppo_update(self.policy, self.optimizer, rollout, cfg.ppo, self.torch_gen, self.anchor,
                               step_scale=signal if cfg.ppo.signal_scaled_step else 1.0)
        ppo_stats["signal_share"] = signal
        n = len(self.fleet.device_ids)
        bytes_down, bytes_up = self._record_bytes(down, up)
        mean_reward, disc_accuracy = ensemble_verdict(release, cfg, public_count)
        return RoundStats(round=round_, devices=n, survivors=release.n_survivors, mean_reward=mean_reward,
                          disc_accuracy=disc_accuracy, ppo=ppo_stats, bytes_up=bytes_up,
                          bytes_down=bytes_down, seconds=time.perf_counter() - t0, epsilon=None,
                          stay_share=float(np.mean(rollout.actions == STAY)),
                          distinct_histogram=np.bincount(distinct_cells(rollout.cells)).tolist())

    def _reward_noise_std(self, release: Release) -> float:
        """The standard deviation of the noise on each released reward sum: the plan's σ on a sum, grown by
        √(contributors / shares) when more devices contributed than the shares were sized for."""
        noise = self.plan.release_noise("rewards")
        std = noise.scheme.device.noise_std(release.sum_scale)
        return std * math.sqrt(max(1.0, release.n_survivors / self.releases.honest_shares()))

    def _record_bytes(self, down: int | None, up: int | None) -> tuple[float | None, float | None]:
        """(down, up) bytes per device of a round's release, kept in the run state; (None, None) for a
        release re-used from the journal (its traffic is unknown)."""
        if down is None or up is None:
            return None, None
        n = len(self.fleet.device_ids)
        self.state.bytes_by_round.append((down / n, up / n))
        return down / n, up / n

    def train(self, on_round: Callable[[RoundStats], None] | None = None) -> None:
        self.releases.rebuild_accountant()
        if self.initial_states is None:
            self.learn_initial_states()
        while self.round < self.config.rounds:
            stats = self.run_round(self.round + 1)
            self.state.round += 1
            self.average.add(self.round, self.policy)
            self.state.wall_seconds += stats.seconds
            if self.config.private:
                stats.epsilon = self.accountant.epsilon_under(self.releases.factors)   # the target's relation
            self.state.history.append(vars(stats))
            self._checkpoint()
            self.log_round(stats)
            if on_round is not None:
                on_round(stats)

    def log_round(self, stats: RoundStats) -> None:
        log.info("round %d: mean reward %.4f, discriminator accuracy %.3f, approx_kl %.4f, clip_fraction "
                 "%.3f, explained_variance %.3f, signal share %.2f", stats.round, stats.mean_reward,
                 stats.disc_accuracy, stats.ppo["approx_kl"], stats.ppo["clip_fraction"],
                 stats.ppo["explained_variance"], stats.ppo.get("signal_share", 1.0))

    # -- results ------------------------------------------------------------------------------------------
    def averaged_policy(self) -> Policy:
        """The policy to publish: the mean of the weights after each averaged round so far (the current
        policy before the first of them)."""
        return self.average.averaged(self.policy)

    def sample_initial_states(self, n_days: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(homes, first cells) of ``n_days`` generated days from the released initial states."""
        return self._released_states().sample(n_days, rng)

    def _released_states(self) -> InitialStates:
        """The released initial states, for what runs after their release (``learn_initial_states``)."""
        assert self.initial_states is not None, "the initial states are released before anything reads them"
        return self.initial_states

    def place_law(self) -> PlaceLaw | None:
        """The released place law the environment uses (None: the classic EPR laws, by configuration or for a
        run checkpointed before place laws existed)."""
        if not self.config.uses_place_law(len(self.fleet.device_ids)):
            return None
        places = self._released_states().places
        return None if places is None else tempered(places, self.config.environment.relevance_exponent)

    def max_day_cells(self) -> int | None:
        """The environment's limit on distinct cells a generated day holds, drawn from the released action
        rates (``environment.day_cells_limit``; None: no limit, or no rates released)."""
        rates = self._released_states().action_rates
        if rates is None or not self.config.environment.day_cells_limit:
            return None
        return rates.max_cells

    def publish_policy(self, onnx_bytes: bytes) -> int:
        """Send a new policy model (hash-checked by the devices, and signature-checked where a network carries
        it); return how many accepted it."""
        accepted, _, _ = self.releases.broadcast(to_bytes(PolicyUpdate.for_model(self.round, onnx_bytes)))
        return len(accepted)

    def generate(self, n_days: int, rng: np.random.Generator) -> np.ndarray:
        """Synthetic days (n_days, 48) from the averaged policy and the released initial states."""
        homes, firsts = self.sample_initial_states(n_days, rng)
        rollout, _ = sample_rollout(self.averaged_policy(), self.geometry, homes, firsts, rng, self.config.environment.alpha,
                                    self._released_states().explore_factors, self.place_law(), self.max_day_cells())
        return rollout.cells.astype(np.int32)

    def summary(self) -> RunSummary:
        """What a report says about the run so far."""
        n_dev = len(self.fleet.device_ids)
        privacy = privacy_section(self.plan, self.accountant, n_dev, self.config.privacy.beta, len(self.releases.journal()),
                                  self.config)
        shares = [h["ppo"]["signal_share"] for h in self.state.history if "signal_share" in h["ppo"]]
        if self.plan.private and self.config.privacy.scheme.releases_vectors and shares:     # estimated: Gaussian
            privacy["reward_signal_share"] = float(np.mean(shares))
        return RunSummary.of(self.state, self.config, self.seed, n_dev, self.geometry.candidates, privacy,
                             self.place_law())
