"""The population fleet's DP-FedAvg round: every simulated device's local maximum-likelihood epochs and clipped
delta, computed with torch as the SDK device computes them with ONNX Runtime (:mod:`pategail.sdk.fedavg_round`:
the same labelled days, the same minibatch order from the device's generator (seed, device id, round), plain SGD
on the same loss) — so the released sum is the SDK fleet's up to float rounding (tested on 20 devices).

A shard returns the Σ of its devices' encoded uploads (int64 quanta, each device's delta clipped to
``clip_norm``, divided by it and encoded as its secure-aggregation client encodes a signed vector of clip norm
1); no per-device state is kept (DP-FedAvg devices hold none between rounds).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pategail.sdk.fedavg_round import delta_upload, labelled_days
from pategail.sdk.messages import FedAvgRequest
from pategail.sdk.secagg.mechanisms import DELTA_BLOCK, gaussian_input
from pategail.sdk.secagg.fixedpoint import encode_signed


@dataclass(frozen=True)
class DeltaEncoding:
    """The fields of a round configuration :func:`~pategail.sdk.secagg.mechanisms.gaussian_input` reads for a
    DP-FedAvg upload: a signed vector of clip norm 1 (the plan's, ``pategail.server.fedavg``)."""

    block: int = DELTA_BLOCK
    clip_norm: float = 1.0


@dataclass(frozen=True)
class PolicyShape:
    """What the devices train, read from the bundle: the policy's config and its trainable parameters' names
    in flat-vector order (manifest ``policy_training.parameters``)."""

    config: dict
    names: tuple[str, ...]


def encoded_upload(delta: np.ndarray, clip_norm: float) -> np.ndarray:
    """int64 (P,): one device's upload before its noise share."""
    # DeltaEncoding has the two fields gaussian_input reads of a RoundConfig (block, clip_norm)
    return encode_signed(gaussian_input(delta_upload(delta, clip_norm), DeltaEncoding()))  # type: ignore[arg-type]


class LocalTrainer:
    """A torch policy of ``shape`` that runs one device's local epochs (one per shard, reused)."""

    def __init__(self, shape: PolicyShape):
        from pategail.server.policy import Policy, PolicyConfig

        with torch.random.fork_rng(devices=[]):
            self.policy = Policy(PolicyConfig(**shape.config))
        self.params = [self.policy.get_parameter(n) for n in shape.names]

    def delta(self, theta: np.ndarray, data, request: FedAvgRequest, rng: np.random.Generator) -> np.ndarray:
        """float64 (P,): θ_local − θ (pategail.sdk.fedavg_round.local_update's torch twin)."""
        from pategail.export.policy_training import policy_nll

        start = torch.from_numpy(np.array(theta, dtype=np.float32))
        # (vector_to_parameters makes the parameters views of the vector it is given: a copy, so start stays θ)
        torch.nn.utils.vector_to_parameters(start.clone(), self.params)
        tensors = [torch.from_numpy(a) for a in (data.cells, data.features, data.mask, data.targets)]
        for _ in range(request.epochs):
            order = rng.permutation(len(data))
            for lo in range(0, len(order), request.batch_size):
                idx = torch.from_numpy(order[lo:lo + request.batch_size])
                loss = policy_nll(self.policy, *(t[idx] for t in tensors))
                grads = torch.autograd.grad(loss, self.params)
                with torch.no_grad():
                    for p, g in zip(self.params, grads):
                        p.sub_(g, alpha=request.learning_rate)
        with torch.no_grad():
            end = torch.nn.utils.parameters_to_vector(self.params)
        return end.numpy().astype(np.float64) - start.numpy().astype(np.float64)


def shard_fedavg(trainer: LocalTrainer, ids: np.ndarray, days: list[np.ndarray], homes: list[int],
                 table_of: np.ndarray, cells: np.ndarray, seed: int, request: FedAvgRequest) -> np.ndarray:
    """Σ over the devices ``ids`` (device k holds ``days[table_of[k]]`` with home ``homes[table_of[k]]``) of
    their encoded uploads for ``request``, int64 (P,)."""
    labelled = {}
    total = np.zeros(len(request.parameters), dtype=np.int64)
    for k, device in enumerate(ids):
        t = int(table_of[k])
        if t not in labelled:
            labelled[t] = labelled_days(days[t], homes[t], cells)
        rng = np.random.default_rng([seed, int(device), max(request.round, 0)])   # the emulator's device rng
        total += encoded_upload(trainer.delta(request.parameters, labelled[t], request, rng), request.clip_norm)
    return total
