"""Write a model bundle: the policy inference model, the discriminator's training artifacts and inference
model, and ``manifest.json`` — the contract between the exporter and the devices (read by
:func:`pategail.sdk.bundle.load_bundle`).

Manifest, format version 1 (every file name is relative to the bundle directory)::

    format: "pategail-model-bundle"    format_version: 1     created_utc: ISO 8601
    producer: {pategail, python, torch, onnx, onnxruntime}   the versions that made the bundle
    requires: {onnxruntime_min, onnxruntime_below, max_ir_version, max_opset}
    files: {name: {sha256, bytes}}                           every file of the bundle
    features: {state: [11 names], actions: [4 names], n_pair_features: 15, slots: 48}
    policy: {model: MODEL, step_model?: MODEL, config: PolicyConfig fields, n_parameters, masked_logit}
            step_model: the incremental model (key/value cache inputs/outputs, see export/onnx_policy.py);
            optional, so bundles written before it still load (their days come from the full prefix)
    discriminator: {models: {training, eval, optimizer, inference: MODEL}, checkpoint: name,
                    parameters: [{name, shape}] in flat-vector order, n_parameters, config,
                    labels: {expert: 1.0, generated: 0.0}, loss: formula, reward_output: "prob",
                    optimizer: {type, learning_rate, weight_decay, max_grad_norm, betas, eps, torch_equivalent}}
    environment: {cells: "cells.csv", n_cells, alpha, candidates, explore_factors?: [B floats],
                  initial_states?: "initial_states.csv", relevance?: "relevance.csv", return_last?,
                  action_rates?: true, max_day_cells?: int, initial_states_days_cap?: int,
                  universe?: "universe.csv", n_universe?}
                 (absent in a models-only bundle; devices need it to featurise and generate days;
                 max_day_cells: a generated day holding that many distinct cells adds no more (no explore, no
                 first move home), no limit when absent;
                 initial_states_days_cap: days at which a device's home and first-cell contribution reaches
                 full weight, 100 when absent; universe: a cell table privately released from a public map —
                 every square of the map (square,lat,lon,cell) and the cell its days move to)
    MODEL = {file, ir_version, opset, inputs: [TENSOR], outputs: [TENSOR]}
    TENSOR = {name, dtype, shape}   shape: ints and axis names ("batch", "slots"); null for sequences

Training and eval models list their user inputs and outputs only (parameters, gradient buffers and
``lazy_reset_grad`` are managed by ONNX Runtime's training API).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import os
import platform
from pathlib import Path
from typing import Any

import onnx

from pategail.export.artifacts import (INPUT_LABELS, INPUT_PAIRS, MAX_IR_VERSION, OUTPUT_LOGIT, OUTPUT_LOSS,
                                       OUTPUT_PROB, TrainingConfig, build_discriminator_artifacts)
from pategail.export.discriminator import LABEL_GENERATED, Discriminator
from pategail.export.onnx_policy import POLICY_FILE, POLICY_STEP_FILE, save_policy_onnx, save_policy_step_onnx
from pategail.sdk.bundle import (FORMAT, FORMAT_VERSION, MANIFEST, Environment, load_bundle, parse_version,
                                 sha256_file)
from pategail.sdk.errors import BundleError
from pategail.sdk.files import replacing_directory
from pategail.sdk.features import ACTIONS, N_PAIR_FEATURES, STATE_FEATURES
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.policy import MASKED_LOGIT, Policy

log = logging.getLogger(__name__)

MAX_OPSET = 21
"""Highest default-domain opset ONNX Runtime 1.19 runs."""
LOSS_FORMULA = "mean(relu(logit) - logit * labels + log(1 + exp(-abs(logit))))"

_DTYPES: dict[int, str] = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT64: "int64",
                           onnx.TensorProto.BOOL: "bool", onnx.TensorProto.INT32: "int32",
                           onnx.TensorProto.DOUBLE: "float64"}


def _tensor_spec(vi: onnx.ValueInfoProto) -> dict:
    t = vi.type
    if t.HasField("sequence_type"):
        elem = t.sequence_type.elem_type.tensor_type.elem_type
        return {"name": vi.name, "dtype": f"seq({_DTYPES.get(elem, str(elem))})", "shape": None}
    tt = t.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
    return {"name": vi.name, "dtype": _DTYPES.get(tt.elem_type, str(tt.elem_type)), "shape": shape}


def default_opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def model_entry(path: Path, inputs: list[str] | None = None, outputs: list[str] | None = None) -> dict:
    """The manifest's MODEL record of one ONNX file; ``inputs``/``outputs`` pick the user-facing names."""
    model = onnx.load(path, load_external_data=False)
    ins = {vi.name: vi for vi in model.graph.input}
    outs = {vi.name: vi for vi in model.graph.output}
    inputs = list(ins) if inputs is None else inputs
    outputs = list(outs) if outputs is None else outputs
    return {"file": path.name, "ir_version": int(model.ir_version), "opset": default_opset(model),
            "inputs": [_tensor_spec(ins[n]) for n in inputs], "outputs": [_tensor_spec(outs[n]) for n in outputs]}


def _versions() -> dict:
    import onnxruntime
    import torch

    from importlib.metadata import version
    return {"pategail": version("pategail"), "python": platform.python_version(), "torch": torch.__version__,
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def build_manifest(root: Path, policy: Policy, discriminator: Discriminator, paths: dict[str, Path],
                   training_config: TrainingConfig, environment: dict | None = None) -> dict:
    """The manifest of the files already written under ``root`` (see the module docstring)."""
    versions = _versions()
    ort_version = parse_version(versions["onnxruntime"])
    training = onnx.load(paths["training"], load_external_data=False)
    param_names = {n for n, _ in discriminator.named_parameters()}
    shapes = {n: list(p.shape) for n, p in discriminator.named_parameters()}
    # flat-vector order = order of the parameters among the training model's inputs
    order = [vi.name for vi in training.graph.input if vi.name in param_names]
    user = [INPUT_PAIRS, INPUT_LABELS]
    user_out = [OUTPUT_LOSS, OUTPUT_LOGIT, OUTPUT_PROB]
    cfg = training_config
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "producer": versions,
        # Training artifacts use ONNX Runtime contrib ops (AdamWOptimizer, the gradient builder's ops) that
        # carry no compatibility promise across releases: accept the producer's major.minor only.
        "requires": {"onnxruntime_min": f"{ort_version[0]}.{ort_version[1]}.0",
                     "onnxruntime_below": f"{ort_version[0]}.{ort_version[1] + 1}.0",
                     "max_ir_version": MAX_IR_VERSION, "max_opset": MAX_OPSET},
        "files": {},
        "features": {"state": list(STATE_FEATURES), "actions": list(ACTIONS), "n_pair_features": N_PAIR_FEATURES,
                     "slots": policy.config.max_slots},
        "policy": {
            "model": model_entry(root / POLICY_FILE),
            "step_model": model_entry(root / POLICY_STEP_FILE),
            "config": dataclasses.asdict(policy.config),
            "n_parameters": policy.n_parameters,
            "masked_logit": MASKED_LOGIT,
        },
        "discriminator": {
            "models": {
                "training": model_entry(paths["training"], user, user_out),
                "eval": model_entry(paths["eval"], user, user_out),
                "optimizer": model_entry(paths["optimizer"]),
                "inference": model_entry(paths["inference"]),
            },
            "checkpoint": paths["checkpoint"].name,
            "parameters": [{"name": n, "shape": shapes[n]} for n in order],
            "n_parameters": sum(p.numel() for p in discriminator.parameters()),
            "config": dataclasses.asdict(discriminator.config),
            "labels": {"expert": cfg.expert_label, "generated": LABEL_GENERATED},
            "loss": LOSS_FORMULA,
            "reward_output": OUTPUT_PROB,
            "optimizer": {"type": "AdamW", "learning_rate": cfg.learning_rate, "weight_decay": cfg.weight_decay,
                          "max_grad_norm": cfg.max_grad_norm, "betas": [cfg.beta1, cfg.beta2], "eps": cfg.eps,
                          "torch_equivalent": "clip_grad_norm_(max_grad_norm) then torch.optim.AdamW"},
        },
    }
    if environment is not None:
        manifest["environment"] = environment
    if sorted(order) != sorted(param_names):
        raise RuntimeError(f"training model parameters {order} differ from the state_dict {sorted(param_names)}")
    for p in sorted(root.iterdir()):
        if p.name != MANIFEST:
            manifest["files"][p.name] = {"sha256": sha256_file(p), "bytes": p.stat().st_size}
    return manifest


def export_bundle(policy: Policy, discriminator: Discriminator, out_dir: str | os.PathLike, *,
                  training_config: TrainingConfig = TrainingConfig(), environment: Environment | None = None,
                  privacy: DeclaredPlan | None = None, policy_training: bool = False) -> Path:
    """Write the bundle of ``policy`` and ``discriminator`` to ``out_dir`` and return its path.

    A bundle already there is replaced; any other non-empty directory is refused (BundleError). The files are
    written to a sibling directory first and swapped in, so a reader never sees half a bundle. The training
    loop calls this every round. ``environment`` (the cell table, EPR parameters, initial states) is what
    devices need to run the models; without it the bundle holds the models only. ``privacy`` is the run's
    declared privacy plan: devices refuse rounds below it and keep their own budget by it. ``policy_training``
    adds the policy's maximum-likelihood training artifacts (manifest "policy_training", DP-FedAvg runs;
    :mod:`pategail.export.policy_training`).
    """
    if environment is not None and len(environment.cells) != policy.config.n_cells:
        raise BundleError(f"the cell table has {len(environment.cells)} cells, the policy {policy.config.n_cells}")
    out_dir = Path(out_dir)
    replaceable = out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / MANIFEST).is_file())
    if out_dir.exists() and not replaceable:
        raise BundleError(f"{out_dir} exists and is not a model bundle; refusing to replace it")
    with replacing_directory(out_dir) as tmp:
        save_policy_onnx(policy, tmp / POLICY_FILE)
        save_policy_step_onnx(policy, tmp / POLICY_STEP_FILE)
        paths = build_discriminator_artifacts(discriminator, tmp, training_config)
        section = environment.write(tmp) if environment is not None else None
        mle = None
        if policy_training:
            from pategail.export import policy_training as mle_export
            mle = mle_export.build_policy_training_artifacts(policy, tmp)
        manifest = build_manifest(tmp, policy, discriminator, paths, training_config, section)
        if mle is not None:
            manifest["policy_training"] = mle_export.manifest_section(policy, mle, model_entry)
        if privacy is not None:
            manifest["privacy"] = privacy.to_manifest()
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        load_bundle(tmp)              # the device-side checks (hashes, IR <= 10, opset <= 21) before publishing
    log.info("bundle written to %s (%d files, %.1f KB)", out_dir, len(manifest["files"]),
             sum(f["bytes"] for f in manifest["files"].values()) / 1024)
    return out_dir
