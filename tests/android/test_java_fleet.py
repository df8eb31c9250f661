"""A mixed fleet in a served run: `pategail serve` on loopback with 6 Python SDK devices (the network client of
`pategail device`, as threads) and 4 Java devices (the Android core's network client, `NetDevice`, as JVM
processes) — 3 rounds without privacy, and one round (after the environment release) with the Laplace mechanism
and with the Gaussian mechanism (the default of `--epsilon`).

- Without privacy every release is exact: the released Σ x and Σ x² equal the fixed-point sums of what the
  surviving devices uploaded (each device keeps a copy of its plaintext uploads: the Java devices in
  ``uploads.jsonl`` of their store, the Python ones recorded by the test at the same point).
- A Java device killed while round 2's secure aggregation runs is a dropout (or answered before it died);
  restarted on its store it enrols again under its id and takes part in round 3.
- With the Laplace mechanism, the environment release's residual (released − exact) has the variance of the noise every
  device adds a share of, each share sized for n_min devices: 2·b² · n / n_min (a Java device that added
  none would leave 6/10 of it).
- With the Gaussian mechanism, the environment release (with its region sums) carries the distributed
  discrete-Gaussian noise of the plan, σ² · n / shares (each device's share sized for n_min − t honest
  devices), and every device's ledger — Java ones written by the Java core, in the Python SDK's format —
  holds the same releases; the ε each Java device reports for its own ledger is the Python ledger's to 1e-9.
- The run's report is written; the leak detector of the device tests finds no run of 3 real slots in any body
  the service received.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from .conftest import JAVA, ROOT, load_module

N_PYTHON, N_JAVA, ROUNDS = 6, 4, 3
"""Ten devices: one per user of the embedded data set."""
MIN_SURVIVORS = 0.75
MAIN = "org.pategail.core.tools.NetDevice"
NET = load_module("tests/net/conftest.py")


class Uploads:
    """What every Python device uploaded (masked), recorded where the Java device's client records it: the
    pending vector just before the "input" step, with the round of the request that made it."""

    def __init__(self, monkeypatch):
        from pategail.sdk.device import Device
        from pategail.sdk.messages import peek_round

        self.by_device: dict[int, dict[int, np.ndarray]] = {}
        lock = threading.Lock()
        handle, step = Device.handle, Device.secagg_step

        def handle_and_note(device, request):
            device._round_of_pending = peek_round(request)
            return handle(device, request)

        def step_and_record(device, directory, name, *frames):
            values = device.pending if name == "input" else None
            reply = step(device, directory, name, *frames)
            if values is not None:
                with lock:
                    self.by_device.setdefault(device.device_id, {})[device._round_of_pending] = values
            return reply
        monkeypatch.setattr(Device, "handle", handle_and_note)
        monkeypatch.setattr(Device, "secagg_step", step_and_record)

    def add_java(self, device_id: int, store: Path) -> None:
        path = store / "uploads.jsonl"
        for line in path.read_text().splitlines() if path.is_file() else []:
            try:
                entry = json.loads(line)
            except ValueError:               # a line cut short by the kill
                continue
            self.by_device.setdefault(device_id, {})[entry["round"]] = np.array(entry["values"])


def _fixed_sums(vectors: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Σ x and Σ x² as the secure aggregation sums them (fixed point, exact)."""
    from pategail.sdk.secagg.fixedpoint import clip_unit, decode, encode

    xs = [clip_unit(v) for v in vectors]
    return decode(sum(encode(x) for x in xs)), decode(sum(encode(x * x) for x in xs))


def _serve(run: Path, data_dir: Path, config: Path, privacy: list[str], bodies: list, monkeypatch,
           min_devices: int = N_PYTHON + N_JAVA):
    """`pategail serve` in a thread of this process, its service recording every request body it receives."""
    from aiohttp import web

    from pategail.cli import main
    from pategail.server.net import service

    app = service.Service.app

    def recording_app(self):
        application = app(self)

        @web.middleware
        async def record(request, handler):
            bodies.append((request.path, await request.read()))
            return await handler(request)
        application.middlewares.insert(0, record)
        return application
    monkeypatch.setattr(service.Service, "app", recording_app)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main([
        "-q", "serve", "--data", str(data_dir), "--out", str(run), "--config", str(config), *privacy,
        "--no-downstream", "--no-progress", "--min-devices", str(min_devices), "--open-enrolment",
        "--round-deadline", "10", "--port", "0"])), daemon=True)
    thread.start()
    return thread, codes


def _java(classpath: str, url: str, store: Path, csv: Path, device_id: int, *extra: str) -> subprocess.Popen:
    log = open(store.parent / f"{store.name}.log", "ab")
    proc = subprocess.Popen([*JAVA, "-Xss4m", "-cp", classpath, MAIN, "--server", url, "--store", str(store),
                             "--days", str(csv), "--device-id", str(device_id), "--seed", "0", "--keep-uploads",
                             "--give-up", "120", *extra], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    proc.log_path = store.parent / f"{store.name}.log"
    return proc


def _python(url: str, store: Path, days: np.ndarray, device_id: int):
    from pategail.sdk.net.client import DeviceClient, RetryPolicy

    client = DeviceClient(url, store, days=lambda: days, requested_id=device_id, seed=0,
                          retry=RetryPolicy(first_s=0.1, cap_s=2.0, give_up_s=120), poll_wait_s=5.0,
                          rng=np.random.default_rng(device_id))
    stop = threading.Event()
    thread = threading.Thread(target=client.run, args=(stop,), daemon=True)
    thread.start()
    return thread, stop


def _stop(javas, pythons) -> None:
    """Kill the Java device processes still running and stop the Python device threads."""
    for proc in javas:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for _, stop in pythons:
        stop.set()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    from pategail.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("fleet-data") / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    return out


def _check_laplace(run: Path, journal, uploads: Uploads, stores: dict[int, Path], logs: dict[int, Path],
                   rounds: int) -> None:
    """Each Java device's ledger holds its releases (the environment's, then one a round), and the ε it reports
    for it is the Python SDK's (PLD accountant); the environment residual has the noise every device adds a
    share of, 2·b² · n / n_min (~13,000 entries: the estimate is within ~2%)."""
    from pategail.sdk.accounting import laplace_vector_release, laplace_vector_sensitivity
    from pategail.sdk.secagg.ledger import PrivacyLedger
    from pategail.sdk.secagg.policy import DeclaredPlan

    env = journal[0]
    assert env.n_survivors == N_PYTHON + N_JAVA and env.sum_scale > 0
    l1 = json.loads((run / "checkpoint" / "releases" / "intent-00000-00.json").read_text())["env_l1_bound"]
    manifest = json.loads((run / "bundle-initial" / "manifest.json").read_text())
    plan = DeclaredPlan.from_manifest(manifest["privacy"])
    for store in stores.values():                             # each Java device's own record, the SDK's format
        releases = PrivacyLedger(store / "privacy-ledger.json").releases
        # the environment: one vector query at the released scales, as the Python ledger records it
        assert releases[0] == laplace_vector_release(env.sum_scale, env.sq_sum_scale,
                                                     laplace_vector_sensitivity(l1, env.sum.size))
        assert sum(r.count for r in releases[1:]) == sum(journal[r].sum.size for r in range(1, rounds + 1))
        # the plan it holds itself to, remembered as the Python device remembers it (and readable by it)
        assert DeclaredPlan.from_manifest(json.loads((store / "privacy-plan.json").read_text())) == plan
    for i, store in stores.items():
        python = PrivacyLedger(store / "privacy-ledger.json", plan.target_epsilon, plan.target_delta).epsilon()
        reported = re.search(r"ε = (\S+) at δ", logs[i].read_text())
        assert reported, logs[i].read_text()[-2000:]
        # ~900 queries: dp-accounting's own figure moves by ~5e-10 with its FFT's rounding (docs/java-device.md)
        assert abs(float(reported.group(1)) - python) <= 1e-8 * python, (reported.group(1), python, i)
    n_min = math.ceil(MIN_SURVIVORS * (N_PYTHON + N_JAVA))    # no colluders: shares sized for n_min devices
    s, _ = _fixed_sums([uploads.by_device[d][0] for d in range(N_PYTHON + N_JAVA)])
    ratio = np.var(env.sum - s) / (2 * env.sum_scale ** 2 * env.n_survivors / n_min)
    assert 0.9 < ratio < 1.1, (ratio, n_min)


def _check_gaussian(run: Path, journal, uploads: Uploads, stores: dict[int, Path], py_stores: list[Path],
                    logs: dict[int, Path]) -> None:
    """The environment residual has the planned discrete-Gaussian noise; every ledger holds the same releases;
    the ε a Java device reports is the Python ledger's."""
    from pategail.sdk.secagg.mechanisms import gaussian_input
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.fixedpoint import decode, encode_signed
    from pategail.sdk.secagg.ledger import PrivacyLedger
    from pategail.sdk.secagg.policy import DeclaredPlan

    env = journal[0]
    assert env.n_survivors == N_PYTHON + N_JAVA and env.sum_scale > 0
    intent = json.loads((run / "checkpoint" / "releases" / "intent-00000-00.json").read_text())
    assert intent["mechanism"] == "gaussian" and intent["block"] == 0
    vectors = [uploads.by_device[d][0] for d in range(N_PYTHON + N_JAVA)]
    cfg = RoundConfig(round_id=0, participants=(1,), num_queries=len(vectors[0]), n_min=1, threshold=1, degree=0,
                      sum_noise_scale=0.0, sq_sum_noise_scale=0.0, round_seed=bytes(32), envelope_public=bytes(32),
                      mechanism="gaussian", clip_norm=intent["clip_norm"])
    exact = decode(sum(encode_signed(gaussian_input(v, cfg)) for v in vectors))
    ratio = np.var(env.sum - exact) / (env.sum_scale ** 2 * env.n_survivors / intent["shares"])
    assert 0.9 < ratio < 1.1, (ratio, intent)        # a Java device adding no share would leave 6/10 of it
    manifest = json.loads((run / "bundle-initial" / "manifest.json").read_text())
    plan = DeclaredPlan.from_manifest(manifest["privacy"])
    assert plan.mechanism == "gaussian"
    ledgers = {i: PrivacyLedger(store / "privacy-ledger.json", plan.target_epsilon, plan.target_delta)
               for i, store in stores.items()}
    (python_path,) = {p for p in py_stores[0].rglob("privacy-ledger.json")}
    python = PrivacyLedger(python_path, plan.target_epsilon, plan.target_delta)
    assert len(python.releases) >= 2 and all(r.count >= 1 for r in python.releases)
    for i, ledger in ledgers.items():
        assert ledger.releases == python.releases, i
        reported = re.search(r"ε = (\S+) at δ", logs[i].read_text())
        assert reported, logs[i].read_text()[-2000:]
        assert abs(float(reported.group(1)) - python.epsilon()) <= 1e-9 * python.epsilon(), (reported, i)
    assert python.epsilon() <= plan.target_epsilon


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", [None, "laplace", "gaussian"], ids=["no-privacy", "laplace", "gaussian"])
def test_python_and_java_devices_in_one_served_run(mechanism, java_device_classpath, data_dir, tmp_path,
                                                   monkeypatch):
    from pategail.data.dataset import load_dataset
    from pategail.emulator import choose_users
    from pategail.sdk.synthetic import write_synthetic_csv
    from pategail.server.checkpoint import read_journal

    dataset = load_dataset(data_dir)
    users = choose_users(dataset.users, N_PYTHON + N_JAVA, 0)
    private = mechanism is not None
    rounds = 1 if private else ROUNDS       # a private run's checks are on its releases, not on a dropout
    config = NET.tiny_config(tmp_path / "tiny.json", rounds=rounds, secagg={"min_survivors": MIN_SURVIVORS})
    privacy = {None: ["--no-privacy"], "laplace": ["--epsilon", "50", "--mechanism", "laplace", "--data-derived-cells"],
               "gaussian": ["--epsilon", "50", "--data-derived-cells"]}[mechanism]
    run, bodies = tmp_path / "run", []
    uploads = Uploads(monkeypatch)
    serve, codes = _serve(run, data_dir, config, privacy, bodies, monkeypatch)
    url = NET.wait_for(lambda: NET.service_url(run), 120, "the service to listen")

    pythons = [_python(url, tmp_path / f"py-{i}", dataset.user_days(int(users[i])), i) for i in range(N_PYTHON)]
    javas, stores = {}, {}
    for i in range(N_PYTHON, N_PYTHON + N_JAVA):
        stores[i] = tmp_path / f"java-{i}"
        stores[i].mkdir()
        csv = tmp_path / f"java-{i}.csv"
        write_synthetic_csv(csv, dataset.user_days(int(users[i])), dataset.cells)
        javas[i] = _java(java_device_classpath, url, stores[i], csv, i)
    try:
        killed = N_PYTHON
        if not private:
            # kill one Java device as round 2's secure aggregation starts; restart it on its store at once
            releases = run / "checkpoint" / "releases"
            NET.wait_for(lambda: (releases / "intent-00002-00.json").exists() or not serve.is_alive(), 300,
                         "round 2's secure aggregation", list(javas.values()))
            javas[killed].kill()
            javas[killed].wait()
            javas[killed] = _java(java_device_classpath, url, stores[killed], tmp_path / f"java-{killed}.csv", killed)
        serve.join(timeout=400)
        assert not serve.is_alive() and codes == [0], (run / "train.log").read_text()[-3000:]
        for i, proc in javas.items():
            assert proc.wait(timeout=60) == 0, proc.log_path.read_text()[-3000:]
            assert "the run is over" in proc.log_path.read_text()
        for thread, _ in pythons:
            thread.join(timeout=60)
    finally:
        _stop(javas.values(), pythons)

    journal = read_journal(run / "checkpoint")
    assert sorted(journal) == list(range(rounds + 1))
    for i, store in stores.items():
        uploads.add_java(i, store)
    if not private:
        for r, release in journal.items():
            survivors = [d for d, rounds in uploads.by_device.items() if r in rounds]
            if len(survivors) > release.n_survivors:            # the killed device recorded, then died
                survivors.remove(killed)
            assert len(survivors) == release.n_survivors
            assert sum(d >= N_PYTHON for d in survivors) >= (N_JAVA - 1 if r == 2 else N_JAVA)
            s, sq = _fixed_sums([uploads.by_device[d][r] for d in survivors])
            np.testing.assert_array_equal(release.sum, s)
            np.testing.assert_array_equal(release.sq_sum, sq)
        assert journal[3].n_survivors == N_PYTHON + N_JAVA        # the restarted Java device is back
    elif mechanism == "laplace":
        _check_laplace(run, journal, uploads, stores, {i: proc.log_path for i, proc in javas.items()}, rounds)
    else:
        _check_gaussian(run, journal, uploads, stores, [tmp_path / f"py-{i}" for i in range(N_PYTHON)],
                        {i: proc.log_path for i, proc in javas.items()})
    report = json.loads((run / "report.json").read_text())
    assert report["training"]["rounds"] == rounds

    leaks = load_module("tests/device/test_device_federation.py")
    keys = leaks.run_keys(np.concatenate([dataset.user_days(int(u)) for u in users]))
    paths = {p for p, _ in bodies}
    assert {"/v1/enrol", "/v1/poll", "/v1/reply", "/v1/directory"} <= paths
    sent = [(p, b) for p, b in bodies if b]
    assert len(sent) >= (N_PYTHON + N_JAVA) * (1 + (rounds + 1) * 6)
    for path, body in sent:
        assert leaks.find_runs(body, keys) == [], (path, body[:16])
