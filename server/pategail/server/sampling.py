"""The coordinator samples generated days exactly as devices do: the SDK's ``generate_days`` loop, with the
torch policy behind the same ``run(output_names, feeds)`` interface as the ONNX policy models — the
incremental one (key/value cache buffers, :class:`TorchPolicyStepSession`, what sampling uses) or the
full-prefix one (:class:`TorchPolicySession`)."""
from __future__ import annotations

import numpy as np
import torch

from pategail.sdk.decoding import ONE_STAGE, POLICY_INPUT_SLOT, CacheLayout, cache_names, new_names
from pategail.sdk.epr import CellGeometry
from pategail.sdk.features import action_mask, state_features
from pategail.sdk.generate import (POLICY_INPUT_CELLS, POLICY_INPUT_FEATURES, POLICY_INPUT_MASK,
                                   POLICY_OUTPUT_LOG_PROBS, POLICY_OUTPUT_LOGITS, POLICY_OUTPUT_VALUES,
                                   generate_days)
from pategail.server.policy import Policy, masked_log_probs
from pategail.server.ppo import Rollout


class TorchPolicySession:
    """Runs the torch policy with the ONNX policy model's inputs and outputs (no gradients)."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def run(self, output_names, feeds):
        with torch.no_grad():
            logits, values = self.policy(torch.from_numpy(feeds[POLICY_INPUT_CELLS]),
                                         torch.from_numpy(feeds[POLICY_INPUT_FEATURES]))
            log_probs = masked_log_probs(logits, torch.from_numpy(feeds[POLICY_INPUT_MASK]))
        out = {POLICY_OUTPUT_LOG_PROBS: log_probs, POLICY_OUTPUT_LOGITS: logits, POLICY_OUTPUT_VALUES: values}
        return [out[name].numpy() for name in output_names]


class TorchPolicyStepSession:
    """Runs the torch policy with the incremental ONNX model's inputs and outputs (no gradients): the cache
    buffers are the caller's numpy arrays, read in place."""

    cache_buffers = True
    cache_stage = ONE_STAGE
    """One buffer of 47 rows, as before the decoder had stages: torch's products round
    differently over other capacities, which would change seeded training runs made before; the stages pay in
    ONNX Runtime's generation (``pategail generate``, ``Device.generate``), not in the coordinator's sampling of
    a round's days."""

    def __init__(self, policy: Policy):
        self.policy = policy
        c = policy.config
        self.cache_layout = CacheLayout(c.n_layers, c.n_heads, c.d_model // c.n_heads)
        self._cache = cache_names(c.n_layers)
        self._new = new_names(c.n_layers)

    def run(self, output_names, feeds):
        with torch.no_grad():
            buffers = [torch.from_numpy(feeds[name]) for name in self._cache]
            logits, values, new = self.policy.forward_step(torch.from_numpy(feeds[POLICY_INPUT_CELLS]),
                                                           torch.from_numpy(feeds[POLICY_INPUT_FEATURES]),
                                                           torch.from_numpy(feeds[POLICY_INPUT_SLOT]), buffers)
            log_probs = masked_log_probs(logits, torch.from_numpy(feeds[POLICY_INPUT_MASK]))
        out = {POLICY_OUTPUT_LOG_PROBS: log_probs, POLICY_OUTPUT_LOGITS: logits, POLICY_OUTPUT_VALUES: values,
               **dict(zip(self._new, new))}
        return [out[name].numpy() for name in output_names]


def sample_rollout(policy: Policy, geometry: CellGeometry, homes: np.ndarray, first_cells: np.ndarray,
                   rng: np.random.Generator, alpha: float,
                   explore_factors: np.ndarray | None = None, places=None,
                   max_cells: int | None = None) -> tuple[Rollout, np.ndarray]:
    """Generate one day per initial state (with ``max_cells``, a day holding that many distinct cells adds no
    more); return the rollout (rewards still zero, the masks of the same limit) and the homes."""
    policy.eval()
    gen = generate_days(TorchPolicyStepSession(policy), geometry, homes, first_cells, rng, alpha=alpha,
                        explore_factors=explore_factors, places=places, max_cells=max_cells)
    features = state_features(gen.days, homes, geometry.cells)
    masks = action_mask(gen.days, homes, max_cells)
    with torch.no_grad():
        _, values = policy(torch.from_numpy(gen.days.astype(np.int64)), torch.from_numpy(features))
    rollout = Rollout(cells=gen.days.astype(np.int64), features=features, masks=masks,
                      actions=gen.actions.astype(np.int64), log_probs=gen.log_probs,
                      values=values[:, :-1].numpy(), rewards=np.zeros(gen.actions.shape, dtype=np.float32))
    return rollout, np.asarray(homes, dtype=np.int32)
