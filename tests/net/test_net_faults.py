"""Faults of a real network, with `pategail serve` and five `pategail device` processes on loopback:

- one device process in five (20%) killed while round 1's secure aggregation runs: the round completes
  without it (a dropout, or left out of the round) — or would abort below n_min, releasing nothing;
- that device restarted on its store: it enrols again under its id and takes part in the next round;
- the service killed right after round 2's release was journalled, restarted with --resume on the same port:
  the devices reconnect (backoff), the run finishes, and every release was spent exactly once.
"""
from __future__ import annotations

import json
import time

import pytest

from .conftest import service_url, status, tiny_config, wait_for

N_DEVICES = 5


@pytest.mark.slow
def test_device_and_service_killed_mid_round(data_dir, dataset, tmp_path, processes):
    from pategail.emulator import choose_users
    from pategail.server.checkpoint import read_intents, read_journal

    run = tmp_path / "run"
    config = tiny_config(tmp_path / "tiny.json", rounds=3, secagg={"min_survivors": 0.6})
    serve_args = ["serve", "--data", str(data_dir), "--out", str(run), "--epsilon", "50", "--data-derived-cells",
                  "--config", str(config),
                  "--no-downstream", "--no-progress", "--min-devices", str(N_DEVICES), "--round-deadline", "10"]
    serve = processes.start("serve", *serve_args, "--port", "0")
    url = wait_for(lambda: service_url(run), 120, "the service to listen", [serve])
    port = url.rsplit(":", 1)[1]
    users = choose_users(dataset.users, N_DEVICES, 0)
    tokens = (run / "enrol-tokens.txt").read_text().split()            # issued by serve, one per device
    assert len(tokens) == N_DEVICES

    def device(i):
        return processes.start(f"device-{i}", "device", "--server", url, "--store", str(tmp_path / f"device-{i}"),
                               "--data", str(data_dir), "--user", str(int(users[i])), "--device-id", str(i),
                               "--token", tokens[i])
    devices = [device(i) for i in range(N_DEVICES)]
    wait_for(lambda: (status(url) or {}).get("phase") == "training", 240, "training to start", [serve, *devices])

    releases = run / "checkpoint" / "releases"
    # 1. kill one device process in five as round 1's secure aggregation starts (its intent is journalled)
    end = time.monotonic() + 300
    while not (releases / "intent-00001-00.json").exists():
        assert time.monotonic() < end and serve.poll() is None, serve.log_path.read_text()[-3000:]
        time.sleep(0.01)
    processes.kill(devices[4])
    # 2. restart it on its store at once: it must be back for round 2
    devices[4] = device(4)
    wait_for(lambda: 1 in read_journal(run / "checkpoint"), 240, "round 1's release", [serve])
    round1 = read_journal(run / "checkpoint")[1]
    assert 3 <= round1.n_survivors <= N_DEVICES          # n_min = ceil(0.6 · 5) = 3

    # 3. kill the service right after round 2's release is journalled; resume it on the same port
    wait_for(lambda: (releases / "round-00002.npz").exists(), 300, "round 2's release", [serve])
    processes.kill(serve)
    during = read_journal(run / "checkpoint")
    counted_at_kill = [i["round"] for i in read_intents(run / "checkpoint")]
    assert during[2].n_survivors == N_DEVICES            # the restarted device took part in round 2
    serve = processes.start("serve-resumed", *serve_args, "--port", port, "--resume")
    # the resumed service reports where the run is, and the privacy spent before the restart
    resumed = wait_for(lambda: (lambda s: s if s and s.get("phase") in ("training", "finished") else None)(
        status(url)), 240, "the resumed service", [serve])
    assert resumed["round"] >= 1 and resumed["epsilon"] > 0 and resumed["participants"] is not None, resumed
    token = (run / "operator.token").read_text().strip()
    devices_seen = _operator_get(url + "/devices", token)
    assert sorted(d["id"] for d in json.loads(devices_seen)["devices"]) == list(range(N_DEVICES))
    assert "pategail_epsilon_spent" in _operator_get(url + "/metrics", token).decode()
    assert serve.wait(timeout=400) == 0, serve.log_path.read_text()[-3000:]
    for d in devices:
        assert d.wait(timeout=120) == 0, d.log_path.read_text()[-2000:]

    journal = read_journal(run / "checkpoint")
    assert sorted(journal) == [0, 1, 2, 3]
    for r in (0, 1, 2):
        assert journal[r].n_survivors == during[r].n_survivors     # re-used after the restart, not asked again
    # privacy spent exactly once: the intents counted before the kill (round 3's too when its secure round had
    # started: it may have released) and one for round 3 after the restart; none for the re-used rounds
    intents = read_intents(run / "checkpoint")
    assert sorted(i["round"] for i in intents) == sorted(counted_at_kill + [3])
    assert sorted(set(counted_at_kill)) in ([0, 1, 2], [0, 1, 2, 3])
    assert not list(releases.glob("aborted-*"))
    report = json.loads((run / "report.json").read_text())
    assert report["training"]["rounds"] == 3
    assert 0 < report["privacy"]["epsilon_total"] <= 50.0
    log = (run / "train.log").read_text()
    assert "resumed" in log and "training starts with 5 devices" in log
    # what the operator saw (the terminal's lines are in the log too): enrolment, the check, the first release
    for line in ("waiting for devices: 5 of 5 enrolled", "checking that the 5 enrolled devices answer",
                 "secure aggregation: 5 of 5 devices took part (the initial states)"):
        assert line in log, line
    if round1.n_survivors < N_DEVICES:    # the killed device was a dropout of round 1: said either way it went
        # (unless its restart answered round 1 in time: a race) — silent, or back without the round's secrets
        assert "did not answer" in log or "device(s) gave up" in log


def _operator_get(url: str, token: str) -> bytes:
    import urllib.request
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}),
                                timeout=10) as r:
        return r.read()
