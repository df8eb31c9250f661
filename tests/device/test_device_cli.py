"""`pategail generate` end to end, and the SDK running with torch made unimportable."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pategail.cli import main
from pategail.sdk.synthetic import read_synthetic_csv


def test_generate_writes_seeded_synthetic_days(bundle_dir, bundle, tmp_path):
    out = tmp_path / "syn.csv"
    assert main(["-q", "generate", "--bundle", str(bundle_dir), "--days", "7", "--out", str(out), "--seed", "3"]) == 0
    days = read_synthetic_csv(out, n_cells=len(bundle.environment.cells))
    assert days.shape == (7, 48)
    firsts = set(bundle.environment.initial_states[:, 1].tolist())
    assert set(days[:, 0].tolist()) <= firsts                          # seeded from the released states
    again = tmp_path / "again.csv"
    assert main(["-q", "generate", "--bundle", str(bundle_dir), "--days", "7", "--out", str(again), "--seed", "3"]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_generate_uses_the_same_code_as_a_device(bundle_dir, bundle, tmp_path):
    """The CLI is generate_days on the bundle's policy: replaying its draws gives the same days."""
    from pategail.sdk.bundle import open_policy_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days

    out = tmp_path / "syn.csv"
    assert main(["-q", "generate", "--bundle", str(bundle_dir), "--days", "4", "--out", str(out), "--seed", "9"]) == 0
    env = bundle.environment
    rng = np.random.default_rng(9)
    w = env.initial_weights / env.initial_weights.sum()
    rows = env.initial_states[rng.choice(len(w), size=4, p=w)]
    g = generate_days(open_policy_session(bundle), CellGeometry.build(env.cells, env.candidates), rows[:, 0],
                      rows[:, 1], rng, alpha=env.alpha)
    np.testing.assert_array_equal(read_synthetic_csv(out), g.days)


def test_generate_streams_in_batches(bundle_dir, bundle, tmp_path, capsys):
    """--batch 3 makes 7 days in three batches with the incremental model, written as they come: agents
    numbered on across batches, and the first batch equal to a one-batch run's first three days when the
    random draws line up (the initial states are drawn for all days first)."""
    from pategail.sdk.bundle import open_generation_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days

    out = tmp_path / "syn.csv"
    assert main(["-q", "generate", "--bundle", str(bundle_dir), "--days", "7", "--batch", "3", "--out", str(out),
                 "--seed", "4"]) == 0
    assert "7 days written" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert [int(line.split(",")[0]) for line in lines[1::48]] == list(range(7))
    env = bundle.environment
    rng = np.random.default_rng(4)
    w = env.initial_weights / env.initial_weights.sum()
    rows = env.initial_states[rng.choice(len(w), size=7, p=w)]
    geometry = CellGeometry.build(env.cells, env.candidates)
    session = open_generation_session(bundle)
    expected = [generate_days(session, geometry, rows[s:s + 3, 0], rows[s:s + 3, 1], rng, alpha=env.alpha).days
                for s in (0, 3, 6)]
    np.testing.assert_array_equal(read_synthetic_csv(out), np.concatenate(expected))
    assert main(["-q", "generate", "--bundle", str(bundle_dir), "--days", "2", "--batch", "0",
                 "--out", str(tmp_path / "x.csv")]) == 2


def test_generate_refuses_a_bundle_without_initial_states(other_bundle_dir, tmp_path, capsys):
    assert main(["-q", "generate", "--bundle", str(other_bundle_dir), "--days", "3",
                 "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no released initial states" in err[0]
    assert not (tmp_path / "x.csv").exists()


def test_generate_refuses_a_missing_bundle(tmp_path, capsys):
    assert main(["-q", "generate", "--bundle", str(tmp_path / "nope"), "--days", "3",
                 "--out", str(tmp_path / "x.csv")]) == 2
    assert "pategail: error:" in capsys.readouterr().err


_TORCHLESS = textwrap.dedent("""
    import json, sys
    sys.modules["torch"] = None                                   # `import torch` now raises ImportError
    from pathlib import Path
    import numpy as np
    from pategail.sdk.device import Device
    from pategail.sdk.messages import InitialStatesRequest, from_bytes
    work = Path(sys.argv[1])
    device = Device(work / "device", 7, rng=np.random.default_rng(5))
    device.install_bundle(work / "bundle")
    device.add_days(np.load(work / "days.npy"))
    round_ack = from_bytes(device.handle((work / "request.bin").read_bytes()))
    np.save(work / "pending.npy", device.pending)
    # the device's half of a secure aggregation, with the coordinator in the same (torch-free) process
    from pategail.server.secagg.coordinator import SecAggCoordinator
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round
    coordinator = SecAggCoordinator()
    coordinator.enroll(7, device.public_keys)
    result = run_secure_round([device.secagg_endpoint(coordinator.directory)], None, SecureRoundConfig(1, n_min=1),
                              np.random.default_rng(0), coordinator=coordinator, num_queries=round_ack.n)
    init_ack = from_bytes(device.handle(InitialStatesRequest(2).to_bytes()))
    generated = device.generate(3, np.random.default_rng(0))
    # (the onnx package may appear: the onnxruntime-training wheel's own import validation loads it)
    heavy = sorted(m for m, mod in sys.modules.items() if mod is not None and
                   (m.split(".")[0] == "torch" or m.startswith(("pategail.export", "pategail.data",
                                                                "pategail.server.policy", "pategail.server.ppo"))))
    print(json.dumps({"round": type(round_ack).__name__, "init": init_ack.n, "generated": list(generated.days.shape),
                      "secure_sum": float(result.sum.sum()), "heavy": heavy}))
""")


def test_the_device_runs_a_round_with_torch_unimportable(bundle_dir, dataset, round_request, tmp_path,
                                                         make_device):
    import shutil
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(bundle_dir, work / "bundle")
    days = dataset.user_days(dataset.users[4])
    np.save(work / "days.npy", days)
    (work / "request.bin").write_bytes(round_request.to_bytes())
    proc = subprocess.run([sys.executable, "-c", _TORCHLESS, str(work)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # initial states (2 n_cells + 2), the explore law (2 x 11 rank bins for 1,000 candidates), the place law
    assert out["round"] == "Ack" and out["init"] == 2 * dataset.n_cells + 2 + 2 * 11 + dataset.n_cells + 3
    assert out["generated"] == [3, 48] and out["heavy"] == []
    # the same device state, seed and request in this (torch-importing) process give the same scores
    twin = make_device(4, device_id=7, seed=5)
    twin.handle(round_request.to_bytes())
    pending = np.load(work / "pending.npy")
    np.testing.assert_array_equal(twin.pending, pending)
    assert abs(out["secure_sum"] - pending.sum()) <= len(pending) / (1 << 24)


def test_generate_and_a_device_keep_the_bundles_day_cells_limit(bundle_dir, tmp_path, make_device, capsys):
    """A bundle with environment.max_day_cells: `pategail generate` and Device.generate make no day with more
    distinct cells (the untrained policy would: it explores about a quarter of its slots); a bad value is a
    one-line error."""
    import shutil

    from pategail.sdk.bundle import BundleError, load_bundle
    from pategail.sdk.features import distinct_cells

    def with_limit(root, value):
        shutil.copytree(bundle_dir, root)
        manifest = json.loads((root / "manifest.json").read_text())
        manifest["environment"]["max_day_cells"] = value
        (root / "manifest.json").write_text(json.dumps(manifest))
        return root

    free = tmp_path / "free.csv"
    assert main(["-q", "generate", "--bundle", str(bundle_dir), "--days", "40", "--out", str(free)]) == 0
    assert distinct_cells(read_synthetic_csv(free)).max() > 3
    limited = with_limit(tmp_path / "limited", 3)
    out = tmp_path / "limited.csv"
    assert main(["-q", "generate", "--bundle", str(limited), "--days", "40", "--out", str(out)]) == 0
    counts = distinct_cells(read_synthetic_csv(out))
    assert counts.max() == 3 and (counts == 3).mean() > 0.5
    device = make_device(0, install=False)
    device.install_bundle(limited)
    assert distinct_cells(device.generate(40, np.random.default_rng(0)).days).max() == 3
    for value in (0, True, 2.5, "3"):
        bad = with_limit(tmp_path / f"bad-{value}", value)
        with pytest.raises(BundleError, match="max_day_cells must be a whole number of cells >= 1"):
            load_bundle(bad)
    assert main(["-q", "generate", "--bundle", str(bad), "--days", "2", "--out", str(tmp_path / "x.csv")]) == 2
    assert "max_day_cells" in capsys.readouterr().err


def test_a_bundle_table_with_a_short_row_or_a_bad_number_is_a_one_line_error(bundle_dir, tmp_path):
    """The bundle's CSV tables are read whole: a row missing a column, or a field that is no number, names the
    file (the manifest's hashes made to match, as a careless tool would)."""
    import hashlib
    import shutil

    from pategail.sdk.bundle import BundleError, load_bundle

    def edited(name, change):
        root = tmp_path / name
        shutil.copytree(bundle_dir, root)
        table = root / "cells.csv"
        lines = table.read_text().splitlines()
        lines[5] = change(lines[5])
        table.write_text("\n".join(lines) + "\n")
        manifest = json.loads((root / "manifest.json").read_text())
        manifest["files"]["cells.csv"] = {"bytes": table.stat().st_size,
                                          "sha256": hashlib.sha256(table.read_bytes()).hexdigest()}
        (root / "manifest.json").write_text(json.dumps(manifest))
        return root

    assert load_bundle(edited("same", lambda line: line)).environment is not None   # the rewrite alone is fine
    for name, change in [("short", lambda line: line.rsplit(",", 1)[0]), ("text", lambda line: line + "x"),
                         ("empty", lambda line: line.split(",")[0] + ",," + line.split(",")[2])]:
        with pytest.raises(BundleError, match=r"cells\.csv: malformed row"):
            load_bundle(edited(name, change))
