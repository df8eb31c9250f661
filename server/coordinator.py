"""The coordinator: the paper's Algorithm 1 over a population of devices it reaches only through bytes.

Each round: sample generated days from π_θ with the EPR environment → send them to every device
(``RoundRequest``) → each device trains its discriminator and scores the generated pairs → secure noisy
aggregation of Σ D_u and Σ D_u² → R, ξ, R̂ = R − βξ → a PPO update of π_θ. Before the first round, the initial
states (home, first cell) of generated days are learned through the same secure noisy aggregation.

The coordinator never sees a data set: it gets a :class:`Fleet` (device ids, public keys, a request/reply
byte channel and secure-aggregation endpoints) and the public cell table.
"""
from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np
import torch

from pategail.sdk.epr import CellGeometry, n_rank_bins
from pategail.sdk.messages import (Ack, ErrorReply, InitialStatesRequest, PolicyUpdate, RoundRequest, from_bytes,
                                   to_bytes)
from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.checkpoint import (Release, abort_intent, journal_intent, journal_release, load_checkpoint,
                                       read_intents, read_journal, save_checkpoint)
from pategail.server.config import TrainConfig
from pategail.server.initial_states import InitialStates, contribution_length
from pategail.server.policy import Policy, PolicyConfig
from pategail.server.ppo import ppo_update
from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.calibration import aggregate_rewards, sum_noise_scales
from pategail.server.privacy.planning import calibrate_per_query_epsilon
from pategail.server.sampling import sample_rollout
from pategail.server.secagg import SecAggAbort, SecAggCoordinator, SecureRoundConfig, run_secure_round

log = logging.getLogger(__name__)
SLOTS = 48


class Fleet(Protocol):
    """The devices as the coordinator sees them."""

    device_ids: tuple[int, ...]

    def public_keys(self) -> dict[int, DevicePublicKeys]:
        """Each device's long-term signing and envelope public keys (enrolment)."""

    def request(self, device_id: int, message: bytes) -> bytes:
        """Deliver one device-protocol message, return the device's reply."""

    def secagg_endpoints(self, device_ids: Sequence[int], directory) -> list:
        """The devices' secure-aggregation endpoints (each brings its own pending vector); ``directory`` is
        the public-key directory the coordinator distributes to them."""


@dataclass
class RoundStats:
    round: int
    devices: int
    survivors: int
    mean_reward: float
    disc_accuracy: float
    ppo: dict
    bytes_up: float | None
    bytes_down: float | None
    seconds: float
    epsilon: float | None


def planned_queries(config: TrainConfig, cells: np.ndarray, geometry: CellGeometry) -> int:
    """Queries an uninterrupted run releases: the environment release and every round's rewards."""
    return (contribution_length(len(cells), n_rank_bins(geometry.candidates))
            + config.rounds * config.days_per_round * (SLOTS - 1))


def budgeted_queries(config: TrainConfig, cells: np.ndarray, geometry: CellGeometry) -> int:
    """What the noise is calibrated for: the planned queries and ``retry_rounds`` rounds in reserve."""
    return planned_queries(config, cells, geometry) + config.retry_rounds * config.days_per_round * (SLOTS - 1)


def calibrate_plan(config: TrainConfig, cells: np.ndarray, geometry: CellGeometry) -> tuple[float, tuple[float, float]]:
    """The per-query ε whose composition over the budgeted queries meets the target, and the total noise
    scales on Σ D and Σ D² it gives (Theorem 3's split)."""
    eps = calibrate_per_query_epsilon(config.target_epsilon, config.target_delta,
                                      budgeted_queries(config, cells, geometry), config.kappa)
    s = sum_noise_scales(eps, config.kappa)
    return eps, (s.sum_scale, s.sq_sum_scale)


def declare_plan(config: TrainConfig, scales: tuple[float, float]) -> DeclaredPlan:
    """What a private run's bundles tell devices: the target, the noise scales on Σ D and Σ D², n_min and t."""
    return DeclaredPlan(config.target_epsilon, config.target_delta, scales[0], scales[1], config.min_survivors,
                        config.secagg_colluders)


class Coordinator:
    """Runs and checkpoints a training run in ``run_dir``; ``train()`` resumes where a checkpoint left off."""

    def __init__(self, config: TrainConfig, fleet: Fleet, cells: np.ndarray, run_dir: Path, seed: int = 0,
                 geometry: CellGeometry | None = None):
        self.config = config
        self.fleet = fleet
        self.cells = np.asarray(cells, dtype=np.float64)
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoint"
        self.seed = seed
        self.geometry = geometry or CellGeometry.build(self.cells, candidates=config.candidates)
        streams = np.random.SeedSequence(seed).spawn(3)
        self.rng_sampling = np.random.default_rng(streams[0])    # initial states, actions, destinations
        self.torch_gen = torch.Generator().manual_seed(int(streams[2].generate_state(1)[0]))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.policy = Policy(PolicyConfig(n_cells=len(self.cells), d_model=config.d_model,
                                              n_layers=config.n_layers))
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.ppo.learning_rate)
        self.policy_sum: dict[str, torch.Tensor] | None = None
        """Sum of the policy weights after each of the rounds averaged so far (``config.average_rounds``)."""
        self.policy_sum_count = 0
        self.accountant = PrivacyAccountant(target_delta=config.target_delta)
        self.initial_states: InitialStates | None = None
        self.per_query_epsilon: float | None = None
        self.history: list[dict] = []
        self.round = 0
        self.wall_seconds = 0.0
        """Training time over every session of the run (resumed ones included)."""
        self.bytes_by_round: list[tuple[float, float]] = []
        self.secagg = SecAggCoordinator()
        for device_id, keys in sorted(fleet.public_keys().items()):
            self.secagg.enroll(device_id, keys)

    # -- privacy ------------------------------------------------------------------------------------------
    def planned_queries(self) -> int:
        """Queries an uninterrupted run releases: the environment release and every round's rewards."""
        return planned_queries(self.config, self.cells, self.geometry)

    def budgeted_queries(self) -> int:
        """What the noise is calibrated for: the planned queries and ``retry_rounds`` rounds in reserve."""
        return budgeted_queries(self.config, self.cells, self.geometry)

    def _environment_length(self) -> int:
        return contribution_length(len(self.cells), n_rank_bins(self.geometry.candidates))

    def declared_plan(self) -> DeclaredPlan | None:
        """The privacy plan the run's bundles declare to devices (None without privacy)."""
        if not self.config.private:
            return None
        return declare_plan(self.config, self.noise_scales())

    def noise_scales(self) -> tuple[float, float]:
        """Total Laplace scales on each released Σ and Σ² (0, 0 without privacy)."""
        if not self.config.private:
            return 0.0, 0.0
        if self.per_query_epsilon is None:
            self.per_query_epsilon, _ = calibrate_plan(self.config, self.cells, self.geometry)
        s = sum_noise_scales(self.per_query_epsilon, self.config.kappa)
        return s.sum_scale, s.sq_sum_scale

    # -- state --------------------------------------------------------------------------------------------
    def _state(self) -> dict:
        return {"round": self.round, "config": self.config.to_dict(), "seed": self.seed,
                "policy": self.policy.state_dict(), "policy_config": vars(self.policy.config),
                "optimizer": self.optimizer.state_dict(),
                "rng_sampling": self.rng_sampling.bit_generator.state,
                "torch_gen": self.torch_gen.get_state(), "wall_seconds": self.wall_seconds,
                "initial_states": None if self.initial_states is None else self.initial_states.to_dict(),
                "per_query_epsilon": self.per_query_epsilon, "history": self.history,
                "bytes_by_round": self.bytes_by_round, "policy_sum": self.policy_sum,
                "policy_sum_count": self.policy_sum_count}

    def resume(self) -> bool:
        """Load the last checkpoint (and the release journal); False when there is none."""
        state = load_checkpoint(self.ckpt_dir)
        if state is None:
            return False
        if state["config"] != self.config.to_dict() or state["seed"] != self.seed:
            from pategail.errors import PategailError
            raise PategailError(f"{self.ckpt_dir}: the checkpoint was made with another configuration or seed; "
                                "use the same settings to resume, or another --out")
        self.round, self.wall_seconds = state["round"], state["wall_seconds"]
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng_sampling.bit_generator.state = state["rng_sampling"]
        self.torch_gen.set_state(state["torch_gen"])
        if state["initial_states"] is not None:
            self.initial_states = InitialStates.from_dict(state["initial_states"])
        self.per_query_epsilon = state["per_query_epsilon"]
        self.history, self.bytes_by_round = state["history"], state["bytes_by_round"]
        self.policy_sum, self.policy_sum_count = state["policy_sum"], state["policy_sum_count"]
        log.info("resumed %s after round %d", self.run_dir, self.round)
        return True

    def _checkpoint(self) -> None:
        save_checkpoint(self.ckpt_dir, self._state())

    def _rebuild_accountant(self) -> None:
        """Every secure aggregation that may have released counts, including one made after the last
        checkpoint and one whose result never reached the coordinator (see server/checkpoint.py)."""
        self.accountant = PrivacyAccountant(target_delta=self.config.target_delta)
        for intent in read_intents(self.ckpt_dir):
            if intent["sum_scale"] > 0:
                self.accountant.record(intent["sum_scale"], intent["sq_sum_scale"], intent["count"])

    def _check_budget(self, round_: int, length: int) -> None:
        """The promise of --epsilon: a release that would take the composed ε past the target is never
        started — checked before the devices are even asked, so nothing of the round happens."""
        sum_scale, sq_scale = self.noise_scales()
        if sum_scale <= 0:
            return
        after = self.accountant.epsilon_after(sum_scale, sq_scale, length)
        if after > self.config.target_epsilon:
            from pategail.errors import BudgetExhausted
            raise BudgetExhausted(
                f"round {round_}: its release would take the run to ε = {after:.4g}, past the target "
                f"{self.config.target_epsilon:g} (δ = {self.config.target_delta:g}); retried releases have used "
                f"the reserve of {self.config.retry_rounds} round(s) — stopping after round {self.round}, nothing "
                "more is released (a larger retry_rounds reserves more for a new run)")

    # -- one secure release -------------------------------------------------------------------------------
    def _broadcast(self, message: bytes, length: int | None = None) -> tuple[list[int], int, int]:
        """Send to every device; return those that acknowledged (with a pending vector of ``length`` values,
        when given), and bytes down / up."""
        ok, down, up = [], 0, 0
        for device_id in self.fleet.device_ids:
            reply = self.fleet.request(device_id, message)
            down, up = down + len(message), up + len(reply)
            answer = from_bytes(reply, expect=(Ack, ErrorReply))
            if isinstance(answer, Ack) and length is not None and answer.n != length:
                # an SDK of another version or a bundle with other EPR settings: its upload would not fit
                log.warning("device %d left out: it prepared %d values, the coordinator expects %d (another SDK "
                            "version or bundle?)", device_id, answer.n, length)
            elif isinstance(answer, Ack):
                ok.append(device_id)
            else:
                log.warning("device %d refused round: %s (%s)", device_id, answer.message, answer.code)
        return ok, down, up

    def _release(self, round_: int, kind: str, participants: list[int], length: int) -> tuple[Release, int, int]:
        journal = read_journal(self.ckpt_dir)
        if round_ in journal:                      # released before a crash: re-use it, spend nothing again
            log.info("round %d: re-using the release journalled before the interruption", round_)
            return journal[round_], 0, 0
        sum_scale, sq_scale = self.noise_scales()
        aggregator_sits_out = self.config.aggregator == "device"
        n_min = max(1, math.ceil(self.config.min_survivors * (len(self.fleet.device_ids) - aggregator_sits_out)))
        if len(participants) - aggregator_sits_out < n_min:
            raise SecAggAbort(f"only {len(participants)} of {len(self.fleet.device_ids)} devices took part in "
                              f"round {round_}; at least {n_min} must")
        if self.config.secagg_colluders >= n_min:
            from pategail.errors import PategailError
            raise PategailError(f"secagg_colluders={self.config.secagg_colluders} must be below n_min={n_min} "
                                f"(min_survivors of {len(self.fleet.device_ids)} devices)")
        config = SecureRoundConfig(round_id=round_ << 16, n_min=n_min, sum_noise_scale=sum_scale,
                                   sq_sum_noise_scale=sq_scale, degree=self.config.secagg_degree,
                                   aggregator=self.config.aggregator, colluders=self.config.secagg_colluders)
        intent = journal_intent(self.ckpt_dir, round_, sum_scale, sq_scale, length)   # counted from here on
        attempt = int(intent.stem.rsplit("-", 1)[1])
        config = replace(config, round_id=(round_ << 16) | attempt)
        if sum_scale > 0:
            self.accountant.record(sum_scale, sq_scale, length)
        endpoints = self.fleet.secagg_endpoints(participants, self.secagg.directory)
        # the aggregator draw (aggregator="device") comes from (seed, round, attempt), not a running stream,
        # so a resumed run draws what an uninterrupted one would
        rng = np.random.default_rng([self.seed, round_, attempt])
        try:
            result = run_secure_round(endpoints, None, config, rng, coordinator=self.secagg, num_queries=length)
        except SecAggAbort:                        # below n_min: the protocol released nothing
            abort_intent(intent)
            self._rebuild_accountant()
            raise
        release = Release(round_, kind, result.sum, result.sq_sum, result.n_survivors, sum_scale, sq_scale)
        journal_release(self.ckpt_dir, release)           # before anything uses it
        return release, sum(result.stats.bytes_down.values()), sum(result.stats.bytes_up.values())

    # -- the run ------------------------------------------------------------------------------------------
    def learn_initial_states(self) -> None:
        participants = []
        if 0 not in read_journal(self.ckpt_dir):          # else the journalled release is re-used
            self._check_budget(0, self._environment_length())
            participants, _, _ = self._broadcast(to_bytes(InitialStatesRequest(0)), self._environment_length())
        release, _, _ = self._release(0, "initial_states", participants, self._environment_length())
        self.initial_states = InitialStates.from_noisy_sums(
            release.sum, len(self.cells), n_rank_bins(self.geometry.candidates),
            noise_std=math.sqrt(2) * release.sum_scale)            # a Laplace(b) has standard deviation b·√2
        log.info("initial states learned from %d devices", release.n_survivors)
        self._checkpoint()

    def run_round(self, round_: int) -> RoundStats:
        t0 = time.perf_counter()
        cfg = self.config
        homes, firsts = self.initial_states.sample(cfg.days_per_round, self.rng_sampling)
        rollout, homes = sample_rollout(self.policy, self.geometry, homes, firsts, self.rng_sampling, cfg.alpha,
                                        self.initial_states.explore_factors, self.place_law())
        journal = read_journal(self.ckpt_dir)
        down = up = None                           # unknown for a release re-used after a crash
        if round_ in journal:
            release = journal[round_]
        else:
            request = RoundRequest(round_, cfg.disc_steps, cfg.disc_batch_size, rollout.cells.astype(np.int32),
                                   homes, rollout.actions.astype(np.int8))
            self._check_budget(round_, request.n_queries)
            participants, down, up = self._broadcast(to_bytes(request), request.n_queries)
            release, d2, u2 = self._release(round_, "rewards", participants, request.n_queries)
            down, up = down + d2, up + u2
        agg = aggregate_rewards(release.sum, release.sq_sum, release.n_survivors, cfg.beta)
        rewards = agg.r_hat.reshape(cfg.days_per_round, SLOTS - 1)
        # Standardised per round: every day has 47 decisions, so shifting all rewards by a constant changes
        # no policy's ranking, and scaling by a positive one neither — but it keeps returns O(1), which the
        # value head (Adam, clipped gradients) can follow; raw R̂ sums to ~15 and left it stuck near 0.
        rewards = ((rewards - rewards.mean()) / (rewards.std() + 1e-8)).astype(np.float32)
        rollout = replace(rollout, rewards=rewards)
        ppo_stats = ppo_update(self.policy, self.optimizer, rollout, cfg.ppo, self.torch_gen)
        n = len(self.fleet.device_ids)
        per_device = (None, None) if down is None else (down / n, up / n)
        if down is not None:
            self.bytes_by_round.append(per_device)
        stats = RoundStats(round=round_, devices=len(self.fleet.device_ids), survivors=release.n_survivors,
                           mean_reward=float(np.mean(agg.mean)),
                           # the ensemble's verdict on generated pairs: mean D below 1/2 means "generated"
                           disc_accuracy=float(np.mean(agg.mean < 0.5)), ppo=ppo_stats,
                           bytes_up=per_device[1], bytes_down=per_device[0], seconds=time.perf_counter() - t0,
                           epsilon=None)
        return stats

    def train(self, on_round: Callable[[RoundStats], None] | None = None) -> None:
        self._rebuild_accountant()
        if self.initial_states is None:
            self.learn_initial_states()
        while self.round < self.config.rounds:
            stats = self.run_round(self.round + 1)
            self.round += 1
            self._accumulate_average()
            self.wall_seconds += stats.seconds
            if self.config.private:
                stats.epsilon = self.accountant.epsilon()
            self.history.append(vars(stats))
            self._checkpoint()
            log.info("round %d: mean reward %.4f, discriminator accuracy %.3f, approx_kl %.4f, clip_fraction "
                     "%.3f, explained_variance %.3f", stats.round, stats.mean_reward, stats.disc_accuracy,
                     stats.ppo["approx_kl"], stats.ppo["clip_fraction"], stats.ppo["explained_variance"])
            if on_round is not None:
                on_round(stats)

    def _accumulate_average(self) -> None:
        if self.round <= self.config.rounds - self.config.average_rounds:
            return
        weights = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}
        if self.policy_sum is None:
            self.policy_sum = weights
        else:
            for k, v in weights.items():
                self.policy_sum[k] += v
        self.policy_sum_count += 1

    def averaged_policy(self) -> Policy:
        """The policy to publish: the mean of the weights after each averaged round so far (the current
        policy before the first of them)."""
        if self.policy_sum is None:
            return self.policy
        policy = copy.deepcopy(self.policy)              # no fresh initialisation: the torch RNG is untouched
        policy.load_state_dict({k: v / self.policy_sum_count for k, v in self.policy_sum.items()})
        policy.eval()
        return policy

    def place_law(self):
        """The released place law the environment uses (None: the classic EPR laws, by configuration or for a
        run checkpointed before place laws existed)."""
        return self.initial_states.places if self.config.place_law else None

    def publish_policy(self, onnx_bytes: bytes) -> int:
        """Send a new policy model (hash-checked by the devices); return how many accepted it."""
        accepted, _, _ = self._broadcast(to_bytes(PolicyUpdate.for_model(self.round, onnx_bytes)))
        return len(accepted)

    def generate(self, n_days: int, rng: np.random.Generator) -> np.ndarray:
        """Synthetic days (n_days, 48) from the averaged policy and the released initial states."""
        homes, firsts = self.initial_states.sample(n_days, rng)
        rollout, _ = sample_rollout(self.averaged_policy(), self.geometry, homes, firsts, rng, self.config.alpha,
                                    self.initial_states.explore_factors, self.place_law())
        return rollout.cells.astype(np.int32)
