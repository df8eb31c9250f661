"""Replay of earlier generated pairs in the device's discriminator training (pategail.sdk.replay): the pure
buffer rules, the manifest section, and the device keeping its buffer with its checkpoint so that a round
sent again is replayed exactly."""
from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest

from pategail.sdk.bundle import BundleError, load_bundle
from pategail.sdk.checkpoint import BEFORE_ROUND_REPLAY, REPLAY
from pategail.sdk.device import Device
from pategail.sdk.features import N_PAIR_FEATURES
from pategail.sdk.messages import Ack, RoundRequest, from_bytes
from pategail.sdk.replay import ReplaySettings, empty_buffer, remember, replayed_count, validate_buffer


def _rows(n, start=0):
    return (np.arange(start, start + n, dtype=np.float32)[:, None] * np.ones(N_PAIR_FEATURES, np.float32))


def test_replayed_count_takes_the_share_and_keeps_the_current_round():
    assert replayed_count(32, 0.5, 0) == 0                 # nothing to replay before the first round
    assert replayed_count(32, 0.5, 10) == 16
    assert replayed_count(32, 0.25, 10) == 8
    assert replayed_count(32, 0.99, 10) == 31              # one pair of the current round at least
    assert replayed_count(32, 0.01, 10) == 1               # a declared replay replays something
    assert replayed_count(1, 0.5, 10) == 0


def test_remember_keeps_the_last_rounds_up_to_capacity():
    settings = ReplaySettings(0.5, rounds=2, pairs_per_round=3)
    rng = np.random.default_rng(0)
    buffer = empty_buffer()
    for r in range(4):
        buffer = remember(buffer, _rows(10, start=100 * r), settings, rng)
    assert buffer.shape == (6, N_PAIR_FEATURES) and buffer.dtype == np.float32
    # rounds 2 and 3 only, 3 distinct pairs of each, in order of arrival
    ids = buffer[:, 0]
    assert set(ids[:3]) <= set(range(200, 210)) and set(ids[3:]) <= set(range(300, 310))
    assert len(set(ids)) == 6
    # a request smaller than pairs_per_round is kept whole
    assert len(remember(empty_buffer(), _rows(2), settings, rng)) == 2


def test_settings_and_buffer_validation():
    assert ReplaySettings.from_manifest(None) is None
    s = ReplaySettings.from_manifest({"share": 0.5, "rounds": 4, "pairs_per_round": 8})
    assert s == ReplaySettings(0.5, 4, 8) and s.capacity == 32 and ReplaySettings.from_manifest(s.to_manifest()) == s
    for bad in ({"share": 0, "rounds": 1, "pairs_per_round": 1}, {"share": 1.0, "rounds": 1, "pairs_per_round": 1},
                {"share": 0.5, "rounds": 0, "pairs_per_round": 1}):
        with pytest.raises(ValueError):
            ReplaySettings.from_manifest(bad)
    with pytest.raises(KeyError):
        ReplaySettings.from_manifest({"share": 0.5})
    with pytest.raises(ValueError):
        validate_buffer(_rows(33), s)                      # over capacity
    with pytest.raises(ValueError):
        validate_buffer(_rows(3).astype(np.float64), s)
    bad = _rows(3)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError):
        validate_buffer(bad, s)


def test_manifest_declares_replay_only_when_on(bundle, replay_bundle_dir, tmp_path):
    assert bundle.replay is None and "replay" not in bundle.manifest["discriminator"]
    replay = load_bundle(replay_bundle_dir)
    assert replay.replay == ReplaySettings(0.5, 3, 40)
    broken = tmp_path / "broken"
    shutil.copytree(replay_bundle_dir, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["discriminator"]["replay"]["share"] = 1.5
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="malformed manifest"):
        load_bundle(broken)


def _replay_device(tmp_path, dataset, bundle_dir, name="d", seed=0):
    device = Device(tmp_path / name, 7, rng=np.random.default_rng(seed))
    device.install_bundle(bundle_dir)
    device.add_days(dataset.user_days(dataset.users[0]))
    return device


def _request(round_request, rnd):
    return RoundRequest(rnd, round_request.k_steps, round_request.batch_size, round_request.days,
                        round_request.homes, round_request.actions)


def _round(device, request, seed):
    device.rng = np.random.default_rng(seed)               # as the emulator does: one stream per round
    reply = from_bytes(device.handle(request.to_bytes()))
    assert isinstance(reply, Ack), reply
    return device.discriminator_parameters(), device.pending


def test_replay_changes_training_only_from_the_second_round(make_device, dataset, replay_bundle_dir, tmp_path,
                                                            round_request):
    plain = make_device(0, device_id=7)
    replaying = _replay_device(tmp_path, dataset, replay_bundle_dir)
    p1, v1 = _round(plain, _request(round_request, 1), 11)
    r1, w1 = _round(replaying, _request(round_request, 1), 11)
    np.testing.assert_array_equal(p1, r1)                  # round 1: an empty buffer, the same minibatches
    np.testing.assert_array_equal(v1, w1)
    buffer = np.load(replaying.root / REPLAY)
    assert buffer.shape == (40, N_PAIR_FEATURES)           # 40 of round 1's generated pairs
    p2, _ = _round(plain, _request(round_request, 2), 12)
    r2, _ = _round(replaying, _request(round_request, 2), 12)
    assert not np.array_equal(p2, r2)                      # round 2 trains on some of round 1's pairs
    assert np.load(replaying.root / REPLAY).shape == (80, N_PAIR_FEATURES)
    assert not (plain.root / REPLAY).exists()


def test_a_round_sent_again_is_replayed_with_the_buffer_it_started_from(dataset, replay_bundle_dir, tmp_path,
                                                                        round_request):
    whole = _replay_device(tmp_path, dataset, replay_bundle_dir, "whole")
    crashed = _replay_device(tmp_path, dataset, replay_bundle_dir, "crashed")
    for rnd in (1, 2):
        expected = _round(whole, _request(round_request, rnd), rnd)
        _round(crashed, _request(round_request, rnd), rnd)
    np.testing.assert_array_equal(np.load(crashed.root / BEFORE_ROUND_REPLAY).shape, (40, N_PAIR_FEATURES))
    # the coordinator crashed after round 2 reached this device; the restarted device gets round 2 again
    restarted = Device(crashed.root, 7, rng=np.random.default_rng(0))
    assert len(np.load(restarted.root / REPLAY)) == 80
    again = _round(restarted, _request(round_request, 2), 2)
    np.testing.assert_array_equal(again[0], expected[0])
    np.testing.assert_array_equal(again[1], expected[1])
    np.testing.assert_array_equal(np.load(restarted.root / REPLAY), np.load(whole.root / REPLAY))


def test_an_unusable_buffer_is_replaced_by_an_empty_one(dataset, replay_bundle_dir, bundle_dir, tmp_path,
                                                         round_request, caplog):
    device = _replay_device(tmp_path, dataset, replay_bundle_dir)
    _round(device, _request(round_request, 1), 1)
    (device.root / REPLAY).write_bytes(b"not a numpy file")
    with caplog.at_level(logging.WARNING):
        restarted = Device(device.root, 7, rng=np.random.default_rng(0))
    assert any("replay buffer" in r.getMessage() and "empty" in r.getMessage() for r in caplog.records)
    _round(restarted, _request(round_request, 2), 2)
    assert np.load(device.root / REPLAY).shape == (40, N_PAIR_FEATURES)
    # a checkpoint started again from another bundle leaves no buffer behind
    restarted.install_bundle(bundle_dir)
    assert not (device.root / REPLAY).exists() and restarted.bundle.replay is None
