"""Policy → ONNX Runtime on-device training artifacts for maximum likelihood (the DP-FedAvg method).

A device fits the policy to its owner's real days: the loss is the mean negative log-likelihood of the labelled
actions (:func:`pategail.sdk.features.label_actions`) of its days under the causal policy, on the state features
and action masks the EPR environment computes (:func:`pategail.sdk.features.state_features`,
:func:`~pategail.sdk.features.action_mask`) — the same distribution the devices and PPO sample from
(:func:`pategail.server.policy.masked_log_probs`). The device trains with plain SGD (the client optimiser of
DP-FedAvg, McMahan et al. 2018), so a round's local training starts from the global parameters alone.

The optimizer model is ONNX Runtime's AdamW with betas (0, 0), no weight decay and ε = ``SGD_LEARNING_RATE_SCALE``
(:data:`pategail.sdk.fedavg_round.SGD_LEARNING_RATE_SCALE`), run at the SGD learning rate times ε: its step
lr·ε·g / (|g| + ε) is SGD's lr·g within a factor 1 / (1 + |g|/ε), and with betas (0, 0) its moments are this
step's gradient alone, so it keeps no state between steps. ONNX Runtime's SGD optimizer model does not open in
its C API's training session in onnxruntime-web 1.19.2 (the C++ core Android's training package ships), where
AdamW's does (docs/java-device.md). The manifest declares the scale; devices multiply their learning rate by it.

Graph inputs (training and eval models): ``cells`` int64 (batch, 48), ``features`` float32 (batch, 48, 11),
``mask`` bool (batch, 47, 4) — the masks of slots 0..46 — and ``targets`` float32 (batch, 47, 4), the one-hot
labelled actions. Outputs: ``loss`` (the mean over the batch's decisions of −log π(a | s)) and
``log_likelihood`` float32 (batch, 47), each decision's log π(a | s) (0 where the labelled action is masked,
which :func:`~pategail.sdk.features.label_actions` never produces).

Trainable: every parameter of the policy except the value head (the likelihood does not depend on it, so the
exporter leaves it out of the graph; the global model keeps its value head as it is). Traps handled besides those of :mod:`pategail.export.artifacts`
(same exporter settings): torch exports ``LayerNormalization`` with one output, ONNX Runtime's gradient builder
needs its two optional outputs (mean, inverse standard deviation), which :func:`_layer_norm_outputs` adds.
"""
from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import onnx
import torch
from onnxruntime.training import onnxblock
from torch import nn

from pategail.export.artifacts import MAX_IR_VERSION, OPSET, generate_artifacts, unwrapped_names
from pategail.sdk.fedavg_round import (MLE_INPUT_CELLS, MLE_INPUT_FEATURES, MLE_INPUT_MASK, MLE_INPUT_TARGETS,
                                       MLE_OUTPUT_LIKELIHOOD, MLE_OUTPUT_LOSS, SGD_LEARNING_RATE_SCALE)
from pategail.sdk.features import N_ACTIONS, N_STATE_FEATURES, SLOTS
from pategail.server.fedavg.coordinator import FROZEN_PREFIX, trainable_names
from pategail.server.policy import Policy, masked_log_probs

FILES = {
    "training": "policy_training_model.onnx",
    "eval": "policy_eval_model.onnx",
    "optimizer": "policy_optimizer_model.onnx",
    "checkpoint": "policy_checkpoint",
}
"""Role → file name of the policy's maximum-likelihood training files in a bundle."""

LOSS_FORMULA = "-mean(sum(targets * where(mask, log_softmax(where(mask, logits, -1e9)), 0), -1))"


class PolicyLogLikelihood(nn.Module):
    """(cells, features, mask, targets) → log π of each labelled action of slots 0..46 (batch, 47)."""

    def __init__(self, policy: Policy):
        super().__init__()
        self.policy = policy

    def forward(self, cells, features, mask, targets):
        logits, _ = self.policy(cells, features)
        logp = masked_log_probs(logits[:, :-1], mask)
        return (targets * torch.where(mask, logp, torch.zeros_like(logp))).sum(-1)


def policy_nll(policy: Policy, cells: torch.Tensor, features: torch.Tensor, mask: torch.Tensor,
               targets: torch.Tensor) -> torch.Tensor:
    """The torch twin of the training model's loss: the mean over decisions of −log π(a | s)."""
    return -PolicyLogLikelihood(policy)(cells, features, mask, targets).mean()


class NegativeMean(onnxblock.Block):
    """loss = −mean(x) of the model's per-decision log-likelihood (a scalar)."""

    def build(self, input_name: str) -> str:
        graph, h = self.base.graph, onnx.helper
        graph.node.append(h.make_node("ReduceMean", [input_name], ["nll.mean"], name="nll.mean", keepdims=0))
        graph.node.append(h.make_node("Neg", ["nll.mean"], [MLE_OUTPUT_LOSS], name="nll.neg"))
        return MLE_OUTPUT_LOSS


def export_likelihood_onnx(policy: Policy) -> onnx.ModelProto:
    """The forward graph of :class:`PolicyLogLikelihood`, every ``state_dict`` name kept as an initializer."""
    model = PolicyLogLikelihood(policy)
    was_training = policy.training
    B, T = 2, SLOTS
    example = (torch.zeros(B, T, dtype=torch.int64), torch.zeros(B, T, N_STATE_FEATURES),
               torch.ones(B, T - 1, N_ACTIONS, dtype=torch.bool), torch.zeros(B, T - 1, N_ACTIONS))
    buf = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            torch.onnx.export(
                model.train(), example, buf, dynamo=False, opset_version=OPSET,  # type: ignore[arg-type]  # a file object
                training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                input_names=[MLE_INPUT_CELLS, MLE_INPUT_FEATURES, MLE_INPUT_MASK, MLE_INPUT_TARGETS],
                output_names=[MLE_OUTPUT_LIKELIHOOD],
                dynamic_axes={name: {0: "batch"} for name in (MLE_INPUT_CELLS, MLE_INPUT_FEATURES, MLE_INPUT_MASK,
                                                              MLE_INPUT_TARGETS, MLE_OUTPUT_LIKELIHOOD)})
    finally:
        policy.train(was_training)
    proto = unwrapped_names(onnx.load_from_string(buf.getvalue()), "policy.", trainable_names(policy))
    _layer_norm_outputs(proto)
    return proto


def _layer_norm_outputs(proto: onnx.ModelProto) -> None:
    """Give every LayerNormalization node its optional Mean and InvStdDev outputs (the gradient needs them)."""
    for i, node in enumerate(proto.graph.node):
        if node.op_type == "LayerNormalization" and len(node.output) == 1:
            node.output.extend([f"layer_norm_{i}.mean", f"layer_norm_{i}.inv_std"])


def build_policy_training_artifacts(policy: Policy, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write the policy's maximum-likelihood training, eval and (SGD, as AdamW: see the module) optimizer models and
    its checkpoint into ``out_dir`` (see :data:`FILES`); return role → path. The learning rate is set by the device
    each round."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    base = export_likelihood_onnx(policy)
    names = trainable_names(policy)
    present = {i.name for i in base.graph.initializer}
    frozen = [n for n, _ in policy.named_parameters() if n.startswith(FROZEN_PREFIX) and n in present]
    paths = generate_artifacts(FILES, base, requires_grad=names, frozen_params=frozen, loss=NegativeMean(),
                               optimizer=onnxblock.optim.AdamW(betas=(0.0, 0.0), eps=SGD_LEARNING_RATE_SCALE,
                                                               weight_decay=0.0),
                               artifact_directory=out_dir, prefix="policy_",
                               loss_input_names=[MLE_OUTPUT_LIKELIHOOD],
                               additional_output_names=[MLE_OUTPUT_LIKELIHOOD])
    for role in ("training", "eval", "optimizer"):
        ir = onnx.load(paths[role], load_external_data=False).ir_version
        if ir > MAX_IR_VERSION:
            raise RuntimeError(f"{paths[role].name} has IR version {ir} > {MAX_IR_VERSION}")
    return paths


def manifest_section(policy: Policy, paths: dict[str, Path], model_entry) -> dict:
    """The bundle manifest's ``policy_training`` section (``model_entry``: pategail.export.bundle's)."""
    training = onnx.load(paths["training"], load_external_data=False)
    trainable = set(trainable_names(policy))
    shapes = {n: list(p.shape) for n, p in policy.named_parameters()}
    order = [vi.name for vi in training.graph.input if vi.name in trainable]
    if order != trainable_names(policy):
        # the coordinator's flat vector follows named_parameters(): the devices' must be the same order
        raise RuntimeError("the policy training model's parameters are not the policy's, in its order")
    user = [MLE_INPUT_CELLS, MLE_INPUT_FEATURES, MLE_INPUT_MASK, MLE_INPUT_TARGETS]
    outputs = [MLE_OUTPUT_LOSS, MLE_OUTPUT_LIKELIHOOD]
    return {
        "models": {"training": model_entry(paths["training"], user, outputs),
                   "eval": model_entry(paths["eval"], user, outputs),
                   "optimizer": model_entry(paths["optimizer"])},
        "checkpoint": paths["checkpoint"].name,
        "parameters": [{"name": n, "shape": shapes[n]} for n in order],
        "n_parameters": int(sum(policy.get_parameter(n).numel() for n in order)),
        "frozen": sorted(set(shapes) - trainable),
        "loss": LOSS_FORMULA,
        "optimizer": {"type": "SGD", "torch_equivalent": "torch.optim.SGD(lr) without momentum or weight decay",
                      "learning_rate_scale": SGD_LEARNING_RATE_SCALE,
                      "implementation": "AdamWOptimizer, betas (0, 0), no weight decay, eps = learning_rate_scale, "
                                        "run at lr * learning_rate_scale: lr * g / (1 + |g| / eps)"},
    }
