"""Policy → the ONNX inference model that devices (and the coordinator's sampler) run to generate days.

Inputs: ``cells`` int64 (batch, slots), ``features`` float32 (batch, slots, 11) from ``state_features``,
``mask`` bool (batch, slots, 4) from ``action_mask``. Outputs: ``log_probs`` float32 (batch, slots, 4) —
masked log-probabilities (impossible actions get ≈ −1e9, probability 0), ``logits`` (unmasked) and
``values`` (batch, slots). Both batch and slots (≤ 48) are dynamic. Row t depends on slots ≤ t, so a device
can run the model on the prefix l_0..l_t and sample the action at t from the last row.

The incremental model (``policy_step.onnx``, :func:`export_policy_step_onnx`) has the same inputs for the new
slots only, plus ``slot`` (int64 scalar: the index of the first new slot) and the per-layer key/value cache
buffers ``cache_key_i``, ``cache_value_i`` float32 (batch, heads, capacity, head_dim), whose rows < slot hold
the earlier slots (later rows are masked out). After ``log_probs``, ``logits`` and ``values`` it returns only
the new slots' keys and values, ``new_key_i``, ``new_value_i`` (batch, heads, slots, head_dim), which the
caller writes into the buffers in place (:class:`pategail.sdk.decoding.BufferedDecoder`): the cache is never
copied. Batch, slots and capacity are dynamic, so it also runs a whole prefix at once (slot 0).

:func:`export_policy_concat_step_onnx` writes the first incremental model (bundles of before this layout:
``past_key_i`` in, ``present_key_i`` = past + new out), which the SDK still runs; kept to test that.
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
from pategail.sdk.decoding import POLICY_INPUT_SLOT, cache_names, new_names, past_names, present_names
from pategail.server.policy import Policy, PolicyConcatStepInference, PolicyInference, PolicyStepInference

POLICY_FILE = "policy.onnx"
POLICY_STEP_FILE = "policy_step.onnx"


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
                model, example, buf, dynamo=False, opset_version=OPSET,  # type: ignore[arg-type]  # a file object
                input_names=[INPUT_CELLS, INPUT_FEATURES, INPUT_MASK],
                output_names=[OUTPUT_LOG_PROBS, OUTPUT_LOGITS, OUTPUT_VALUES],
                dynamic_axes={name: seq for name in (INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, OUTPUT_LOG_PROBS,
                                                      OUTPUT_LOGITS, OUTPUT_VALUES)},
            )
    finally:
        policy.train(was_training)
    return _loaded(buf, "policy model")


def export_policy_step_onnx(policy: Policy) -> onnx.ModelProto:
    """The incremental policy model over key/value cache buffers (opset :data:`OPSET`)."""
    c = policy.config
    B, S, T = 2, 4, 1
    buffers = tuple(torch.zeros(B, c.n_heads, S, c.d_model // c.n_heads) for _ in range(2 * c.n_layers))
    example = (torch.zeros(B, T, dtype=torch.int64), torch.zeros(B, T, N_STATE_FEATURES),
               torch.ones(B, T, N_ACTIONS, dtype=torch.bool), torch.tensor(2, dtype=torch.int64), *buffers)
    # one slot a call (the graph is traced for T = 1: its fast path); batch and capacity are dynamic
    dynamic = {name: {0: "batch"} for name in (INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, OUTPUT_LOG_PROBS,
                                               OUTPUT_LOGITS, OUTPUT_VALUES, *new_names(c.n_layers))}
    dynamic.update({name: {0: "batch", 2: "capacity"} for name in cache_names(c.n_layers)})
    model = _export_step(policy, PolicyStepInference, example,
                         [INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, POLICY_INPUT_SLOT, *cache_names(c.n_layers)],
                         [OUTPUT_LOG_PROBS, OUTPUT_LOGITS, OUTPUT_VALUES, *new_names(c.n_layers)], dynamic)
    for output in model.graph.output:          # the tracer names the one-slot axes; say they are 1
        for dim in output.type.tensor_type.shape.dim[1:]:
            if dim.dim_param:
                dim.dim_value = 1
    return model


def export_policy_concat_step_onnx(policy: Policy) -> onnx.ModelProto:
    """The first incremental model, whose cache grows by concatenation (``past_*`` in, ``present_*`` out)."""
    c = policy.config
    B, P, T = 2, 3, 1
    past = tuple(torch.zeros(B, c.n_heads, P, c.d_model // c.n_heads) for _ in range(2 * c.n_layers))
    example = (torch.zeros(B, T, dtype=torch.int64), torch.zeros(B, T, N_STATE_FEATURES),
               torch.ones(B, T, N_ACTIONS, dtype=torch.bool), *past)
    seq = {0: "batch", 1: "slots"}
    dynamic = {name: seq for name in (INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, OUTPUT_LOG_PROBS, OUTPUT_LOGITS,
                                      OUTPUT_VALUES)}
    dynamic.update({name: {0: "batch", 2: "past"} for name in past_names(c.n_layers)})
    dynamic.update({name: {0: "batch", 2: "total"} for name in present_names(c.n_layers)})
    return _export_step(policy, PolicyConcatStepInference, example,
                        [INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, *past_names(c.n_layers)],
                        [OUTPUT_LOG_PROBS, OUTPUT_LOGITS, OUTPUT_VALUES, *present_names(c.n_layers)], dynamic)


def _export_step(policy: Policy, wrapper, example, input_names, output_names, dynamic) -> onnx.ModelProto:
    """Trace ``wrapper(policy)`` in eval mode with the legacy exporter (the policy's mode restored)."""
    was_training = policy.training
    model = wrapper(policy).eval()
    buf = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            # the slices of the causal mask and slot table at a dynamic offset trace as shape arithmetic
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            torch.onnx.export(model, example, buf, dynamo=False, opset_version=OPSET,  # type: ignore[arg-type]
                              input_names=input_names, output_names=output_names, dynamic_axes=dynamic)
    finally:
        policy.train(was_training)
    return _loaded(buf, "policy step model")


def save_policy_step_onnx(policy: Policy, path: str | os.PathLike) -> Path:
    """Export and write the incremental policy model to ``path``; return the path."""
    path = Path(path)
    onnx.save(export_policy_step_onnx(policy), path)
    return path


def save_policy_onnx(policy: Policy, path: str | os.PathLike) -> Path:
    """Export and write the policy inference model to ``path``; return the path."""
    path = Path(path)
    onnx.save(export_policy_onnx(policy), path)
    return path


def _loaded(buf: io.BytesIO, what: str) -> onnx.ModelProto:
    """The exported bytes as a model, refused if ORT 1.19 could not load its IR version."""
    proto = onnx.load_from_string(buf.getvalue())
    if proto.ir_version > MAX_IR_VERSION:
        raise RuntimeError(f"{what} has IR version {proto.ir_version} > {MAX_IR_VERSION}")
    return proto
