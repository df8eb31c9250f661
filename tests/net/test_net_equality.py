"""Over the network, the same run: with noise off and the same seed, 6 devices in 2 processes
(`pategail emulate`) reaching the service over loopback end 2 rounds with exactly the policy of the
in-process run; and nothing a device process sent over HTTP holds a real day or a run of 3 real slots (the
device tests' leak detector, on every request body the service received)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from .conftest import ROOT, TINY, wait_for

N_DEVICES, ROUNDS, SEED = 6, 2, 0


def _leak_detector():
    spec = importlib.util.spec_from_file_location("device_federation_leaks",
                                                  ROOT / "tests" / "device" / "test_device_federation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_keys, module.find_runs


def _config():
    from pategail.server.config import TrainConfig
    return TrainConfig.from_dict({**TINY, "rounds": ROUNDS}, where="test")


def _in_process(dataset, run):
    from pategail.emulator import EmulatedFleet, choose_users
    from pategail.server.coordinator import Coordinator
    from pategail.training import ensure_initial_bundle

    config = _config()
    bundle = ensure_initial_bundle(config, dataset, SEED, run)
    fleet = EmulatedFleet(dataset, choose_users(dataset.users, N_DEVICES, SEED), run / "devices", bundle, seed=SEED)
    coordinator = Coordinator(config, fleet, dataset.cells, run, seed=SEED)
    coordinator.train()
    return coordinator


@pytest.mark.slow
def test_a_run_over_the_network_ends_with_the_in_process_policy(dataset, data_dir, tmp_path, processes):
    from aiohttp import web
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.emulator import choose_users
    from pategail.server.coordinator import Coordinator
    from pategail.server.net.fleet import NetworkFleet
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service
    from pategail.training import ensure_initial_bundle

    torch.set_num_threads(1)
    bodies: list[tuple[str, bytes]] = []

    class RecordingService(Service):
        """The service, recording every request body it receives (the wire, as the devices sent it)."""

        def app(self):
            app = super().app()

            @web.middleware
            async def record(request, handler):
                bodies.append((request.path, await request.read()))
                return await handler(request)
            app.middlewares.insert(0, record)
            return app

    config, run = _config(), tmp_path / "net"
    bundle = ensure_initial_bundle(config, dataset, SEED, run)
    key = Ed25519PrivateKey.generate()
    roster, hub, status = Roster(run), Hub(key.sign), RunStatus()
    service = RecordingService(roster, hub, key, bundle, status)
    port = service.start("127.0.0.1", 0)
    try:
        emulate = processes.start("emulate", "emulate", "--server", f"http://127.0.0.1:{port}", "--data",
                                  str(data_dir), "--devices", str(N_DEVICES), "--processes", "2", "--store",
                                  str(tmp_path / "devices"), "--seed", str(SEED))
        wait_for(lambda: len(roster) == N_DEVICES, 240, "6 devices to enrol", [emulate])
        devices = roster.freeze()
        from pategail.sdk.secagg.config import KeyDirectory
        service.fix_directory(KeyDirectory(service.coordinator_public, devices))
        network = Coordinator(config, NetworkFleet(devices, hub, deadline_s=240), dataset.cells, run, seed=SEED,
                              signing_key=key)
        network.train()
        status.update(phase="finished")
        hub.close()
        assert emulate.wait(timeout=120) == 0, emulate.log_path.read_text()[-3000:]
    finally:
        service.stop()

    local = _in_process(dataset, tmp_path / "local")
    for (name, a), b in zip(network.policy.state_dict().items(), local.policy.state_dict().values()):
        assert torch.equal(a, b), name
    net_journal, local_journal = network.releases.journal(), local.releases.journal()
    assert sorted(net_journal) == sorted(local_journal) == list(range(ROUNDS + 1))
    for r in net_journal:
        np.testing.assert_array_equal(net_journal[r].sum, local_journal[r].sum)
        assert net_journal[r].n_survivors == N_DEVICES
    # the devices held the users `train --devices 6` gives them, under the same ids
    users = choose_users(dataset.users, N_DEVICES, SEED)
    assert sorted(devices) == list(range(N_DEVICES))

    run_keys, find_runs = _leak_detector()
    keys = run_keys(np.concatenate([dataset.user_days(int(u)) for u in users]))
    paths = {p for p, _ in bodies}
    assert {"/v1/enrol", "/v1/poll", "/v1/reply", "/v1/directory"} <= paths
    sent = [(p, b) for p, b in bodies if b]
    assert len(sent) >= N_DEVICES * (1 + (ROUNDS + 1) * 6)      # enrolment, and per release 1 ack + 5 steps
    for path, body in sent:
        assert find_runs(body, keys) == [], (path, body[:16])
