"""The Java core's JUnit 5 suite (android-demo/core/src/test), run against the committed vectors; and the
check that those vectors are what the Python SDK produces now."""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from pategail.jvm_device import JARS, JUNIT

from .conftest import JAVA, ROOT, VECTORS


def test_junit_suite_passes_on_the_python_vectors(java_classes):
    cp = ":".join([str(java_classes), *(str(j) for j in JARS.values())])
    done = subprocess.run([*JAVA, f"-Dpategail.vectors={VECTORS}", "-jar", str(JUNIT), "-cp", cp,
                           "--scan-classpath", str(java_classes), "--disable-banner", "--disable-ansi-colors",
                           "--details=tree", "--fail-if-no-tests"],
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    counts = {k: int(v) for v, k in re.findall(r"\[\s+(\d+) tests (successful|failed|found)\s+\]", out)}
    assert done.returncode == 0 and counts.get("failed") == 0, out[-6000:]
    assert counts["successful"] >= 70, out[-3000:]      # every test class was found and ran


def _close(a, b, path="") -> list[str]:
    """Differences between two JSON values: floats within 1e-6, relative above 1 (ONNX Runtime's float32
    kernels may differ in the last bits from one CPU to another; masked log-probabilities are near -1e9),
    everything else exact."""
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
        return [] if ok else [f"{path}: {a!r} != {b!r}"]
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in _close(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _close(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_vectors_are_current(tmp_path):
    """generate.py, run now on the committed bundle, writes what is committed (else: run it and commit)."""
    from tests.forked import Child

    err = tmp_path / "stderr.txt"
    generate = Child([VECTORS / "generate.py", "--out", tmp_path], ROOT, tmp_path / "stdout.txt", err)
    try:
        assert generate.wait(300) == 0, err.read_text()[-3000:]
    finally:
        generate.kill_group()
    for name in ("crypto.json", "messages.json", "features.json", "device.json", "training.json", "policy.json",
                 "net.json", "gaussian.json", "pld.json", "cells.json"):
        fresh = json.loads((tmp_path / name).read_text())
        committed = json.loads((VECTORS / name).read_text())
        diffs = _close(fresh, committed, name)
        assert not diffs, (f"{name} is stale ({len(diffs)} differences, first: {diffs[:3]}); run "
                           "`.venv/bin/python android-demo/vectors/generate.py` and commit")


def test_generator_refuses_a_missing_bundle(tmp_path, monkeypatch):
    """Without a bundle the generator says so in one line and exits 2 (it does not export one silently)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("android_vectors_generate", VECTORS / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    monkeypatch.setattr(gen, "HERE", tmp_path)
    assert gen.main(["--out", str(tmp_path / "out")]) == 2


pytestmark = pytest.mark.skipif(not (ROOT / "android-demo").is_dir(), reason="no android-demo/")
