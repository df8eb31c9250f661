"""A device's round of DP-FedAvg (user-level, McMahan et al. 2018): local maximum-likelihood epochs of the policy
on the owner's own labelled days, then the model delta, L2-clipped here on the device.

The bundle's ``policy_training`` artifacts (:mod:`pategail.export.policy_training`) compute the mean negative
log-likelihood of the real days' labelled actions (:func:`~pategail.sdk.features.label_actions`) under the
causal policy, on the features the EPR environment computes; their optimizer is plain SGD (written as ONNX
Runtime's AdamW, see :data:`SGD_LEARNING_RATE_SCALE`). A round: load the coordinator's global parameters θ,
run ``epochs`` passes over the owner's days in minibatches of
``batch_size`` days (shuffled by the device's generator), Δ = θ_local − θ, clip Δ to L2 norm ``clip_norm`` and
keep Δ / ``clip_norm`` — entries in [−1, 1], norm ≤ 1 — as the pending vector of the secure aggregation that
follows (a Gaussian round over a signed vector, ``pategail.sdk.secagg.mechanisms.DELTA_BLOCK``, clip norm 1). The
coordinator multiplies the noisy sum by ``clip_norm`` and divides it by the fixed number of devices.

Torch-free: numpy and onnxruntime (training build).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pategail.sdk.bundle import Bundle
from pategail.sdk.features import N_ACTIONS, SLOTS, action_mask, label_actions, state_features

MLE_INPUT_CELLS = "cells"
"""int64 (batch, 48): the days' cell ids."""
MLE_INPUT_FEATURES = "features"
"""float32 (batch, 48, 11): ``state_features`` of the days."""
MLE_INPUT_MASK = "mask"
"""bool (batch, 47, 4): ``action_mask`` of slots 0..46."""
MLE_INPUT_TARGETS = "targets"
"""float32 (batch, 47, 4): the labelled actions, one-hot."""
MLE_OUTPUT_LOSS = "loss"
"""The mean over the batch's decisions of −log π(a | s)."""
MLE_OUTPUT_LIKELIHOOD = "log_likelihood"
"""float32 (batch, 47): log π(a | s) of each labelled decision."""
MLE_ROLES = ("training", "eval", "optimizer")
SGD_LEARNING_RATE_SCALE = 1e8
"""The optimizer model is AdamW with betas (0, 0), no weight decay and this ε, run at the SGD learning rate times
ε: lr·g / (1 + |g|/ε), SGD within |g|/ε (:mod:`pategail.export.policy_training`). Bundles declare it in
``policy_training.optimizer.learning_rate_scale``; those without it have an SGD optimizer model (scale 1)."""


@dataclass(frozen=True, eq=False)
class LabelledDays:
    """The model inputs of a set of real days (see the ``MLE_INPUT_*`` names)."""

    cells: np.ndarray
    features: np.ndarray
    mask: np.ndarray
    targets: np.ndarray

    def __len__(self) -> int:
        return len(self.cells)

    def take(self, index: np.ndarray) -> tuple[np.ndarray, ...]:
        return self.cells[index], self.features[index], self.mask[index], self.targets[index]


def labelled_days(days: np.ndarray, home: int, cells: np.ndarray) -> LabelledDays:
    """The owner's days as maximum-likelihood inputs: each move labelled with the EPR action that explains it."""
    days = np.asarray(days, dtype=np.int64)
    homes = np.full(len(days), int(home), dtype=np.int64)
    actions = label_actions(days, homes)
    targets = np.zeros(actions.shape + (N_ACTIONS,), dtype=np.float32)
    np.put_along_axis(targets, actions[..., None].astype(np.int64), 1.0, axis=-1)
    return LabelledDays(np.ascontiguousarray(days), state_features(days, homes, cells).astype(np.float32),
                        np.ascontiguousarray(action_mask(days, homes)[:, :SLOTS - 1]), targets)


class PolicyTrainer:
    """An ONNX Runtime training session on the bundle's ``policy_training`` artifacts (SGD), from the bundle's
    checkpoint or ``checkpoint``. The flat parameter vector is in the manifest's ``policy_training.parameters``
    order."""

    def __init__(self, bundle: Bundle, *, threads: int = 1, checkpoint: str | os.PathLike[str] | None = None) -> None:
        from pategail.sdk.bundle import ensure_training_api, session_options
        from pategail.sdk.errors import BundleError

        spec = bundle.policy_training
        if spec is None:
            raise BundleError(f"{bundle.root}: the bundle has no policy training artifacts (a DP-FedAvg run's "
                              "bundle has them)")
        ensure_training_api()
        from onnxruntime.training.api import CheckpointState, Module, Optimizer

        self.spec = spec
        self.state = CheckpointState.load_checkpoint(os.fspath(spec.checkpoint if checkpoint is None else checkpoint))
        self.module = Module(os.fspath(spec.models["training"].path), self.state,
                             os.fspath(spec.models["eval"].path), session_options=session_options(threads, arena=False))
        self.optimizer = Optimizer(os.fspath(spec.models["optimizer"].path), self.module)

    @property
    def n_parameters(self) -> int:
        return int(self.spec.n_parameters)

    def get_parameters(self) -> np.ndarray:
        """float32 (n_parameters,): the trainable parameters now."""
        flat: np.ndarray = self.module.get_contiguous_parameters(trainable_only=True).numpy().copy()
        return flat

    def set_parameters(self, flat: np.ndarray) -> None:
        from onnxruntime import OrtValue

        flat = np.ascontiguousarray(flat, dtype=np.float32)
        if flat.shape != (self.n_parameters,):
            raise ValueError(f"expected {self.n_parameters} policy parameters, got shape {flat.shape}")
        self.module.copy_buffer_to_parameters(OrtValue.ortvalue_from_numpy(flat)._ortvalue, trainable_only=True)

    def train_step(self, batch: tuple[np.ndarray, ...], learning_rate: float) -> float:
        """One SGD step at ``learning_rate`` on a batch (cells, features, mask, targets); returns the loss before
        it. The optimizer model runs at the rate times the bundle's declared scale."""
        self.optimizer.set_learning_rate(float(learning_rate) * self.spec.learning_rate_scale)
        self.module.train()
        loss = self.module(*batch)[0]
        self.optimizer.step()
        self.module.lazy_reset_grad()
        return float(loss)

    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Write the parameters (no optimizer state: SGD has none) as a checkpoint at ``path``."""
        from onnxruntime.training.api import CheckpointState

        CheckpointState.save_checkpoint(self.state, os.fspath(path), include_optimizer_state=False)

    def loss(self, batch: tuple[np.ndarray, ...]) -> float:
        """The mean negative log-likelihood of a batch under the current parameters (eval model)."""
        self.module.eval()
        return float(self.module(*batch)[0])


def local_update(trainer: PolicyTrainer, data: LabelledDays, parameters: np.ndarray, *, epochs: int,
                 batch_size: int, learning_rate: float, rng: np.random.Generator) -> np.ndarray:
    """float64 (n_parameters,): θ_local − θ after ``epochs`` shuffled passes of SGD over ``data`` from θ =
    ``parameters``."""
    start = np.ascontiguousarray(parameters, dtype=np.float32)
    trainer.set_parameters(start)
    for _ in range(int(epochs)):
        order = rng.permutation(len(data))
        for lo in range(0, len(order), int(batch_size)):
            trainer.train_step(data.take(order[lo:lo + int(batch_size)]), learning_rate)
    return trainer.get_parameters().astype(np.float64) - start.astype(np.float64)


def clip_delta(delta: np.ndarray, clip_norm: float) -> np.ndarray:
    """Δ scaled down to L2 norm ``clip_norm`` when longer (user-level clipping, on the device)."""
    delta = np.asarray(delta, dtype=np.float64)
    if not np.all(np.isfinite(delta)):
        raise ValueError("the local update is not finite (a learning rate too large?)")
    norm = float(np.linalg.norm(delta))
    return delta * (clip_norm / norm) if norm > clip_norm else delta


def delta_upload(delta: np.ndarray, clip_norm: float) -> np.ndarray:
    """The pending vector of a DP-FedAvg round: the clipped Δ over ``clip_norm`` (L2 norm ≤ 1, entries in
    [−1, 1]); the coordinator scales the released sum back by ``clip_norm``."""
    return clip_delta(delta, clip_norm) / float(clip_norm)
