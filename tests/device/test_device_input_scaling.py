"""The discriminator's inputs standardised by the owner's real pairs (discriminator_round.owner_scaler): the
maths by hand, the manifest flag, and a device that applies the map wherever D sees a row."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pategail.sdk.bundle import BundleError, load_bundle
from pategail.sdk.device import Device
from pategail.sdk.discriminator_round import OWNER_SCALE_FLOOR, owner_scaler
from pategail.sdk.features import N_PAIR_FEATURES, N_STATE_FEATURES
from pategail.sdk.messages import Ack, from_bytes


def test_owner_scaler_by_hand():
    rows = np.zeros((4, N_PAIR_FEATURES), dtype=np.float32)
    rows[:, 0] = [0.0, 1.0, 2.0, 3.0]                      # mean 1.5, std sqrt(1.25)
    rows[:, 5] = 2 / 48                                   # never varies: scale is the floor
    rows[:, N_STATE_FEATURES] = [1, 0, 1, 0]              # an action column: left as it is
    scaler = owner_scaler(rows)
    out = scaler(rows)
    np.testing.assert_allclose(out[:, 0], (rows[:, 0] - 1.5) / np.sqrt(1.25), rtol=1e-6)
    assert scaler.scale[5] == pytest.approx(OWNER_SCALE_FLOOR)
    np.testing.assert_allclose(out[:, 5], 0.0, atol=1e-6)
    probe = rows[:1].copy()
    probe[0, 5] = 3 / 48                                   # one cell more than the owner ever had
    assert scaler(probe)[0, 5] == pytest.approx(1.0)
    np.testing.assert_array_equal(out[:, N_STATE_FEATURES:], rows[:, N_STATE_FEATURES:])
    assert out.dtype == np.float32


def test_manifest_flag(bundle, scaling_bundle_dir, tmp_path):
    assert not bundle.owner_scaling and "input_scaling" not in bundle.manifest["discriminator"]
    assert load_bundle(scaling_bundle_dir).owner_scaling
    broken = tmp_path / "broken"
    shutil.copytree(scaling_bundle_dir, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["discriminator"]["input_scaling"] = "minmax"
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="input_scaling"):
        load_bundle(broken)


def test_a_scaling_device_scores_the_scaled_rows(make_device, dataset, scaling_bundle_dir, tmp_path, round_request):
    plain = make_device(0, device_id=7)
    scaling = Device(tmp_path / "scaling", 7, rng=np.random.default_rng(0))
    scaling.install_bundle(scaling_bundle_dir)
    scaling.add_days(dataset.user_days(dataset.users[0]))
    pairs = plain.positive_pairs()[:50]
    scaler = scaling.input_scaler()
    assert plain.input_scaler() is None and scaler is not None
    # same initial parameters: the scaling device's D(x) is the plain one's D(scaler(x))
    np.testing.assert_allclose(scaling.score(pairs), plain.score(scaler(pairs)), rtol=1e-6)
    for device in (plain, scaling):
        device.rng = np.random.default_rng(3)
        assert isinstance(from_bytes(device.handle(round_request.to_bytes())), Ack)
    assert not np.array_equal(plain.discriminator_parameters(), scaling.discriminator_parameters())
    # adding days re-derives the map from all the owner's days
    scaling.add_days(dataset.user_days(dataset.users[1]))
    assert not np.array_equal(scaling.input_scaler().mean, scaler.mean)
