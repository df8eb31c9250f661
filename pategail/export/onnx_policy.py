"""Policy → the ONNX inference model that devices (and the coordinator's sampler) run to generate days.

Inputs: ``cells`` int64 (batch, slots), ``features`` float32 (batch, slots, 11) from ``state_features``,
``mask`` bool (batch, slots, 4) from ``action_mask``. Outputs: ``log_probs`` float32 (batch, slots, 4) —
masked log-probabilities (impossible actions get ≈ −1e9, probability 0), ``logits`` (unmasked) and
``values`` (batch, slots). Both batch and slots (≤ 48) are dynamic. Row t depends on slots ≤ t, so a device
can run the model on the prefix l_0..l_t and sample the action at t from the last row.
"""
from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import onnx
import torch

from pategail.export.artifacts import MAX_IR_VERSION, OPSET
from pategail.sdk.features import N_ACTIONS, N_STATE_FEATURES
# the names are the SDK's: the device side owns the interface, the exporter writes it
from pategail.sdk.generate import POLICY_INPUT_CELLS as INPUT_CELLS
from pategail.sdk.generate import POLICY_INPUT_FEATURES as INPUT_FEATURES
from pategail.sdk.generate import POLICY_INPUT_MASK as INPUT_MASK
from pategail.sdk.generate import POLICY_OUTPUT_LOG_PROBS as OUTPUT_LOG_PROBS
from pategail.sdk.generate import POLICY_OUTPUT_LOGITS as OUTPUT_LOGITS
from pategail.sdk.generate import POLICY_OUTPUT_VALUES as OUTPUT_VALUES
from pategail.server.policy import Policy, PolicyInference

POLICY_FILE = "policy.onnx"


def export_policy_onnx(policy: Policy) -> onnx.ModelProto:
    """The policy inference model (opset :data:`OPSET`, dynamic batch and slots, one file)."""
    was_training = policy.training
    model = PolicyInference(policy).eval()          # eval() reaches the policy: restored below
    B, T = 2, min(5, policy.config.max_slots)
    example = (torch.zeros(B, T, dtype=torch.int64), torch.zeros(B, T, N_STATE_FEATURES),
               torch.ones(B, T, N_ACTIONS, dtype=torch.bool))
    buf = io.BytesIO()
    seq = {0: "batch", 1: "slots"}
    try:
        with warnings.catch_warnings():
            # the legacy (TorchScript) exporter on purpose, as for the discriminator (export/artifacts.py)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            torch.onnx.export(
                model, example, buf, dynamo=False, opset_version=OPSET,
                input_names=[INPUT_CELLS, INPUT_FEATURES, INPUT_MASK],
                output_names=[OUTPUT_LOG_PROBS, OUTPUT_LOGITS, OUTPUT_VALUES],
                dynamic_axes={name: seq for name in (INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, OUTPUT_LOG_PROBS,
                                                      OUTPUT_LOGITS, OUTPUT_VALUES)},
            )
    finally:
        policy.train(was_training)
    proto = onnx.load_from_string(buf.getvalue())
    if proto.ir_version > MAX_IR_VERSION:
        raise RuntimeError(f"policy model has IR version {proto.ir_version} > {MAX_IR_VERSION}")
    return proto


def save_policy_onnx(policy: Policy, path: str | os.PathLike) -> Path:
    """Export and write the policy inference model to ``path``; return the path."""
    path = Path(path)
    onnx.save(export_policy_onnx(policy), path)
    return path
