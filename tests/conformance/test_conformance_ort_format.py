"""The inference models convert to the ORT format that mobile builds load, with the converter devices' build
pipelines use (`python -m onnxruntime.tools.convert_onnx_models_to_ort`), and give the same outputs."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from pategail.sdk.bundle import open_policy_session, open_scoring_session, session_options


@pytest.fixture(scope="module")
def ort_models(bundle, tmp_path_factory):
    src = tmp_path_factory.mktemp("ort_src")
    out = tmp_path_factory.mktemp("ort_out")
    for spec in (bundle.policy, bundle.discriminator["inference"]):
        shutil.copy(spec.path, src / spec.path.name)
    proc = subprocess.run([sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(src),
                           "--output_dir", str(out), "--optimization_style", "Fixed"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {p.stem: p for p in out.glob("*.ort")}


def _session(path):
    return ort.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])


def test_both_inference_models_convert(ort_models):
    assert sorted(ort_models) == ["discriminator_inference", "policy"]
    for path in ort_models.values():
        assert path.read_bytes()[4:8] == b"ORTM"                    # flatbuffer file identifier


def test_ort_format_policy_gives_the_same_outputs(bundle, ort_models, random_policy_inputs):
    cells, features, mask = random_policy_inputs
    feeds = {"cells": cells, "features": features, "mask": mask}
    for got, want in zip(_session(ort_models["policy"]).run(None, feeds), open_policy_session(bundle).run(None, feeds)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_ort_format_discriminator_gives_the_same_outputs(bundle, ort_models):
    pairs = np.random.default_rng(0).normal(size=(4096, 15)).astype(np.float32)
    got = _session(ort_models["discriminator_inference"]).run(None, {"pairs": pairs})
    want = open_scoring_session(bundle).run(None, {"pairs": pairs})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)
