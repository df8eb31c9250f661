"""A Java device (the Android demo's core, in its own process) takes part in a run's cell-table release next to
Python SDK devices: under the public map's bundle (a plan declaring the cell release alone) each answers the
CellReleaseRequest with its visited vector, and a real Gaussian secure round at the plan's floor releases their
sum with the planned noise — the Java device's share included — and puts the release on every ledger."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from .conftest import JVM_OPTIONS, VECTORS
from .test_java_device_round import signed_directory

N_MIN, COLLUDERS = 3, 1


@pytest.fixture
def public_map(tmp_path):
    """The committed bundle with the public map's plan (the manifest of cells.json's "public_map" bundle)."""
    spec = json.loads((VECTORS / "cells.json").read_text())["device"]
    out = tmp_path / "public-map"
    shutil.copytree(VECTORS / "bundle", out)
    (out / "manifest.json").write_text(spec["bundles"]["public_map"]["manifest"], encoding="utf-8")
    return out, spec


def test_java_device_in_a_python_cell_release_round(tmp_path, java_classpath, dataset, public_map):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.jvm_device import JavaDevice
    from pategail.sdk.accounting import gaussian_sensitivity
    from pategail.sdk.cell_universe import visited_vector
    from pategail.sdk.device import Device
    from pategail.sdk.messages import Ack, CellReleaseRequest, from_bytes
    from pategail.sdk.secagg.ledger import PrivacyLedger
    from pategail.server.secagg.config import SecureRoundConfig
    from pategail.server.secagg.coordinator import SecAggCoordinator
    from pategail.server.secagg.round import run_secure_round

    bundle, spec = public_map
    max_cells, n = spec["max_cells"], len(dataset.cells)
    request = CellReleaseRequest(spec["round"], max_cells).to_bytes()
    key = Ed25519PrivateKey.generate()
    coordinator = SecAggCoordinator(key)
    visited, endpoints, roots = {}, [], {}
    for i, user in enumerate(dataset.users[4:7]):
        dev = Device(tmp_path / f"py-{i}", 10 + i, rng=np.random.default_rng(i))
        dev.install_bundle(bundle)
        dev.add_days(dataset.user_days(user))
        assert isinstance(from_bytes(dev.handle(request)), Ack)
        visited[dev.device_id], roots[dev.device_id] = dev.pending, dev.root
        coordinator.enroll(dev.device_id, dev.public_keys)
        endpoints.append(dev)
    days = np.array(json.loads((VECTORS / "features.json").read_text())["days"])
    with JavaDevice(java_classpath, tmp_path / "java", 20, VECTORS / "device.json", jvm_options=JVM_OPTIONS) as java:
        assert java.install_bundle(bundle) == endpoints[0].bundle.sha256
        java.add_days(days)
        assert java.handle(request).hex() == spec["answers"]["release"]["reply"]
        visited[java.device_id], roots[java.device_id] = visited_vector(days, n, max_cells), java.root
        coordinator.enroll(java.device_id, java.public_keys)
        java.set_directory(signed_directory(coordinator, key))
        endpoints = [d.secagg_endpoint(coordinator.directory) for d in endpoints] + [java]
        clip = math.sqrt(max_cells)
        sigma = spec["plans"]["public_map"]["cells_noise_multiplier"] * gaussian_sensitivity(clip, n)
        cfg = SecureRoundConfig(round_id=spec["round"] << 16, n_min=N_MIN, colluders=COLLUDERS, mechanism="gaussian",
                                block=0, clip_norm=clip, sum_noise_scale=sigma)
        result = run_secure_round(endpoints, None, cfg, np.random.default_rng(0), coordinator=coordinator,
                                  num_queries=n)
    assert result.n_survivors == 4 and java.device_id in result.survivors and not result.stats.rejected
    # the marks, plus the noise every device adds a share of: σ² · 4 / (n_min − t) in all (a Java device that
    # added none would leave 3/4 of it)
    residual = result.sum - sum(visited.values())
    assert abs(residual.mean()) < 0.1 * sigma
    assert residual.var() == pytest.approx(sigma ** 2 * 4 / (N_MIN - COLLUDERS), rel=0.1)
    for device_id, root in roots.items():     # on every ledger (the Python SDK's file): the release at the floor
        (release,) = PrivacyLedger(root / "privacy-ledger.json").releases
        assert release.noise_multiplier == pytest.approx(1.2, rel=1e-9), device_id
