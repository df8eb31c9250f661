"""The SDK as its own distribution: `pip install ./sdk` into a fresh virtual environment, offline from the
wheels `make setup` downloaded, gives a working device and `pategail generate` — with torch absent."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

_DEVICE_ROUND = textwrap.dedent("""
    import importlib.util, json, sys
    from pathlib import Path
    import numpy as np
    assert importlib.util.find_spec("torch") is None, "torch is installed"
    from pategail.sdk.device import Device
    from pategail.sdk.messages import InitialStatesRequest, from_bytes
    work = Path(sys.argv[1])
    device = Device(work / "device", 7, rng=np.random.default_rng(5))
    device.install_bundle(work / "bundle")
    device.add_days(np.load(work / "days.npy"))
    ack = from_bytes(device.handle((work / "request.bin").read_bytes()))
    np.save(work / "pending.npy", device.pending)
    init = from_bytes(device.handle(InitialStatesRequest(2).to_bytes()))
    import pategail
    print(json.dumps({"ack": [type(ack).__name__, ack.n], "init": init.n, "namespace": list(pategail.__path__),
                      "modules": sorted(m.split(".")[0] for m in sys.modules if m.split(".")[0] in
                                        ("torch", "dp_accounting", "matplotlib", "tqdm"))}))
""")


WHEELS = ROOT / ".venv" / "sdk-wheels"
"""The SDK's dependencies as wheels, downloaded by `make setup` (pip download ./sdk): the install below is
offline (--no-index) from this folder alone."""


@pytest.mark.slow
def test_the_sdk_installs_alone_and_runs_a_device_round_without_torch(bundle_dir, dataset, round_request,
                                                                       make_device, tmp_path):
    assert any(WHEELS.glob("onnxruntime_training*.whl")), f"{WHEELS}: no SDK wheels; run `make setup`"
    venv = tmp_path / "venv"
    # without its own pip (ensurepip takes seconds): this checkout's pip installs into it (--python)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    # a copy of sdk/: the build writes its egg-info next to the sources, and the checkout stays clean
    shutil.copytree(ROOT / "sdk", tmp_path / "sdk", ignore=shutil.ignore_patterns("*.egg-info", "build"))
    # --no-compile: byte-compiling every installed module took two thirds of the install; the device round
    # below compiles the few it imports
    proc = subprocess.run([*pip, "install", "--quiet", "--no-compile", "--no-index", "--find-links",
                           str(WHEELS), str(tmp_path / "sdk")], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    installed = subprocess.run([*pip, "list", "--format", "json"], capture_output=True,
                               text=True, env=env, check=True).stdout
    names = {p["name"].lower() for p in json.loads(installed)}
    assert "pategail-sdk" in names and "torch" not in names and "pategail" not in names

    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(bundle_dir, work / "bundle")
    np.save(work / "days.npy", dataset.user_days(dataset.users[4]))
    (work / "request.bin").write_bytes(round_request.to_bytes())
    proc = subprocess.run([str(python), "-c", _DEVICE_ROUND, str(work)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ack"] == ["Ack", round_request.n_queries] and out["modules"] == []
    assert out["init"] == 2 * dataset.n_cells + 2 + 2 * 11 + (dataset.n_cells + 3)     # + the place contribution
    assert all(str(venv) in p for p in out["namespace"])                 # the installed SDK, not this checkout
    # the installed SDK computes exactly what this checkout's device does
    twin = make_device(4, device_id=7, seed=5)
    twin.handle(round_request.to_bytes())
    np.testing.assert_array_equal(twin.pending, np.load(work / "pending.npy"))

    # `pategail generate` from the SDK's own console script; a user mistake is one line and exit 2
    script = venv / "bin" / "pategail"
    proc = subprocess.run([str(script), "-q", "generate", "--bundle", str(work / "bundle"), "--days", "3",
                           "--out", str(work / "syn.csv"), "--seed", "1"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len((work / "syn.csv").read_text().splitlines()) == 1 + 3 * 48
    proc = subprocess.run([str(script), "generate", "--bundle", str(work / "nope"), "--days", "3", "--out",
                           str(work / "x.csv")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and proc.stderr.startswith("pategail: error:") and proc.stderr.count("\n") == 1
