"""Installing a bundle, surviving a restart, recovering from a corrupt or foreign checkpoint, the persisted
identity, and policy updates (hash-checked, used from then on, kept across restarts)."""
from __future__ import annotations

import logging
import stat

import numpy as np
import pytest

from pategail.sdk.bundle import BundleError, open_training_session, sha256_file
from pategail.sdk.checkpoint import CHECKPOINT_TAG
from pategail.sdk.device import Device
from pategail.sdk.messages import Ack, ErrorReply, PolicyUpdate, from_bytes


def _initial_parameters(bundle):
    return open_training_session(bundle).get_flat_parameters()


def _train(device, round_request):
    reply = from_bytes(device.handle(round_request.to_bytes()))
    assert isinstance(reply, Ack), reply
    return device.discriminator_parameters()


def test_install_copies_the_bundle_and_starts_from_its_checkpoint(make_device, bundle):
    device = make_device(0)
    assert (device.root / "bundle" / "manifest.json").is_file()
    assert device.bundle.sha256 == bundle.sha256
    assert (device.root / CHECKPOINT_TAG).read_text().strip() == bundle.sha256
    np.testing.assert_array_equal(device.discriminator_parameters(), _initial_parameters(bundle))
    assert device.n_cells == len(bundle.environment.cells)


def test_restart_keeps_the_trained_checkpoint(make_device, bundle, round_request, caplog):
    device = make_device(0)
    trained = _train(device, round_request)
    assert not np.allclose(trained, _initial_parameters(bundle))
    with caplog.at_level(logging.WARNING):
        restarted = Device(device.root, device.device_id, rng=np.random.default_rng(0))
    assert not caplog.records
    np.testing.assert_array_equal(restarted.discriminator_parameters(), trained)
    assert len(restarted.store) == len(device.store) and restarted.store.home == device.store.home
    # installing the same bundle again keeps it too
    restarted.install_bundle(restarted.root / "bundle")
    np.testing.assert_array_equal(restarted.discriminator_parameters(), trained)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_checkpoint_warns_and_starts_again_from_the_bundle(make_device, bundle, round_request, caplog,
                                                                   damage):
    device = make_device(0)
    _train(device, round_request)
    ckpt = device.checkpoint_path
    data = ckpt.read_bytes()
    ckpt.write_bytes({"garbage": np.random.default_rng(0).bytes(len(data)), "truncated": data[: len(data) // 2],
                      "empty": b""}[damage])
    with caplog.at_level(logging.WARNING):
        restarted = Device(device.root, device.device_id, rng=np.random.default_rng(0))
    assert any("corrupt" in r.getMessage() and "starting again from the bundle" in r.getMessage()
               for r in caplog.records)
    np.testing.assert_array_equal(restarted.discriminator_parameters(), _initial_parameters(bundle))
    # and the device works: it trains and the new checkpoint survives the next restart
    trained = _train(restarted, round_request)
    np.testing.assert_array_equal(Device(device.root, 1, rng=np.random.default_rng(0)).discriminator_parameters(),
                                  trained)


def test_checkpoint_of_another_bundle_is_replaced(make_device, bundle, other_bundle_dir, round_request, caplog):
    device = make_device(0)
    _train(device, round_request)
    with caplog.at_level(logging.WARNING):
        other = device.install_bundle(other_bundle_dir)
    assert any("mismatched" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(device.discriminator_parameters(), _initial_parameters(other))
    assert device.pending is None                             # a pending vector of the old bundle is dropped


def test_foreign_checkpoint_file_with_a_forged_tag_is_caught(make_device, bundle, other_bundle_dir, tmp_path):
    """A checkpoint copied from another device of another bundle, with this bundle's tag: same architecture,
    so it loads — the tag is the guard; a checkpoint of another shape fails the parameter-count check."""
    from pategail.sdk.bundle import load_bundle
    device = make_device(0)
    other = load_bundle(other_bundle_dir)
    device.checkpoint_path.write_bytes(other.checkpoint.read_bytes())
    (device.root / CHECKPOINT_TAG).write_text("0" * 64)
    restarted = Device(device.root, device.device_id, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(restarted.discriminator_parameters(), _initial_parameters(bundle))


def test_bundle_refusals_change_nothing(make_device, bundle_dir, tmp_path):
    device = make_device(0)
    before = device.checkpoint_path.read_bytes()
    with pytest.raises(BundleError, match="differs from the expected"):
        device.install_bundle(bundle_dir, expected_sha256="0" * 64)
    broken = tmp_path / "broken"
    import shutil
    shutil.copytree(bundle_dir, broken)
    (broken / "policy.onnx").write_bytes(b"tampered")
    with pytest.raises(BundleError):
        device.install_bundle(broken)
    assert device.checkpoint_path.read_bytes() == before
    assert sha256_file(device.root / "bundle" / "policy.onnx") == sha256_file(bundle_dir / "policy.onnx")


def test_identity_is_created_once_private_and_kept(tmp_path):
    a = Device(tmp_path / "d", 7, rng=np.random.default_rng(0))
    mode = stat.S_IMODE((tmp_path / "d" / "identity.key").stat().st_mode)
    assert mode == 0o600
    b = Device(tmp_path / "d", 7, rng=np.random.default_rng(0))
    assert a.public_keys == b.public_keys
    assert Device(tmp_path / "e", 8, rng=np.random.default_rng(0)).public_keys != a.public_keys


def test_requests_before_a_bundle_or_days_are_refused(tmp_path, bundle_dir, round_request):
    device = Device(tmp_path / "d", 1, rng=np.random.default_rng(0))
    reply = from_bytes(device.handle(round_request.to_bytes()))
    assert isinstance(reply, ErrorReply) and reply.code == "not_ready" and reply.round == 1
    device.install_bundle(bundle_dir)
    reply = from_bytes(device.handle(round_request.to_bytes()))
    assert isinstance(reply, ErrorReply) and reply.code == "not_ready"


def test_policy_update_is_used_from_then_on_and_survives_a_restart(make_device, other_bundle_dir, policy_bytes):
    from pategail.sdk.decoding import BufferedDecoder, PrefixDecoder, decoder_for

    device = make_device(0)
    model = policy_bytes(5, device.n_cells)
    old_sha = device.policy_sha256
    assert isinstance(decoder_for(device._generation_session()), BufferedDecoder)   # the bundle's own policy
    before = device.generate(4, np.random.default_rng(3))
    reply = from_bytes(device.handle(PolicyUpdate.for_model(2, model).to_bytes()))
    assert reply == Ack(2, "policy_update", 0)
    assert device.policy_sha256 != old_sha and (device.root / "policy.onnx").read_bytes() == model
    after = device.generate(4, np.random.default_rng(3))
    assert not np.array_equal(before.log_probs, after.log_probs)
    # the bundle's incremental model computes the bundle's policy only: the update runs on the full prefix
    assert isinstance(decoder_for(device._generation_session()), PrefixDecoder)
    restarted = Device(device.root, device.device_id, rng=np.random.default_rng(0))
    assert restarted.policy_sha256 == device.policy_sha256
    np.testing.assert_array_equal(restarted.generate(4, np.random.default_rng(3)).log_probs, after.log_probs)
    restarted.install_bundle(restarted.root / "bundle")
    assert restarted.policy_sha256 == device.policy_sha256   # the same bundle again: the update stays
    other = restarted.install_bundle(other_bundle_dir)        # a new bundle brings its own policy
    assert restarted.policy_sha256 == other.manifest["files"]["policy.onnx"]["sha256"]
    assert not (restarted.root / "policy.onnx").exists()


def test_generated_days_start_from_the_devices_own_states(make_device):
    device = make_device(2)
    g = device.generate(6, np.random.default_rng(0))
    own = device.store.days()
    assert g.days.shape == (6, 48) and g.actions.shape == (6, 47)
    assert set(g.days[:, 0].tolist()) <= set(own[:, 0].tolist())
