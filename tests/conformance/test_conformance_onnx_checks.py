"""Every exported model passes onnx's full checker and shape inference, stays within IR <= 10 / opset <= 21,
is a single file, and is described truthfully by the manifest."""
from __future__ import annotations

import onnx
import pytest

from pategail.export.onnx_policy import POLICY_FILE, POLICY_STEP_FILE

MODEL_FILES = [POLICY_FILE, POLICY_STEP_FILE, "discriminator_training_model.onnx", "discriminator_eval_model.onnx",
               "discriminator_optimizer_model.onnx", "discriminator_inference.onnx"]


def _manifest_models(bundle):
    entries = {bundle.manifest["policy"][k]["file"]: bundle.manifest["policy"][k] for k in ("model", "step_model")}
    for m in bundle.manifest["discriminator"]["models"].values():
        entries[m["file"]] = m
    return entries


def test_bundle_holds_exactly_the_expected_files(bundle_dir, bundle):
    names = sorted(p.name for p in bundle_dir.iterdir())
    assert names == sorted(MODEL_FILES + ["discriminator_checkpoint", "manifest.json"])
    assert sorted(bundle.manifest["files"]) == sorted(n for n in names if n != "manifest.json")
    assert sorted(_manifest_models(bundle)) == sorted(MODEL_FILES)


@pytest.mark.parametrize("name", MODEL_FILES)
def test_full_check_and_shape_inference(bundle_dir, name):
    path = bundle_dir / name
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(path)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)


@pytest.mark.parametrize("name", MODEL_FILES)
def test_ir_opset_and_single_file(bundle_dir, bundle, name):
    model = onnx.load(bundle_dir / name, load_external_data=False)
    assert model.ir_version <= 10
    default = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    assert default and max(default) <= 21
    for init in model.graph.initializer:
        assert init.data_location != onnx.TensorProto.EXTERNAL, f"{name}: {init.name} stored outside the file"
    entry = _manifest_models(bundle)[name]
    assert entry["ir_version"] == model.ir_version and entry["opset"] == max(default)


def test_manifest_names_and_shapes_match_the_graphs(bundle_dir, bundle):
    for name, entry in _manifest_models(bundle).items():
        model = onnx.load(bundle_dir / name, load_external_data=False)
        graph_in = {vi.name for vi in model.graph.input}
        graph_out = {vi.name for vi in model.graph.output}
        assert {t["name"] for t in entry["inputs"]} <= graph_in
        assert {t["name"] for t in entry["outputs"]} <= graph_out
    policy = bundle.policy
    assert policy.input_names == ("cells", "features", "mask")
    assert policy.output_names == ("log_probs", "logits", "values")
    assert [t.shape for t in policy.inputs] == [("batch", "slots"), ("batch", "slots", 11), ("batch", "slots", 4)]
    step = bundle.policy_step
    layers = bundle.manifest["policy"]["config"]["n_layers"]
    cache = [f"cache_{k}_{i}" for i in range(layers) for k in ("key", "value")]
    assert step.input_names == ("cells", "features", "mask", "slot", *cache)
    assert step.output_names == ("log_probs", "logits", "values", *[n.replace("cache", "new") for n in cache])
    assert [t.shape for t in step.inputs][:4] == [("batch", 1), ("batch", 1, 11), ("batch", 1, 4), ()]
    assert [t.shape for t in step.inputs][4] == ("batch", 4, "capacity", 16)
    assert [t.shape for t in step.outputs][3] == ("batch", 4, 1, 16)
    d = bundle.discriminator
    assert d["training"].input_names == ("pairs", "labels") and d["eval"].input_names == ("pairs", "labels")
    assert d["training"].output_names == ("loss", "logit", "prob")
    assert d["inference"].input_names == ("pairs",) and d["inference"].output_names == ("logit", "prob")
    assert d["inference"].inputs[0].shape == ("batch", 15)


def test_manifest_records_producer_versions_and_parameters(bundle, torch_models):
    import onnxruntime
    import torch

    m = bundle.manifest
    assert m["format_version"] == 1
    assert m["producer"]["torch"] == torch.__version__ and m["producer"]["onnx"] == onnx.__version__
    assert m["producer"]["onnxruntime"] == onnxruntime.__version__
    policy, discriminator = torch_models
    assert m["policy"]["n_parameters"] == policy.n_parameters
    assert [(p["name"], tuple(p["shape"])) for p in m["discriminator"]["parameters"]] == \
        [(n, tuple(p.shape)) for n, p in discriminator.named_parameters()]
    assert bundle.n_parameters == m["discriminator"]["n_parameters"] == 15 * 64 + 64 + 64 * 64 + 64 + 64 + 1
    assert m["discriminator"]["labels"] == {"expert": 1.0, "generated": 0.0}


def test_training_graph_avoids_ops_without_gradients(bundle_dir):
    model = onnx.load(bundle_dir / "discriminator_training_model.onnx")
    ops = {n.op_type for n in model.graph.node}
    assert not ops & {"Softplus", "CastLike", "Atan", "ReduceMin", "Resize"}
