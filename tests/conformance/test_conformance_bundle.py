"""Bundle loading refuses altered files, other format versions and incompatible runtimes; the export command
writes a loadable bundle; days generated with the bundle's policy are valid and reproducible."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pategail.server.errors import PategailError
from pategail.sdk.bundle import BundleError, check_runtime, load_bundle, open_policy_session


@pytest.fixture
def bundle_copy(bundle_dir, tmp_path):
    dst = tmp_path / "bundle"
    shutil.copytree(bundle_dir, dst)
    return dst


def _edit_manifest(root, edit):
    manifest = json.loads((root / "manifest.json").read_text())
    edit(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest))


def test_bundle_error_is_the_sdks_own_and_a_one_line_cli_error(bundle_copy, tmp_path, capsys):
    from pategail.cli import main
    from pategail.sdk.errors import SdkError
    from pategail.sdk.messages import MessageError
    from pategail.sdk.secagg.errors import SecAggError

    # the SDK's errors derive from the SDK's root, not from the command line's class
    for cls in (BundleError, MessageError, SecAggError):
        assert issubclass(cls, SdkError) and not issubclass(cls, PategailError)
    (bundle_copy / "policy.onnx").write_bytes(b"altered")
    code = main(["-q", "generate", "--bundle", str(bundle_copy), "--days", "2", "--out", str(tmp_path / "s.csv")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("pategail: error: ") and "\n" not in err and "SHA-256" in err


@pytest.mark.parametrize("name", ["policy.onnx", "discriminator_checkpoint", "discriminator_optimizer_model.onnx"])
def test_one_flipped_byte_is_refused(bundle_copy, name):
    path = bundle_copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=f"{name}: SHA-256 does not match"):
        load_bundle(bundle_copy)


def test_a_missing_file_is_refused(bundle_copy):
    (bundle_copy / "discriminator_eval_model.onnx").unlink()
    with pytest.raises(BundleError, match="discriminator_eval_model.onnx is missing"):
        load_bundle(bundle_copy)


def test_another_format_version_is_refused(bundle_copy):
    _edit_manifest(bundle_copy, lambda m: m.update(format_version=2))
    with pytest.raises(BundleError, match="format version 2; this SDK reads version 1"):
        load_bundle(bundle_copy)


@pytest.mark.parametrize("field, value", [("replay", {"share": 0.5, "rounds": 3, "pairs": 40}),
                                          ("input_scaling", "owner")])
def test_a_discriminator_option_this_sdk_no_longer_has_is_refused_not_ignored(bundle_copy, field, value):
    _edit_manifest(bundle_copy, lambda m: m["discriminator"].update({field: value}))
    with pytest.raises(BundleError, match=f"declares {field}, which this version of the SDK does not do") as err:
        load_bundle(bundle_copy)
    assert "\n" not in str(err.value)


def test_an_incompatible_onnxruntime_is_refused(bundle_copy):
    with pytest.raises(BundleError, match="needs onnxruntime >= 1.19.0 and < 1.20.0, but onnxruntime 1.20.1"):
        load_bundle(bundle_copy, onnxruntime_version="1.20.1")
    with pytest.raises(BundleError, match="onnxruntime 1.18.0 is installed"):
        load_bundle(bundle_copy, onnxruntime_version="1.18.0")
    load_bundle(bundle_copy, onnxruntime_version="1.19.0+cpu")      # same release line: accepted


def test_a_manifest_claiming_a_too_new_ir_is_refused(bundle_copy):
    _edit_manifest(bundle_copy, lambda m: m["policy"]["model"].update(ir_version=11))
    with pytest.raises(BundleError, match="IR 11"):
        load_bundle(bundle_copy)


@pytest.mark.parametrize("text", ["{not json", json.dumps({"format": "something-else", "format_version": 1}),
                                  json.dumps({"format": "pategail-model-bundle", "format_version": 1})])
def test_malformed_manifests_are_refused_in_one_line(bundle_copy, text):
    (bundle_copy / "manifest.json").write_text(text)
    with pytest.raises(BundleError) as err:
        load_bundle(bundle_copy)
    assert "\n" not in str(err.value)


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleError, match="not a model bundle"):
        load_bundle(tmp_path)


def test_check_runtime_bounds():
    req = {"onnxruntime_min": "1.19.0", "onnxruntime_below": "1.20.0"}
    check_runtime(req, "1.19.2")
    with pytest.raises(BundleError):
        check_runtime(req, "2.0.0")


def _export_args(argv):
    from pategail.cli import export as cli

    parser = argparse.ArgumentParser(prog="pategail")
    cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_export_command_writes_a_loadable_bundle_and_replaces_an_old_one(tmp_path):
    from pategail.cli.export import run_export

    out = tmp_path / "b"
    assert run_export(_export_args(["export", "--out", str(out), "--n-cells", "50", "--seed", "3"])) == 0
    first = load_bundle(out)
    assert first.manifest["policy"]["config"]["n_cells"] == 50
    assert run_export(_export_args(["export", "--out", str(out), "--n-cells", "60", "--seed", "3"])) == 0
    assert load_bundle(out).manifest["policy"]["config"]["n_cells"] == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]             # no temporary directories left


def test_export_command_is_seeded(tmp_path):
    from pategail.cli.export import run_export

    for name in ("x", "y"):
        run_export(_export_args(["export", "--out", str(tmp_path / name), "--n-cells", "20", "--seed", "5"]))
    a, b = load_bundle(tmp_path / "x").manifest["files"], load_bundle(tmp_path / "y").manifest["files"]
    assert a["policy.onnx"] == b["policy.onnx"] and a["discriminator_checkpoint"] == b["discriminator_checkpoint"]


def test_export_command_from_a_policy_checkpoint(tmp_path, torch_models):
    from pategail.cli.export import run_export
    from pategail.server.policy import save_policy

    save_policy(torch_models[0], tmp_path / "p.pt")
    out = tmp_path / "b"
    run_export(_export_args(["export", "--out", str(out), "--policy-checkpoint", str(tmp_path / "p.pt")]))
    assert load_bundle(out).manifest["policy"]["n_parameters"] == torch_models[0].n_parameters
    with pytest.raises(PategailError, match="has 4210 cells, but 7 were asked for"):
        run_export(_export_args(["export", "--out", str(out), "--policy-checkpoint", str(tmp_path / "p.pt"),
                                 "--n-cells", "7"]))


@pytest.mark.parametrize("argv, message", [([], "say how many cells"), (["--n-cells", "1"], "at least 2"),
                                           (["--policy-checkpoint", "/nonexistent.pt"], "no such policy")])
def test_export_command_user_errors(tmp_path, argv, message):
    from pategail.cli.export import run_export

    with pytest.raises(PategailError, match=message):
        run_export(_export_args(["export", "--out", str(tmp_path / "b"), *argv]))


@pytest.fixture(scope="module")
def geometry(geolife):
    from pategail.sdk.epr import CellGeometry

    return CellGeometry.build(geolife[0], candidates=200)


def test_generated_days_are_valid_and_reproducible(bundle, geolife, geometry):
    from pategail.sdk.features import action_mask, label_actions
    from pategail.sdk.generate import generate_days

    _, days = geolife
    session = open_policy_session(bundle)
    homes, first = days[:16, 0], days[:16, 0]
    a = generate_days(session, geometry, homes, first, np.random.default_rng(0))
    b = generate_days(session, geometry, homes, first, np.random.default_rng(0))
    assert a.days.shape == (16, 48) and a.actions.shape == a.log_probs.shape == (16, 47)
    np.testing.assert_array_equal(a.days, b.days)
    np.testing.assert_array_equal(a.actions, b.actions)
    assert np.all(np.isfinite(a.log_probs)) and np.all(a.log_probs <= 0)
    # every action taken was possible, and the moves are explained by the actions (explore may land on home)
    mask = action_mask(a.days, homes)[:, :-1]
    assert np.take_along_axis(mask, a.actions[..., None].astype(np.int64), 2).all()
    labels = label_actions(a.days, homes)
    agree = (labels == a.actions) | ((a.actions == 3) & (labels == 1))
    assert agree.all()


def test_generated_log_probs_match_the_policy(bundle, torch_models, geolife, geometry):
    """The log-probs generate_days reports are the torch policy's masked log-probs of the actions taken."""
    import torch

    from pategail.sdk.features import action_mask, state_features
    from pategail.sdk.generate import generate_days
    from pategail.server.policy import masked_log_probs

    cells, days = geolife
    homes = days[100:108, 0]
    g = generate_days(open_policy_session(bundle), geometry, homes, days[100:108, 0], np.random.default_rng(1))
    with torch.no_grad():
        logits, _ = torch_models[0](torch.from_numpy(g.days.astype(np.int64)),
                                    torch.from_numpy(state_features(g.days, homes, cells)))
        lp = masked_log_probs(logits, torch.from_numpy(action_mask(g.days, homes))).numpy()[:, :-1]
    taken = np.take_along_axis(lp, g.actions[..., None].astype(np.int64), 2)[..., 0]
    np.testing.assert_allclose(g.log_probs, taken, atol=1e-5, rtol=0)


def test_sample_actions_never_draws_a_masked_action():
    from pategail.sdk.generate import sample_actions

    with np.errstate(divide="ignore"):
        lp = np.log(np.array([[0.5, 0.0, 0.5, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]]))
    draws = np.stack([sample_actions(lp, np.random.default_rng(s)) for s in range(200)])
    assert set(draws[:, 0]) == {0, 2} and set(draws[:, 1]) == {3} and set(draws[:, 2]) == {1}


def test_device_side_modules_do_not_import_torch():
    code = ("import sys, pategail.sdk.bundle, pategail.sdk.generate; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_prefix_features_equal_the_full_day_features(geolife):
    """Generation featurises growing prefixes; the result must be the full day's rows (the features of a
    real day and of a generated day come from the same function, on the same 48-slot clock)."""
    from pategail.sdk.features import state_features
    from pategail.sdk.generate import prefix_features

    cells, days = geolife
    sample, homes = days[:8], days[:8, 0]
    full = state_features(sample, homes, cells)
    for t in (0, 5, 30, 47):
        np.testing.assert_array_equal(prefix_features(sample[:, :t + 1], homes, cells), full[:, :t + 1])


def test_export_refuses_to_replace_a_directory_that_is_not_a_bundle(tmp_path):
    from pategail.cli.export import run_export

    (tmp_path / "notes.txt").write_text("precious")
    with pytest.raises(BundleError, match="is not a model bundle; refusing"):
        run_export(_export_args(["export", "--out", str(tmp_path), "--n-cells", "5"]))
    assert (tmp_path / "notes.txt").read_text() == "precious"
