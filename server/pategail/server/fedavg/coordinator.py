"""DP-FedAvg of the policy on the coordinator (user-level, McMahan et al. 2018), on PateGail's own parts.

Before round 1 the environment (initial states, explore and place laws) is released exactly as in a PateGail
run (:meth:`Coordinator.learn_initial_states`). Each round: send the global trainable parameters θ to every
device (:class:`~pategail.sdk.messages.FedAvgRequest`) → each device fits the policy to its own days by
maximum likelihood and keeps its delta, L2-clipped to ``fedavg.clip_norm`` and divided by it
(:mod:`pategail.sdk.fedavg_round`) → one secure aggregation of those vectors with the Gaussian mechanism (a
signed vector of clip norm 1 in upload units, ``DELTA_BLOCK``) → mean Δ = clip_norm × noisy sum / the fixed
number of devices → the server optimiser's step (FedAvg: θ ← θ + server_lr · mean Δ; FedAdam).

Privacy: one release per round of sensitivity 1 (upload units, the clip norm) under zero-out adjacency, twice
that under replace-one; the run's plan is a Gaussian plan over the environment vector and ``rounds +
retry_rounds`` delta releases (:func:`fedavg_plan`), calibrated, journalled, accounted and declared to the
devices (their ledgers, floors and budget checks) exactly as PateGail's reward releases are.
"""
from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.sdk.accounting import gaussian_sensitivity
from pategail.sdk.features import distinct_cells
from pategail.sdk.epr import CellGeometry
from pategail.sdk.features import STAY
from pategail.sdk.messages import FedAvgRequest, to_bytes
from pategail.sdk.secagg.mechanisms import DELTA_BLOCK, GAUSSIAN
from pategail.server.config import TrainConfig
from pategail.server.coordinator import Coordinator, environment_length, policy_config
from pategail.server.fedavg.config import FedAvgConfig
from pategail.server.fleet import Fleet
from pategail.server.policy import Policy
from pategail.server.privacy.gaussian import env_l2_bound
from pategail.server.privacy.plan import GaussianSpec, PrivacyPlan, ReleaseNoise, load_or_make_plan, plan_gaussian_run
from pategail.server.run_state import RoundStats
from pategail.server.sampling import sample_rollout

log = logging.getLogger(__name__)

DELTA_GRANULARITY = "model-delta"
"""The plan's ``granularity`` of a DP-FedAvg run: one release of the whole clipped model delta per round."""
FROZEN_PREFIX = "value_head."
"""Parameters maximum likelihood does not train (the policy's log-probabilities do not depend on them)."""


def trainable_names(policy: Policy) -> list[str]:
    """The policy's parameters DP-FedAvg trains, in ``named_parameters()`` order — the flat vector's order (the
    bundle's ``policy_training.parameters``)."""
    return [n for n, _ in policy.named_parameters() if not n.startswith(FROZEN_PREFIX)]


def delta_length(policy: Policy) -> int:
    """Values of one device's model delta."""
    return int(sum(policy.get_parameter(n).numel() for n in trainable_names(policy)))


def fedavg_plan(config: TrainConfig, cells: np.ndarray, ckpt_dir: Path, geometry: CellGeometry) -> PrivacyPlan:
    """The privacy plan of a private DP-FedAvg run over the cell table ``cells``, kept in ``ckpt_dir``."""
    env = environment_length(cells, geometry, config.privacy.region_cells, config.uses_action_prior)
    return plan_delta_run(config, policy_values(config, len(cells)), env, ckpt_dir)


def policy_values(config: TrainConfig, n_cells: int) -> int:
    """Values of one device's model delta for a run of ``config`` over ``n_cells`` cells."""
    with torch.random.fork_rng(devices=[]):
        return delta_length(Policy(policy_config(config, n_cells)))


def plan_delta_run(config: TrainConfig, values: int, env: int, directory: Path | None = None) -> PrivacyPlan:
    """The privacy plan of a private DP-FedAvg run: the environment vector (``env`` values) and ``rounds +
    retry_rounds`` releases of a ``values``-value delta of L2 norm ≤ 1 (upload units), jointly calibrated to the
    target (Gaussian, RDP; :func:`pategail.server.privacy.plan.plan_gaussian_run`); with ``directory``, the one
    kept there when made for the same settings."""
    p = config.privacy
    assert p.delta is not None and p.env_epsilon_fraction is not None, "resolve with for_devices"
    # the clip share that makes the plan's clip norm 1: C = share · ½√values
    spec = GaussianSpec(DELTA_GRANULARITY, values, config.rounds + p.retry_rounds, env, 2.0 / math.sqrt(values),
                        p.env_epsilon_fraction, env_l2_bound(config.uses_action_prior), p.adjacency)
    planned, reserve = env + config.rounds * values, p.retry_rounds * values
    if directory is None:
        return plan_gaussian_run(p.epsilon, p.delta, p.kappa, planned, reserve, spec)
    return load_or_make_plan(directory, p.epsilon, p.delta, p.kappa, planned, reserve, spec)


def delta_release_noise(plan: PrivacyPlan, method: str, values: int) -> ReleaseNoise:
    """The noise of one delta release (zero without privacy), on the devices' deltas divided by their clip norm
    (a signed vector of clip norm 1): the mean delta's noise std is ``sum_scale`` · clip_norm / devices on every
    parameter. A DP-FedAvg plan is made for these releases (its noise std and clip norm); the hybrid's plan is
    PateGail's, whose noise multiplier z a delta release takes on its own sensitivity (σ = z · Δ₂ of a
    ``values``-value vector of clip norm 1), so that it costs what a reward release costs."""
    g = plan.gaussian
    if not plan.private:
        return ReleaseNoise(GAUSSIAN.name, 0.0, 0.0, DELTA_BLOCK, 1.0)
    assert g is not None, "a private DP-FedAvg or hybrid run's plan is a Gaussian plan (TrainConfig checks)"
    if method == "dp-fedavg":
        return ReleaseNoise(GAUSSIAN.name, g["noise_std"], 0.0, DELTA_BLOCK, g["clip_norm"])
    return ReleaseNoise(GAUSSIAN.name, g["noise_multiplier"] * gaussian_sensitivity(1.0, values), 0.0, DELTA_BLOCK, 1.0)


def delta_noise_norm(plan: PrivacyPlan, method: str, values: int, devices: int) -> float:
    """The L2 norm of the noise on the mean model delta over ``devices`` devices, in clip norms (√values · the
    noise std on each parameter / the clip norm)."""
    return delta_release_noise(plan, method, values).sum_scale * math.sqrt(values) / devices


def delta_environment_share(config: TrainConfig, devices: int, n_cells: int) -> float:
    """A private DP-FedAvg run's environment share (δ set): the largest in ``SHARE_RANGE`` (on the
    ``SHARE_STEP`` grid) at which the noise on the mean model delta is at most ``DELTA_NOISE_LIMIT`` clip norms
    (pategail.server.privacy.defaults), else the smallest. The environment vector's length does not change
    the deltas' noise, so only the model's size is needed."""
    from dataclasses import replace

    from pategail.server.privacy.defaults import DELTA_NOISE_LIMIT, SHARE_RANGE, SHARE_STEP

    low, high = SHARE_RANGE
    values = policy_values(config, n_cells)
    for i in range(round((high - low) / SHARE_STEP), -1, -1):
        share = round(low + i * SHARE_STEP, 10)
        trial = replace(config, privacy=replace(config.privacy, env_epsilon_fraction=share))
        if delta_noise_norm(plan_delta_run(trial, values, 1), config.method, values, devices) <= DELTA_NOISE_LIMIT:
            return share
    return low


def server_optimizer(params: list[torch.Tensor], fa: FedAvgConfig) -> torch.optim.Optimizer:
    """The server optimiser, stepped with −mean Δ as the gradient (``fa`` resolved: ``TrainConfig.for_devices``)."""
    if not fa.resolved:
        raise ValueError("the server step size is filled in for a run: resolve the config with "
                         "TrainConfig.for_devices")
    assert fa.server_lr is not None                      # resolved
    if fa.server_optimizer == "fedadam":
        return torch.optim.Adam(params, lr=fa.server_lr, betas=(fa.server_beta1, fa.server_beta2), eps=fa.server_eps)
    return torch.optim.SGD(params, lr=fa.server_lr)


class FedAvgCoordinator(Coordinator):
    """A DP-FedAvg run in ``run_dir`` (the same checkpoints, journal, report and bundle as a PateGail run)."""

    def __init__(self, config: TrainConfig, fleet: Fleet, cells: np.ndarray, run_dir: Path, seed: int = 0,
                 geometry: CellGeometry | None = None, signing_key: Ed25519PrivateKey | None = None):
        super().__init__(config, fleet, cells, run_dir, seed, geometry, signing_key)
        self.names = trainable_names(self.policy)
        self.optimizer = server_optimizer([self.policy.get_parameter(n) for n in self.names], self.config.fedavg)

    @property
    def n_values(self) -> int:
        return delta_length(self.policy)

    def delta_noise(self) -> ReleaseNoise:
        """The noise of this run's delta releases (:func:`delta_release_noise`)."""
        return delta_release_noise(self.plan, self.config.method, self.n_values)

    def global_parameters(self) -> np.ndarray:
        """float32 (P,): θ in the flat order devices use."""
        with torch.no_grad():
            return torch.cat([self.policy.get_parameter(n).detach().reshape(-1) for n in self.names]).numpy() \
                .astype(np.float32)

    def apply_delta(self, mean_delta: np.ndarray) -> None:
        """One server-optimiser step with −``mean_delta`` (parameter units) as the gradient."""
        flat = torch.from_numpy(np.asarray(mean_delta, dtype=np.float32))
        offset = 0
        for name in self.names:
            p = self.policy.get_parameter(name)
            p.grad = -flat[offset:offset + p.numel()].reshape(p.shape).clone()
            offset += p.numel()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def run_round(self, round_: int) -> RoundStats:
        t0 = time.perf_counter()
        cfg, fa = self.config, self.config.fedavg
        values = self.n_values
        journal = self.releases.journal()
        down = up = None                           # unknown for a release re-used after a crash
        noise = self.delta_noise()
        if round_ in journal:
            release = journal[round_]
        else:
            request = FedAvgRequest(round_, fa.local_epochs, fa.batch_size, fa.client_lr, fa.clip_norm,
                                    self.global_parameters())
            self.releases.check_budget(round_, values, noise, cfg.privacy.retry_rounds)      # never past the target
            participants, down, up = self.releases.broadcast(to_bytes(request), values)
            release, d2, u2 = self.releases.release(round_, "delta", participants, values, noise)
            down, up = down + d2, up + u2
        public_count = self.releases.public_count()
        mean_delta = np.asarray(release.sum, dtype=np.float64) * fa.clip_norm / public_count
        self.apply_delta(mean_delta)
        # generated days of the updated policy, for the run's statistics (public: no device is involved)
        homes, firsts = self.sample_initial_states(cfg.days_per_round, self.rng_sampling)
        rollout, _ = sample_rollout(self.policy, self.geometry, homes, firsts, self.rng_sampling, cfg.environment.alpha,
                                    self._released_states().explore_factors, self.place_law(), self.max_day_cells())
        n = len(self.fleet.device_ids)
        bytes_down, bytes_up = self._record_bytes(down, up)
        update = {"mean_delta_norm": float(np.linalg.norm(mean_delta)),
                  "noise_std_on_mean_delta": noise.sum_scale * fa.clip_norm / public_count}
        return RoundStats(round=round_, devices=n, survivors=release.n_survivors, mean_reward=float("nan"),
                          disc_accuracy=float("nan"), ppo=update, bytes_up=bytes_up,
                          bytes_down=bytes_down, seconds=time.perf_counter() - t0, epsilon=None,
                          stay_share=float(np.mean(rollout.actions == STAY)),
                          distinct_histogram=np.bincount(distinct_cells(rollout.cells)).tolist())

    def log_round(self, stats: RoundStats) -> None:
        log.info("round %d: %d of %d devices in the release, mean delta norm %.4g (noise std on it %.3g per value), "
                 "stay share %.3f", stats.round, stats.survivors, stats.devices, stats.ppo["mean_delta_norm"],
                 stats.ppo["noise_std_on_mean_delta"], stats.stay_share)


def coordinator_class(config: TrainConfig) -> type[Coordinator]:
    """The coordinator of ``config.method``."""
    if config.method == "hybrid":
        from pategail.server.fedavg.hybrid import HybridCoordinator
        return HybridCoordinator
    return FedAvgCoordinator if config.method == "dp-fedavg" else Coordinator
