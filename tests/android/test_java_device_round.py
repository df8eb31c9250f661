"""A Java device (the Android demo's core, in its own process) takes part in real secure rounds next to
Python SDK devices: same RoundRequest, same coordinator, aggregator and bytes. Its trainer replays the Python
reference's scores for its days (android-demo/vectors/device.json) and checks its generated pairs' features
against the reference's. The released sums must be exact (no noise), with the Java device surviving, or
killed mid-round — which only works if the Shamir shares it made are right."""
from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import JVM_OPTIONS, VECTORS


@pytest.fixture
def coordinator_key():
    """The coordinator's Ed25519 signing key (it signs the key directory the Java device is given)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


def signed_directory(coordinator, key) -> bytes:
    """The coordinator's key directory as a device receives it: signed (pategail.sdk.net.frames)."""
    from pategail.sdk.net.frames import directory_to_bytes

    return directory_to_bytes(coordinator.directory, key.sign)


@pytest.fixture
def fleet(tmp_path, java_classpath, dataset, coordinator_key):
    """(coordinator, endpoints, java, pending by id, M, Python devices) after every device answered the
    RoundRequest."""
    from pategail.jvm_device import JavaDevice
    from pategail.sdk.device import Device
    from pategail.server.secagg.coordinator import SecAggCoordinator

    vectors = json.loads((VECTORS / "messages.json").read_text())
    reference = json.loads((VECTORS / "device.json").read_text())
    features = json.loads((VECTORS / "features.json").read_text())
    request = bytes.fromhex(vectors["device"]["round_request"])
    bundle = VECTORS / "bundle"
    coordinator = SecAggCoordinator(coordinator_key)
    pending, python_devices = {}, []
    for i, user in enumerate(dataset.users[4:7]):                    # other users than the Java device's
        dev = Device(tmp_path / f"py-{i}", 10 + i, rng=np.random.default_rng(i))
        dev.install_bundle(bundle)
        dev.add_days(dataset.user_days(user))
        dev.handle(request)
        pending[dev.device_id] = dev.pending
        coordinator.enroll(dev.device_id, dev.public_keys)
        python_devices.append(dev)
    java = JavaDevice(java_classpath, tmp_path / "java", 20, VECTORS / "device.json", seed=reference["seed"],
                      jvm_options=JVM_OPTIONS)
    try:
        assert java.install_bundle(bundle) == python_devices[0].bundle.sha256
        assert java.add_days(np.array(features["days"])) == len(features["days"])
        assert java.handle(request).hex() == reference["ack"]           # the Python device's Ack, byte for byte
        pending[java.device_id] = np.clip(np.array(reference["rounds"][0]["prob"]), 0.0, 1.0)
        coordinator.enroll(java.device_id, java.public_keys)
        java.set_directory(signed_directory(coordinator, coordinator_key))
        endpoints = [d.secagg_endpoint(coordinator.directory) for d in python_devices] + [java]
        yield coordinator, endpoints, java, pending, len(pending[java.device_id]), python_devices
    finally:
        java.close()


def _expected(pending: dict, ids) -> tuple[np.ndarray, np.ndarray]:
    from pategail.sdk.secagg.fixedpoint import SCALE, encode

    total = sum(encode(pending[d]) for d in ids)
    squares = sum(encode(pending[d] * pending[d]) for d in ids)
    return total / SCALE, squares / SCALE


def test_java_device_in_a_python_round_gives_the_exact_sum(fleet, java_classpath, coordinator_key):
    from pategail.jvm_device import JavaDevice
    from pategail.sdk.secagg.replay import RoundLog
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

    coordinator, endpoints, java, pending, m, _ = fleet
    result = run_secure_round(endpoints, None, SecureRoundConfig(round_id=1, n_min=3), np.random.default_rng(0),
                              coordinator=coordinator, num_queries=m)
    assert java.device_id in result.survivors and result.n_survivors == 4
    want_sum, want_sq = _expected(pending, result.survivors)
    np.testing.assert_array_equal(result.sum, want_sum)
    np.testing.assert_array_equal(result.sq_sum, want_sq)
    assert not result.stats.rejected
    # the upload is on the owner's privacy ledger, in the Python SDK's file: a round without noise, ε = ∞
    from pategail.sdk.secagg.ledger import PrivacyLedger

    ledger = PrivacyLedger(java.root / "privacy-ledger.json")
    assert ledger.releases == () and ledger.epsilon() == float("inf")
    # the Java device refuses a replayed round like a Python device does
    from pategail.sdk.secagg.errors import MessageRejected

    start = coordinator.new_round(SecureRoundConfig(2, n_min=3), sorted(pending), m)
    java.start_round(start.config, start.envelopes[java.device_id])
    with pytest.raises(MessageRejected, match="replay"):
        java.start_round(start.config, start.envelopes[java.device_id])
    # the guard is on disk, in the Python device's format, and survives a restart of the Java device
    assert RoundLog(java.root / "secagg-rounds.json").last(coordinator.directory.coordinator) == 2
    java.close()
    with JavaDevice(java_classpath, java.root, java.device_id, VECTORS / "device.json",
                    jvm_options=JVM_OPTIONS) as again:
        again.set_directory(signed_directory(coordinator, coordinator_key))
        with pytest.raises(MessageRejected, match="replay"):
            again.start_round(start.config, start.envelopes[again.device_id])
    # a directory signed by another key than the one the device pinned is refused
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    with JavaDevice(java_classpath, java.root, java.device_id, VECTORS / "device.json",
                    jvm_options=JVM_OPTIONS) as again:
        again.set_directory(signed_directory(coordinator, coordinator_key))
        with pytest.raises(MessageRejected, match="bad signature"):
            again.set_directory(signed_directory(coordinator, Ed25519PrivateKey.generate()))


@pytest.mark.parametrize("block, clip_norm", [(3, 1.0), (0, 11.0)], ids=["blocks-of-3", "as-is"])
def test_java_device_in_a_gaussian_round_uploads_what_a_python_device_uploads(fleet, block, clip_norm):
    """A Gaussian-mechanism round without noise (the Python coordinator's signed trailer): the released sum is
    the fixed-point sum of every device's ``gaussian_input`` — centred block means of its scores, L2-clipped to
    the signed clip norm (clipping bites at 1.0) — so the Java device's blocks, clip and encoding are the
    Python SDK's, exactly."""
    from pategail.sdk.contribution import Granularity
    from pategail.sdk.secagg.mechanisms import gaussian_input
    from pategail.sdk.secagg.fixedpoint import SCALE, encode_signed
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

    coordinator, endpoints, java, pending, m, _ = fleet
    m_blocks = Granularity(block).count(m // 47) if block else m
    cfg = SecureRoundConfig(round_id=1, n_min=3, mechanism="gaussian", block=block, clip_norm=clip_norm)
    result = run_secure_round(endpoints, None, cfg, np.random.default_rng(0), coordinator=coordinator,
                              num_queries=m_blocks)
    assert result.n_survivors == 4 and not result.stats.rejected
    signed = coordinator.new_round(SecureRoundConfig(2, n_min=3, mechanism="gaussian", block=block,
                                                     clip_norm=clip_norm), sorted(pending), m_blocks)
    from pategail.sdk.secagg.config import RoundConfig

    round_cfg = RoundConfig.from_signed_bytes(signed.config, coordinator.directory.coordinator)
    want = sum(encode_signed(gaussian_input(pending[d], round_cfg)) for d in sorted(pending))
    np.testing.assert_array_equal(result.sum * SCALE, want)
    assert np.all(result.sq_sum == 0)                      # no Σ D² in this mechanism


def test_java_device_refuses_a_threshold_below_the_secure_one(fleet):
    """A coordinator-signed threshold below graph.secure_threshold (all pairs among 4: 3) is refused by the
    Java device before it sends anything, as a Python device refuses it; at the secure threshold it takes part."""
    from pategail.sdk.secagg.errors import ProtocolError
    from pategail.server.secagg.round import SecureRoundConfig

    coordinator, _, java, pending, m, _ = fleet
    start = coordinator.new_round(SecureRoundConfig(1, n_min=3, threshold=2), sorted(pending), m)
    with pytest.raises(ProtocolError, match="Shamir threshold 2 is below this device's floor 3"):
        java.start_round(start.config, start.envelopes[java.device_id])
    start = coordinator.new_round(SecureRoundConfig(2, n_min=3), sorted(pending), m)
    assert java.start_round(start.config, start.envelopes[java.device_id])


@pytest.mark.parametrize("killed_after, in_sum", [("share", False), ("input", True)])
def test_java_device_killed_mid_round(fleet, killed_after, in_sum):
    """Killed after its ShareKeys (its mask key s is rebuilt from its shares) or after its masked input (its
    self-mask seed b is rebuilt from its shares): either way the released sum is exact."""
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

    coordinator, endpoints, java, pending, m, _ = fleet

    def kill(phase, aggregator, replies):
        if phase == killed_after:
            java.kill()

    result = run_secure_round(endpoints, None, SecureRoundConfig(round_id=1, n_min=3), np.random.default_rng(0),
                              coordinator=coordinator, num_queries=m, adversary=kill)
    assert (java.device_id in result.survivors) is in_sum
    assert result.n_survivors == (4 if in_sum else 3)
    want_sum, want_sq = _expected(pending, result.survivors)
    np.testing.assert_array_equal(result.sum, want_sum)
    np.testing.assert_array_equal(result.sq_sum, want_sq)


def test_java_device_in_a_secagg_plus_round_with_noise(fleet):
    """SecAgg+ neighbour graph (degree 2) and distributed noise from every device, the Java one included: the
    noise is there (the sums are not the exact ones) and of the calibrated size."""
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

    coordinator, endpoints, java, pending, m, _ = fleet
    config = SecureRoundConfig(round_id=1, n_min=3, degree=2, sum_noise_scale=0.05, sq_sum_noise_scale=0.05)
    result = run_secure_round(endpoints, None, config, np.random.default_rng(1), coordinator=coordinator,
                              num_queries=m)
    assert result.n_survivors == 4
    want_sum, _ = _expected(pending, result.survivors)
    err = result.sum - want_sum
    assert np.count_nonzero(err) > m // 2
    # each coordinate carries at least DLap(b = 0.05): E|err| >= ~0.05; far below any wrap-around
    assert 0.02 < np.mean(np.abs(err)) < 0.5


def test_environment_contributions_in_a_round(fleet):
    """InitialStatesRequest: the Java device pends its initial-state, explore-law and place contribution, computed by
    the Java core from its days; the released sums equal the Python devices' plus the Python SDK's own
    contribution for the Java device's days (to the fixed-point quantum, since the Java floats may differ in
    the last bits before encoding)."""
    from pategail.sdk.bundle import load_bundle
    from pategail.sdk.epr import explore_law_contribution
    from pategail.sdk.features import infer_home
    from pategail.sdk.messages import Ack, InitialStatesRequest, from_bytes
    from pategail.sdk.places import place_contribution
    from pategail.sdk.secagg.fixedpoint import SCALE, encode
    from pategail.sdk.contribution import DAYS_CAP, initial_state_contribution
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

    coordinator, endpoints, java, _, _, python_devices = fleet
    request = InitialStatesRequest(4).to_bytes()
    pending = {}
    for dev in python_devices:
        assert isinstance(from_bytes(dev.handle(request)), Ack)
        pending[dev.device_id] = dev.pending
    ack = from_bytes(java.handle(request))
    env = load_bundle(VECTORS / "bundle").environment
    days = np.array(json.loads((VECTORS / "features.json").read_text())["days"])
    home = infer_home(days)
    python_view = np.concatenate([initial_state_contribution(days, home, len(env.cells)),
                                  explore_law_contribution(days, home, env.cells, alpha=env.alpha,
                                                           candidates=env.candidates),
                                  place_contribution(days, home, len(env.cells), DAYS_CAP)])
    assert isinstance(ack, Ack) and ack.n == len(python_view)
    result = run_secure_round(endpoints, None, SecureRoundConfig(round_id=1, n_min=3), np.random.default_rng(2),
                              coordinator=coordinator, num_queries=ack.n)
    assert result.n_survivors == 4
    want = sum(encode(p) for p in pending.values()) + encode(python_view)
    np.testing.assert_allclose(result.sum * SCALE, want, rtol=0, atol=1)
    # on the owner's ledger (the Python SDK's file) the noiseless upload counts as ε = ∞
    from pategail.sdk.secagg.ledger import PrivacyLedger

    assert json.loads((java.root / "privacy-ledger.json").read_text())["unbounded"] == 1
    assert PrivacyLedger(java.root / "privacy-ledger.json").epsilon() == float("inf")


def test_java_device_counts_other_participants_acks_toward_the_certificate(java_classpath, tmp_path, coordinator_key):
    """SecAgg+ at degree 4 among 12 devices: t = k/2 + 2 = 4, and a survivor set is certified by
    ⌊12/2⌋ + 1 = 7 signers, more than the Java device and its 4 neighbours. The Python aggregator relays other
    participants' acknowledgements too; the Java device counts them, unmasks, and the sum is exact."""
    from pategail.jvm_device import JavaDevice
    from pategail.sdk.secagg.fixedpoint import SCALE, encode
    from pategail.server.secagg.coordinator import SecAggCoordinator
    from pategail.server.secagg.round import SecureRoundConfig, enroll_clients, run_secure_round

    replay = tmp_path / "replay.json"
    replay.write_text('{"runtime": "1.19.2", "rounds": []}')
    coordinator = SecAggCoordinator(coordinator_key)
    with JavaDevice(java_classpath, tmp_path / "java", 1, replay, jvm_options=JVM_OPTIONS) as java:
        coordinator.enroll(1, java.public_keys)
        clients = [java, *enroll_clients(coordinator, list(range(2, 13)))]
        java.set_directory(signed_directory(coordinator, coordinator_key))
        rng = np.random.default_rng(3)
        values = rng.random((12, 8))
        unmasked = set()

        def watch(phase, aggregator, replies):
            if phase == "unmask":
                unmasked.update(replies)

        result = run_secure_round(clients, values, SecureRoundConfig(round_id=1, n_min=8, degree=4), rng,
                                  coordinator=coordinator, adversary=watch)
    assert 1 in unmasked                   # the Java device revealed its shares (it is no dropout at unmask)
    assert result.n_survivors == 12 and 1 in result.survivors
    np.testing.assert_array_equal(result.sum, sum(encode(v) for v in values) / SCALE)
    assert not result.stats.rejected
