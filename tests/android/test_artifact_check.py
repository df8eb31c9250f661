"""The bundle's training artifacts in ONNX Runtime's own training core: ``node --test`` in
android-demo/artifact-check (onnxruntime-web 1.19.2, pinned by its package-lock.json) against the Python
SDK's losses and scores (android-demo/vectors/training.json), and a DP-FedAvg bundle's policy training model on a
checkpoint the Java core wrote (vectors written here, at test time). Skips in one line without node or the
installed package (``npm ci --ignore-scripts`` there; .ci/run does it)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from .conftest import DEMO

CHECK = DEMO / "artifact-check"


def _node_test(*args: str, env: dict[str, str] | None = None) -> str:
    """``node --test ARGS`` in the artifact check (skipped without node or the package): its output, after it
    passed."""
    if shutil.which("node") is None:
        pytest.skip("artifact check skipped: no node on PATH (apt-get install nodejs npm)")
    if not (CHECK / "node_modules" / "onnxruntime-web" / "dist" / "ort.training.wasm.min.js").is_file():
        pytest.skip(f"artifact check skipped: run `npm ci --ignore-scripts` in {CHECK}")
    try:
        # getContiguousParameters is never called (it crashes and hangs onnxruntime-web 1.19.2), but a hang
        # in a WebAssembly runtime must not hang the suite
        done = subprocess.run(["node", "--test", *args], cwd=CHECK, capture_output=True, text=True, timeout=240,
                              env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        pytest.fail("node --test did not finish in 240 s")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    return out


def test_artifacts_train_in_onnxruntime_web_as_in_python():
    out = _node_test()
    passed = re.search(r"^# pass (\d+)", out, re.M)
    assert passed and int(passed.group(1)) >= 3, out[-3000:]


def test_policy_training_model_runs_in_onnxruntime_web_on_a_checkpoint_java_wrote(java_classpath, tmp_path_factory,
                                                                                  dataset, tmp_path):
    """A phone's DP-FedAvg round opens ONNX Runtime's training core on a checkpoint the Java core wrote (the Java
    training API cannot set parameters): that checkpoint loads in the C++ core's checkpoint reader with the policy's
    training, eval and optimizer models, which give the Python SDK's losses at its parameters on the owner's
    minibatches, and the optimizer steps run."""
    from pategail.sdk.bundle import load_bundle
    from pategail.sdk.fedavg_round import PolicyTrainer, labelled_days

    from .test_java_fedavg import _initial_bundle, _probe

    root = _initial_bundle(tmp_path_factory, dataset)
    bundle = load_bundle(root)
    spec = bundle.policy_training
    theta = (np.random.default_rng(11).normal(size=spec.n_parameters) * 0.05).astype("<f4")
    done = _probe(java_classpath, "checkpoint-write", str(root), str(tmp_path / "theta.ckpt"),
                  stdin=theta.tobytes().hex())
    assert done.returncode == 0, done.stderr
    trainer = PolicyTrainer(bundle)                  # the reference: θ set in the Python SDK's own session
    trainer.set_parameters(theta)
    days = dataset.user_days(int(dataset.users[1]))
    data = labelled_days(days, int(days[0, 0]), bundle.environment.cells)
    batches, losses = [], []
    for rows in (np.arange(0, 8), np.arange(8, 13)):
        cells, features, mask, targets = data.take(rows)
        losses.append(trainer.loss((cells, features, mask, targets)))
        batches.append({"cells": cells.ravel().tolist(), "features": features.ravel().tolist(),
                        "mask": mask.astype(int).ravel().tolist(), "targets": targets.ravel().tolist()})
    for role in ("training", "eval", "optimizer"):
        shutil.copy(spec.models[role].path, tmp_path / spec.models[role].path.name)
    (tmp_path / "policy.json").write_text(json.dumps({
        "checkpoint": "theta.ckpt", "training": spec.models["training"].path.name,
        "eval": spec.models["eval"].path.name, "optimizer": spec.models["optimizer"].path.name, "batches": batches,
        "losses": losses}))
    out = _node_test("policy.test.js", env={"POLICY_VECTORS": str(tmp_path)})
    assert re.search(r"^# pass 1$", out, re.M), out[-3000:]
