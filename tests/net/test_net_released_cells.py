"""`pategail serve --cells released`: devices over the network enrol on the public map's bundle, release their
visited squares through the secure aggregation, are ordered to install the bundle on the released table (the
service serves it from then on) and train on it; a device that restarts enrols again onto that bundle."""
from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import ROOT, service_url, status, tiny_config, wait_for

N_DEVICES, EPSILON = 10, 1000.0     # the embedded data's 10 users: at this ε about 70 squares clear the threshold


@pytest.fixture(scope="module")
def public_data(tmp_path_factory):
    from pategail.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("net-public") / "public"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True, bbox=(39.7, 116.1, 40.1, 116.6),
                    cell_deg=0.02, public_cells=True)
    return out


@pytest.mark.slow
def test_a_served_run_releases_its_table_and_moves_its_devices_onto_it(public_data, tmp_path, processes):
    from pategail.sdk.bundle import load_bundle
    from pategail.sdk.cell_universe import release_mapping
    from pategail.sdk.device import Device
    from pategail.server.cell_table import CELL_TABLE_ROUND

    run = tmp_path / "run"
    config = tiny_config(tmp_path / "tiny.json", rounds=1)
    serve = processes.start("serve", "serve", "--data", str(public_data), "--out", str(run), "--epsilon", str(EPSILON),
                            "--cells", "released", "--config", str(config), "--no-downstream", "--no-progress",
                            "--min-devices", str(N_DEVICES), "--round-deadline", "60", "--port", "0")
    url = wait_for(lambda: service_url(run), 120, "the service to listen", [serve])
    emulate = processes.start("emulate", "emulate", "--server", url, "--data", str(public_data), "--processes", "2",
                              "--store", str(tmp_path / "devices"), "--tokens", str(run / "enrol-tokens.txt"))
    assert serve.wait(timeout=400) == 0, serve.log_path.read_text()[-3000:]
    assert emulate.wait(timeout=120) == 0, emulate.log_path.read_text()[-3000:]
    assert (status(url) or {}).get("phase") in (None, "finished")

    released = np.asarray(json.loads((run / "cell-table.json").read_text())["released"])
    universe = load_bundle(run / "bundle-public-map").environment.cells
    table = load_bundle(run / "bundle-initial")
    np.testing.assert_array_equal(table.environment.cells, universe[released])
    journal = json.loads((run / "checkpoint" / "releases" / f"intent-{CELL_TABLE_ROUND:05d}-00.json").read_text())
    assert journal["cells"] is True
    stores = sorted((tmp_path / "devices").glob("device-*"))
    assert len(stores) == N_DEVICES
    mapping = release_mapping(universe, released)
    for store in stores:                      # every device took the released table's bundle and read its days
        device = Device(store, 0, rng=np.random.default_rng(0))       # through it; its store stays on the map
        assert device.bundle.sha256 == table.sha256
        np.testing.assert_array_equal(device.days(), mapping[device.store.days()])
    log = serve.log_path.read_text() + (run / "train.log").read_text()
    assert f"{N_DEVICES} of {N_DEVICES} devices installed it" in log
