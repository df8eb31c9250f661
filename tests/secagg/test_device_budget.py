"""The device's budget: a bundle declares the run's privacy plan; the device keeps its ledger by it
and answers a request that would take it past its budget with an ErrorReply "budget", changing nothing."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pategail.sdk.accounting import QueryRelease, composed_epsilon
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.ledger import LEDGER_INTERVAL, PrivacyLedger
from pategail.sdk.secagg.policy import DeclaredPlan

ROOT = Path(__file__).resolve().parents[2]
B, DELTA, DAYS = 2.0, 1e-5, 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from pategail.data.dataset import load_dataset
    from pategail.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("data") / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    return load_dataset(out)


def _one_round() -> float:
    return composed_epsilon([QueryRelease(B, B, DAYS * 47)], DELTA, LEDGER_INTERVAL)


def _export(out, dataset, privacy=None):
    """A runnable bundle of a small seeded model, declaring ``privacy`` (None: no privacy section)."""
    import torch

    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.server.policy import Policy, PolicyConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        policy, discriminator = Policy(PolicyConfig(n_cells=dataset.n_cells, d_model=16, n_layers=1)), Discriminator()
    states = np.array([[0, 0]], dtype=np.int64)
    return export_bundle(policy, discriminator, out,
                         environment=Environment(dataset.cells, 1.0, 50, states, np.ones(1)), privacy=privacy)


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory, dataset):
    """A runnable bundle whose declared plan affords 1.5 rounds of DAYS days at scale B on both sums."""
    plan = DeclaredPlan(1.5 * _one_round(), DELTA, B, B, 0.5)
    return _export(tmp_path_factory.mktemp("bundle") / "bundle", dataset, plan)


def _request(bundle_dir, dataset):
    from pategail.sdk.bundle import load_bundle, open_policy_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days
    from pategail.sdk.messages import RoundRequest

    bundle = load_bundle(bundle_dir)
    env, rng = bundle.environment, np.random.default_rng(3)
    homes = np.zeros(DAYS, dtype=np.int64)
    g = generate_days(open_policy_session(bundle), CellGeometry.build(env.cells, env.candidates), homes, homes, rng,
                      alpha=env.alpha)
    return RoundRequest(round=2, k_steps=2, batch_size=16, days=g.days, homes=homes.astype(np.int32),
                        actions=g.actions)


def _device(root, dataset, bundle_dir):
    from pategail.sdk.device import Device

    device = Device(root, 7, rng=np.random.default_rng(0))
    if device.bundle is None:
        device.install_bundle(bundle_dir)
        device.add_days(dataset.user_days(dataset.users[0]))
    return device


def test_the_bundle_declares_the_plan_and_the_device_keeps_its_budget(tmp_path, dataset, bundle_dir):
    from pategail.sdk.messages import Ack, ErrorReply, from_bytes

    request = _request(bundle_dir, dataset)
    device = _device(tmp_path / "dev", dataset, bundle_dir)
    assert device.bundle.privacy.sum_noise_scale == B
    assert isinstance(from_bytes(device.handle(request.to_bytes())), Ack)      # one round fits the budget

    # the device took part in one release of that size (recorded the way its secure round records it)
    cfg = RoundConfig(round_id=1, participants=(7, 8), num_queries=request.n_queries, n_min=1, threshold=2,
                      degree=0, sum_noise_scale=B, sq_sum_noise_scale=B, round_seed=bytes(32),
                      envelope_public=bytes(32))
    PrivacyLedger(tmp_path / "dev" / "privacy-ledger.json").record(cfg)
    restarted = _device(tmp_path / "dev", dataset, bundle_dir)                  # the ledger survives restarts
    ckpt = tmp_path / "dev" / "discriminator.ckpt"
    before = (ckpt.read_bytes(), os.stat(ckpt).st_mtime_ns, restarted.pending)
    reply = from_bytes(restarted.handle(request.to_bytes()))
    assert isinstance(reply, ErrorReply) and reply.code == "budget" and "past its budget" in reply.message
    assert (ckpt.read_bytes(), os.stat(ckpt).st_mtime_ns) == before[:2] and restarted.pending is None


@pytest.fixture(scope="module")
def plain_bundle_dir(tmp_path_factory, dataset):
    """The same model without a privacy section: what a coordinator could serve to lift the device's floors."""
    return _export(tmp_path_factory.mktemp("plain") / "bundle", dataset)


def test_a_bundle_without_a_plan_does_not_lift_the_floors_or_the_budget(tmp_path, dataset, bundle_dir,
                                                                          plain_bundle_dir):
    from pategail.sdk.messages import Ack, ErrorReply, from_bytes

    request = _request(bundle_dir, dataset)
    device = _device(tmp_path / "dev", dataset, bundle_dir)
    assert isinstance(from_bytes(device.handle(request.to_bytes())), Ack)
    cfg = RoundConfig(round_id=1, participants=(7, 8), num_queries=request.n_queries, n_min=1, threshold=2,
                      degree=0, sum_noise_scale=B, sq_sum_noise_scale=B, round_seed=bytes(32),
                      envelope_public=bytes(32))
    PrivacyLedger(tmp_path / "dev" / "privacy-ledger.json").record(cfg)        # it took part in a private release
    device.install_bundle(plain_bundle_dir)
    assert device.bundle.privacy is None
    reply = from_bytes(device.handle(request.to_bytes()))                      # the budget still binds
    assert isinstance(reply, ErrorReply) and reply.code == "budget"
    assert device.forget_privacy_plan()                                        # the owner's explicit reset
    assert isinstance(from_bytes(device.handle(request.to_bytes())), Ack)
    assert not device.forget_privacy_plan()


def test_the_remembered_plan_keeps_the_noise_floors(tmp_path, dataset, bundle_dir, plain_bundle_dir):
    from pategail.sdk.secagg.config import KeyDirectory
    from pategail.sdk.secagg.errors import RoundRefused

    device = _device(tmp_path / "dev", dataset, bundle_dir)
    declared = device.bundle.privacy
    device.install_bundle(plain_bundle_dir)
    client = device._secagg_client(KeyDirectory(bytes(32)))         # the client a secure round would use
    assert client.policy.min_sum_noise_scale == B and client.ledger.target_epsilon == pytest.approx(1.5 * _one_round())
    low = RoundConfig(round_id=1, participants=(7, 8), num_queries=8, n_min=2, threshold=2, degree=0,
                      sum_noise_scale=B / 2, sq_sum_noise_scale=B, round_seed=bytes(32), envelope_public=bytes(32))
    with pytest.raises(RoundRefused, match="below the declared privacy plan"):
        client.policy.check(low)
    assert client.policy == declared.policy()
