"""The bundle's training artifacts in ONNX Runtime's own training core: ``node --test`` in
android-demo/artifact-check (onnxruntime-web 1.19.2, pinned by its package-lock.json) against the Python
SDK's losses and scores (android-demo/vectors/training.json). Skips in one line without node or the
installed package (``npm ci --ignore-scripts`` there; .ci/run does it)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .conftest import DEMO

CHECK = DEMO / "artifact-check"


def test_artifacts_train_in_onnxruntime_web_as_in_python():
    if shutil.which("node") is None:
        pytest.skip("artifact check skipped: no node on PATH (apt-get install nodejs npm)")
    if not (CHECK / "node_modules" / "onnxruntime-web" / "dist" / "ort.training.wasm.min.js").is_file():
        pytest.skip(f"artifact check skipped: run `npm ci --ignore-scripts` in {CHECK}")
    try:
        # getContiguousParameters is never called (it crashes and hangs onnxruntime-web 1.19.2), but a hang
        # in a WebAssembly runtime must not hang the suite
        done = subprocess.run(["node", "--test"], cwd=CHECK, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("node --test did not finish in 240 s")
    out = done.stdout + done.stderr
    passed = re.search(r"^# pass (\d+)", out, re.M)
    assert done.returncode == 0, out[-6000:]
    assert passed and int(passed.group(1)) >= 3, out[-3000:]
