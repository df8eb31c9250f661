"""Fixtures of the device tests (the prepared embedded data set, ``dataset``, is the root conftest's): one
model bundle exported on its cell table (with released initial states), a batch of generated days, and a
factory of devices holding real users' days."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest



def _export(out: Path, dataset, seed: int, initial_states: bool = True, training_config=None) -> Path:
    import torch

    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
    from pategail.server.policy import Policy, PolicyConfig

    states = weights = None
    if initial_states:
        # a stand-in for the released distribution: each user's (home, first cell) pairs, equal weights
        from pategail.sdk.features import infer_home
        rows = {(infer_home(dataset.user_days(u)), int(d[0])) for u in dataset.users for d in dataset.user_days(u)}
        states = np.array(sorted(rows), dtype=np.int64)
        weights = np.ones(len(states))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy, discriminator = Policy(PolicyConfig(n_cells=dataset.n_cells)), Discriminator()
    env = Environment(cells=dataset.cells, alpha=DEFAULT_ALPHA, candidates=DEFAULT_CANDIDATES,
                      initial_states=states, initial_weights=weights)
    if training_config is None:
        return export_bundle(policy, discriminator, out, environment=env)
    return export_bundle(policy, discriminator, out, environment=env, training_config=training_config)


@pytest.fixture(scope="session")
def bundle_dir(tmp_path_factory, dataset) -> Path:
    """A runnable bundle on the data set's cells (read-only: tests copy it into their devices)."""
    return _export(tmp_path_factory.mktemp("device-bundle") / "bundle", dataset, seed=0)


@pytest.fixture(scope="session")
def other_bundle_dir(tmp_path_factory, dataset) -> Path:
    """Another bundle (other initial weights, no initial states): its checkpoints do not belong to bundle_dir."""
    return _export(tmp_path_factory.mktemp("device-bundle-2") / "bundle", dataset, seed=1, initial_states=False)


@pytest.fixture(scope="session")
def bundle(bundle_dir):
    from pategail.sdk.bundle import load_bundle

    return load_bundle(bundle_dir)


@pytest.fixture(scope="session")
def generated(bundle, dataset):
    """What the coordinator sends in a RoundRequest: 12 days generated with the bundle's policy (as the
    coordinator samples them: released initial states, the SDK's generate_days)."""
    from pategail.sdk.bundle import open_policy_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days

    env = bundle.environment
    rng = np.random.default_rng(42)
    rows = env.initial_states[rng.choice(len(env.initial_states), 12)]
    g = generate_days(open_policy_session(bundle), CellGeometry.build(env.cells, env.candidates), rows[:, 0],
                      rows[:, 1], rng, alpha=env.alpha)
    return g.days, rows[:, 0].astype(np.int32), g.actions


@pytest.fixture(scope="session")
def round_request(generated):
    from pategail.sdk.messages import RoundRequest

    days, homes, actions = generated
    return RoundRequest(round=1, k_steps=10, batch_size=64, days=days, homes=homes, actions=actions)


@pytest.fixture
def make_device(tmp_path, dataset, bundle_dir):
    """make(user_index, device_id=None, seed=0, install=True) -> a Device holding that user's training days."""
    from pategail.sdk.device import Device

    def make(user_index: int = 0, device_id: int | None = None, seed: int = 0, install: bool = True, **kw):
        device_id = 100 + user_index if device_id is None else device_id
        device = Device(tmp_path / f"device-{device_id}", device_id, rng=np.random.default_rng(seed), **kw)
        if install:
            device.install_bundle(bundle_dir)
        device.add_days(dataset.user_days(dataset.users[user_index]))
        return device
    return make


def _policy_bytes(seed: int, n_cells: int, nan: bool = False) -> bytes:
    import tempfile

    import torch

    from pategail.export.onnx_policy import save_policy_onnx
    from pategail.server.policy import Policy, PolicyConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy = Policy(PolicyConfig(n_cells=n_cells))
    if nan:
        with torch.no_grad():
            next(policy.parameters())[0].fill_(float("nan"))
    with tempfile.TemporaryDirectory() as d:
        save_policy_onnx(policy, Path(d) / "p.onnx")
        return (Path(d) / "p.onnx").read_bytes()


@pytest.fixture(scope="session")
def policy_bytes():
    """policy_bytes(seed, n_cells, nan=False) -> a serialised policy inference model (as PolicyUpdate carries)."""
    return _policy_bytes


def _raw_round_request(rnd, k, b, days, homes, actions, n=None, version=None) -> bytes:
    import struct

    from pategail.sdk import messages as m

    days, homes, actions = np.asarray(days), np.asarray(homes), np.asarray(actions)
    n = len(days) if n is None else n
    body = struct.pack(">qIII", rnd, k, b, n) + days.astype("<i4").tobytes() + homes.astype("<i4").tobytes() \
        + actions.astype("i1").tobytes()
    version = m.PROTOCOL_VERSION if version is None else version
    return struct.pack(">4sBBI", m.MAGIC, version, m.KIND_ROUND_REQUEST, len(body)) + body


@pytest.fixture(scope="session")
def raw_round_request():
    """raw_round_request(round, k, b, days, homes, actions, n=None) -> a RoundRequest frame written by hand
    (no validation), to feed a decoder anything."""
    return _raw_round_request
