"""Acceptance: a bundle can be trained and scored by plain onnxruntime.training code that knows nothing of
the project except manifest.json — file names, input/output names and shapes, labels, learning rate.

Nothing below imports pategail: this is what a third-party device integration would write.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import onnxruntime as ort
from onnxruntime.training import api

DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def _options():
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return so


def _random_input(spec, batch, rng, high=None):
    shape = [batch if isinstance(d, str) and d == "batch" else (5 if isinstance(d, str) else d)
             for d in spec["shape"]]
    dtype = DTYPES[spec["dtype"]]
    if dtype is np.bool_:
        return np.ones(shape, dtype=bool)
    if dtype is np.int64:
        return rng.integers(0, high, shape).astype(np.int64)
    return rng.normal(size=shape).astype(np.float32)


def test_train_and_score_from_the_manifest_alone(bundle_dir, tmp_path):
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        assert hashlib.sha256((bundle_dir / name).read_bytes()).hexdigest() == entry["sha256"]
    version = tuple(int(v) for v in ort.__version__.split("+")[0].split(".")[:3])
    low, high = (tuple(int(v) for v in manifest["requires"][k].split(".")) for k in
                 ("onnxruntime_min", "onnxruntime_below"))
    assert low <= version < high

    disc = manifest["discriminator"]
    train_spec, eval_spec = disc["models"]["training"], disc["models"]["eval"]
    pairs_spec, labels_spec = train_spec["inputs"]
    width = pairs_spec["shape"][1]
    expert, generated = disc["labels"]["expert"], disc["labels"]["generated"]

    state = api.CheckpointState.load_checkpoint(str(bundle_dir / disc["checkpoint"]))
    module = api.Module(str(bundle_dir / train_spec["file"]), state, str(bundle_dir / eval_spec["file"]),
                        session_options=_options())
    optimizer = api.Optimizer(str(bundle_dir / disc["models"]["optimizer"]["file"]), module)
    optimizer.set_learning_rate(disc["optimizer"]["learning_rate"])
    assert module.input_names() == [t["name"] for t in train_spec["inputs"]]
    assert module.output_names() == [t["name"] for t in train_spec["outputs"]]
    assert module.get_parameters_size() == disc["n_parameters"]

    # separable toy task: "expert" pairs have a positive first feature
    rng = np.random.default_rng(0)

    def batch(n):
        x = rng.normal(size=(n, width)).astype(np.float32)
        y = np.where(x[:, 0] > 0, expert, generated).astype(np.float32)
        return x, y

    losses = []
    module.train()
    for _ in range(300):
        x, y = batch(64)
        losses.append(float(module(x, y)[0]))
        optimizer.step()
        module.lazy_reset_grad()
    assert np.isfinite(losses).all() and np.mean(losses[-20:]) < 0.5 * losses[0]

    # score 1: the eval model (labels only feed the loss)
    x, y = batch(1000)
    module.eval()
    outputs = dict(zip(module.output_names(), module(x, y)))
    reward = outputs[disc["reward_output"]]
    assert ((reward > 0.5) == (y == expert)).mean() > 0.9

    # score 2: an inference model of the trained parameters, with the manifest's inference outputs
    inference = disc["models"]["inference"]
    path = tmp_path / "trained_inference.onnx"
    module.export_model_for_inferencing(str(path), [t["name"] for t in inference["outputs"]])
    session = ort.InferenceSession(str(path), _options(), providers=["CPUExecutionProvider"])
    scored = dict(zip([o.name for o in session.get_outputs()],
                      session.run(None, {inference["inputs"][0]["name"]: x})))
    np.testing.assert_allclose(scored[disc["reward_output"]], reward, atol=1e-6)

    # federated exchange: the flat vector has the manifest's length and round-trips
    flat = module.get_contiguous_parameters(trainable_only=True)
    sizes = [int(np.prod(p["shape"])) for p in disc["parameters"]]
    assert flat.numpy().shape == (sum(sizes),)


def test_run_the_policy_from_the_manifest_alone(bundle_dir):
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    spec = manifest["policy"]["model"]
    session = ort.InferenceSession(str(bundle_dir / spec["file"]), _options(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {t["name"]: _random_input(t, 3, rng, high=manifest["policy"]["config"]["n_cells"])
             for t in spec["inputs"]}
    outputs = dict(zip([t["name"] for t in spec["outputs"]], session.run(None, feeds)))
    probs = np.exp(outputs["log_probs"])
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    assert outputs["values"].shape == (3, 5)
