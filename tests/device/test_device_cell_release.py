"""SDK devices in a run that releases its cell table (`pategail train --fleet sdk --cells released`): each
device answers the CellReleaseRequest with its visited squares of the public map, held to the cell-release
floor its bundle on the public map declares (and to nothing else under that bundle), records the release in its
own ledger, and after the release uses its days moved onto the released table — which the bundle carries, with
the public map it was chosen from, while the store keeps the days on the public map."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from pategail.sdk.bundle import load_bundle
from pategail.sdk.cell_universe import release_mapping, remap_days, visited_vector
from pategail.sdk.device import Device
from pategail.sdk.errors import BundleError
from pategail.sdk.features import infer_home
from pategail.sdk.messages import CellReleaseRequest, ErrorReply, from_bytes
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.sdk.accounting import gaussian_sensitivity
from pategail.server.cell_table import CELL_TABLE_ROUND

BBOX = (39.7, 116.1, 40.1, 116.6)
TINY = {"rounds": 2, "days_per_round": 4, "discriminator": {"steps": 2, "batch_size": 16},
        "environment": {"candidates": 50}, "policy": {"d_model": 16, "n_layers": 1}, "average_rounds": 1,
        "ppo": {"n_epochs": 1, "batch_size": 2}}
EPSILON, MAX_CELLS = 1000.0, 32    # the data set's 10 users: at this ε about 70 squares clear the threshold


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.conftest import DEFAULT_DATA
    if not DEFAULT_DATA.is_dir():
        pytest.skip(f"embedded development data not found at {DEFAULT_DATA}")
    root = tmp_path_factory.mktemp("sdk-released-cells")
    prepare_dataset("pategail", DEFAULT_DATA, root / "public", allow_pickle=True, bbox=BBOX, cell_deg=0.02,
                    public_cells=True)
    (root / "tiny.json").write_text(json.dumps(TINY))
    out = root / "run"
    assert main(["-q", "train", "--data", str(root / "public"), "--out", str(out), "--epsilon", str(EPSILON),
                 "--cells", "released", "--config", str(root / "tiny.json"), "--fleet", "sdk", "--no-downstream",
                 "--no-progress"]) == 0
    return out, load_dataset(root / "public")


def _released(out) -> np.ndarray:
    return np.asarray(json.loads((out / "cell-table.json").read_text())["released"])


def _device(tmp_path, days, bundle_dir, device_id=0) -> Device:
    device = Device(tmp_path / f"device-{device_id}", device_id, rng=np.random.default_rng(device_id))
    device.install_bundle(bundle_dir)
    device.add_days(days)
    return device


def test_sdk_devices_release_their_squares_and_train_on_the_released_table(run):
    out, universe = run
    released = _released(out)
    mapping = release_mapping(universe.cells, released)
    assert 0 < len(released) < universe.n_cells
    for name in ("bundle-initial", "bundle"):          # the bundles of the run carry the map they were chosen from
        env = load_bundle(out / name).environment
        np.testing.assert_array_equal(env.cells, universe.cells[released])
        np.testing.assert_array_equal(env.universe, universe.cells)
        np.testing.assert_array_equal(env.table, mapping)
    public = load_bundle(out / "bundle-public-map")
    assert public.environment.universe is None and len(public.environment.cells) == universe.n_cells
    declared = public.privacy
    assert declared.noise_multiplier == declared.env_noise_multiplier == 0.0 and declared.cells_noise_multiplier > 0
    assert load_bundle(out / "bundle-initial").privacy.cells_noise_multiplier == declared.cells_noise_multiplier
    intents = [json.loads(p.read_text()) for p in sorted((out / "checkpoint" / "releases").glob("intent-*.json"))]
    cells = [i for i in intents if i["round"] == CELL_TABLE_ROUND]
    assert len(cells) == 1 and cells[0]["count"] == universe.n_cells
    # the release's noise multiplier is the one the public map's bundle declared, the floor the devices held to
    assert cells[0]["sum_scale"] / gaussian_sensitivity(cells[0]["clip_norm"], universe.n_cells) == \
        pytest.approx(declared.cells_noise_multiplier, rel=1e-9)
    for device_dir in sorted((out / "devices").iterdir())[:5]:
        device = Device(device_dir, 0, rng=np.random.default_rng(0))
        stored = device.store.days()
        assert stored.max() >= len(released) or (mapping[stored] != stored).any()    # still on the public map
        np.testing.assert_array_equal(device.days(), remap_days(stored, mapping))
        assert device.home == infer_home(remap_days(stored, mapping))
        ledger = PrivacyLedger(device_dir / "privacy-ledger.json", None)
        first = ledger.releases[0]        # the cell table, then the environment and the rounds it took part in
        assert first.noise_multiplier == pytest.approx(declared.cells_noise_multiplier, rel=1e-9)
        assert len(ledger.releases) >= 2


def test_a_device_marks_its_most_visited_squares_under_the_public_maps_bundle(run, dataset, tmp_path):
    out, universe = run
    days = universe.user_days(int(universe.users[0]))
    device = _device(tmp_path, days, out / "bundle-public-map")
    reply = from_bytes(device.handle(CellReleaseRequest(CELL_TABLE_ROUND, 5).to_bytes()))
    assert reply.kind == "cell_release_request" and reply.n == universe.n_cells
    np.testing.assert_array_equal(device.pending, visited_vector(days, universe.n_cells, 5))
    assert device.pending.sum() == 5


@pytest.mark.parametrize("bundle, code, words", [
    ("bundle-initial", "incompatible", "already on a released cell table"),
    ("no-plan", "budget", "declares no cell-table release"),
])
def test_a_device_refuses_the_request_where_it_cannot_be_made_safely(run, tmp_path, bundle, code, words):
    out, universe = run
    days = universe.user_days(int(universe.users[0]))
    if bundle == "no-plan":      # the public map's bundle without its privacy section: a run that planned no noise
        plain = tmp_path / "plain"
        shutil.copytree(out / "bundle-public-map", plain)
        manifest = json.loads((plain / "manifest.json").read_text())
        del manifest["privacy"]
        (plain / "manifest.json").write_text(json.dumps(manifest))
        device = _device(tmp_path, days, plain)
    else:
        device = _device(tmp_path, days, out / "bundle-public-map")
        device.install_bundle(out / bundle)
    reply = from_bytes(device.handle(CellReleaseRequest(CELL_TABLE_ROUND, MAX_CELLS).to_bytes()))
    assert isinstance(reply, ErrorReply) and reply.code == code and words in reply.message
    assert device.pending is None


def _round(sigma: float, universe: int, **kw) -> RoundConfig:
    args = dict(round_id=CELL_TABLE_ROUND << 16, participants=(1, 2, 3), num_queries=universe, n_min=3, threshold=2,
                degree=0, sum_noise_scale=sigma, sq_sum_noise_scale=0.0, round_seed=b"s" * 32,
                envelope_public=b"e" * 32, mechanism="gaussian", block=0, clip_norm=math.sqrt(MAX_CELLS)) | kw
    return RoundConfig(**args)


def test_the_declared_floor_holds_the_cell_round_and_no_other_round_is_taken_before_the_table(run):
    out, universe = run
    plan = load_bundle(out / "bundle-public-map").privacy
    policy = plan.policy()
    at_floor = plan.cells_noise_multiplier * gaussian_sensitivity(math.sqrt(MAX_CELLS), universe.n_cells)
    policy.check(_round(at_floor, universe.n_cells), cells=True)                  # the planned release
    with pytest.raises(RoundRefused, match="cell-table noise multiplier"):
        policy.check(_round(at_floor * 0.99, universe.n_cells), cells=True)
    with pytest.raises(RoundRefused, match="cell-table noise multiplier"):        # a larger clip at the same σ
        policy.check(_round(at_floor, universe.n_cells, clip_norm=math.sqrt(2 * MAX_CELLS)), cells=True)
    # under the public map's bundle nothing but the cell release is planned: a reward or environment round is
    # refused whatever its noise
    for environment in (False, True):
        with pytest.raises(RoundRefused, match="plans no (reward|environment) release"):
            policy.check(_round(at_floor * 100, universe.n_cells), environment=environment)
    # the run's plan (the released table's bundle) keeps the floor; a plan without a cell release refuses it
    run_plan = load_bundle(out / "bundle-initial").privacy
    run_plan.policy().check(_round(at_floor, universe.n_cells), cells=True)
    from dataclasses import replace
    with pytest.raises(RoundRefused, match="plans no cell-table release"):
        replace(run_plan, cells_noise_multiplier=0.0).policy().check(_round(at_floor, universe.n_cells), cells=True)
    with pytest.raises(RoundRefused, match="Gaussian mechanism only"):
        from pategail.sdk.secagg.policy import DevicePolicy
        DevicePolicy(mechanism="laplace").check(_round(0.0, universe.n_cells, mechanism="laplace", block=0,
                                                       clip_norm=0.0, sq_sum_noise_scale=0.0), cells=True)


def test_the_released_tables_bundle_is_taken_over_days_on_its_public_map_only(run, tmp_path):
    out, universe = run
    days = universe.user_days(int(universe.users[1]))
    device = _device(tmp_path, days, out / "bundle-public-map")
    device.install_bundle(out / "bundle-initial")
    mapping = release_mapping(universe.cells, _released(out))
    np.testing.assert_array_equal(device.days(), mapping[days])
    assert device.n_cells == len(_released(out))
    device.add_days(days[:1])                    # the app keeps recording on the public map
    assert len(device.store) == len(days) + 1 and device.days()[-1].tolist() == mapping[days[0]].tolist()
    # a bundle on other cells than the public map would read the stored days wrong: refused, nothing changed
    other = tmp_path / "other"
    shutil.copytree(out / "bundle-initial", other)
    manifest = json.loads((other / "manifest.json").read_text())
    del manifest["environment"]["universe"], manifest["environment"]["n_universe"]
    del manifest["files"]["universe.csv"]
    (other / "universe.csv").unlink()
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="not the public map of the released table"):
        device.install_bundle(other)
    assert device.bundle.sha256 == load_bundle(out / "bundle-initial").sha256
    # back on the public map itself: its days are read as they are stored
    device.install_bundle(out / "bundle-public-map")
    np.testing.assert_array_equal(device.days(), device.store.days())


def test_a_bundle_whose_map_does_not_hold_its_table_is_refused(run, tmp_path):
    out, _ = run
    broken = tmp_path / "broken"
    shutil.copytree(out / "bundle-initial", broken)
    lines = (broken / "universe.csv").read_text().splitlines()
    square, lat, lon, cell = lines[1 + int(_released(out)[0])].split(",")
    lines[1 + int(square)] = f"{square},{float(lat) + 0.001!r},{lon},{cell}"      # the released square moved
    (broken / "universe.csv").write_text("\n".join(lines) + "\n")
    from pategail.sdk.bundle import sha256_file
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["files"]["universe.csv"] = {"sha256": sha256_file(broken / "universe.csv"),
                                         "bytes": (broken / "universe.csv").stat().st_size}
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="no square of the public map that moves to itself"):
        load_bundle(broken)


def test_a_table_released_from_another_map_is_refused(run, dataset, bundle_dir, tmp_path):
    out, _ = run
    device = _device(tmp_path, dataset.user_days(int(dataset.users[0])), bundle_dir)   # days on another table
    with pytest.raises(BundleError, match="released from a public map other than the stored days"):
        device.install_bundle(out / "bundle-initial")
    assert device.bundle.sha256 == load_bundle(bundle_dir).sha256


def test_too_small_a_released_table_is_refused_in_one_line(run, tmp_path, capsys):
    out, _ = run
    public = out.parent / "public"
    code = main(["-q", "train", "--data", str(public), "--out", str(tmp_path / "few"), "--epsilon", "50",
                 "--cells", "released", "--config", str(out.parent / "tiny.json"), "--fleet", "sdk",
                 "--no-downstream", "--no-progress"])           # at ε = 50 its 10 users clear a handful
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "a table needs more than a day's 48 slots" in err[0]


def test_under_the_public_maps_plan_other_requests_are_refused_before_anything_is_prepared(
        make_device, bundle_dir, round_request, tmp_path):
    """A bundle on the public map plans the cell-table release alone: the environment and reward requests are
    refused with ErrorReply ``budget`` (no noise is planned for them), the cell request is answered."""
    from pategail.sdk.messages import InitialStatesRequest
    from pategail.sdk.secagg.policy import DeclaredPlan

    plan = DeclaredPlan(EPSILON, 1e-5, 0.0, 0.0, 0.6, mechanism="gaussian", cells_noise_multiplier=1.2)
    public = tmp_path / "public-map"
    shutil.copytree(bundle_dir, public)
    manifest = json.loads((public / "manifest.json").read_text())
    (public / "manifest.json").write_text(json.dumps(manifest | {"privacy": plan.to_manifest()}))
    device = make_device(install=False)
    device.install_bundle(public)
    for request, kind in ((InitialStatesRequest(4), "environment"), (round_request, "reward")):
        reply = from_bytes(device.handle(request.to_bytes()))
        assert isinstance(reply, ErrorReply) and reply.code == "budget", reply
        assert reply.message == f"round {request.round}: the privacy plan in force plans no {kind} release; refused"
        assert device.pending is None
    reply = from_bytes(device.handle(CellReleaseRequest(4, MAX_CELLS).to_bytes()))
    assert reply.kind == "cell_release_request" and device.pending.sum() == MAX_CELLS
