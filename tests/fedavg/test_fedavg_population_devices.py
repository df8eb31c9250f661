"""The population fleet's DP-FedAvg local epochs (torch) against the SDK device's (ONNX Runtime): devices of
different day counts (one with fewer days than a minibatch, one with a shorter last minibatch), several local
epochs, and a shard's sum of encoded uploads."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.population.fedavg import LocalTrainer, encoded_upload, shard_fedavg
from pategail.population.fleet import device_model
from pategail.sdk.bundle import load_bundle
from pategail.sdk.fedavg_round import PolicyTrainer, labelled_days, local_update
from pategail.sdk.features import infer_home
from pategail.sdk.messages import FedAvgRequest
from pategail.sdk.secagg.fixedpoint import SCALE

DAY_COUNTS = (3, 8, 13, 21, 5)          # minibatches of 8: 1, 1, 2 (the last of 5), 3, 1 a pass


@pytest.fixture(scope="module")
def devices(dataset):
    """(days, home) of five devices: the first days of five users, cut to DAY_COUNTS."""
    users = [u for u in dataset.users if len(dataset.user_days(int(u))) >= max(DAY_COUNTS)][:len(DAY_COUNTS)]
    days = [dataset.user_days(int(u))[:n] for u, n in zip(users, DAY_COUNTS)]
    return days, [infer_home(d) for d in days]


def _request(bundle, epochs=2):
    return FedAvgRequest(3, epochs, 8, 0.2, 0.5, PolicyTrainer(bundle).get_parameters())


def _sdk_deltas(bundle, days, homes, request, seed, ids):
    """Each device's delta as the SDK device computes it (ONNX Runtime), from the emulator's device rng."""
    trainer, cells = PolicyTrainer(bundle), bundle.environment.cells
    return np.stack([local_update(trainer, labelled_days(d, h, cells), request.parameters, epochs=request.epochs,
                                  batch_size=request.batch_size, learning_rate=request.learning_rate,
                                  rng=np.random.default_rng([seed, int(k), request.round]))
                     for k, d, h in zip(ids, days, homes)])


def test_local_epochs_equal_the_sdk_devices(fedavg_bundle, devices):
    bundle = load_bundle(fedavg_bundle)
    days, homes = devices
    request = _request(bundle)
    trainer = LocalTrainer(device_model(fedavg_bundle, 0).policy)
    data = [labelled_days(d, h, bundle.environment.cells) for d, h in zip(days, homes)]
    deltas = np.stack([trainer.delta(request.parameters, d, request, np.random.default_rng([7, k, 3]))
                        for k, d in enumerate(data)])
    expected = _sdk_deltas(bundle, days, homes, request, 7, range(5))
    assert deltas.shape == expected.shape == (5, len(request.parameters))
    assert np.abs(deltas - expected).max() < 2e-6
    # every device moved, each its own way (2 to 6 SGD steps over the two epochs)
    norms = np.linalg.norm(expected, axis=1)
    assert norms.min() > 1e-2 and np.abs(np.diff(norms)).min() > 1e-4


def test_a_shard_sums_the_encoded_uploads_of_the_sdk_devices(fedavg_bundle, devices):
    bundle = load_bundle(fedavg_bundle)
    days, homes = devices
    request = _request(bundle, epochs=3)
    trainer = LocalTrainer(device_model(fedavg_bundle, 0).policy)
    ids = np.arange(10, 15)
    table_of = np.array([4, 0, 2, 1, 3])                 # the devices hold the days of these tables
    want = sum(encoded_upload(delta, request.clip_norm) for delta in _sdk_deltas(
        bundle, [days[t] for t in table_of], [homes[t] for t in table_of], request, 11, ids))
    got = shard_fedavg(trainer, ids, days, homes, table_of, bundle.environment.cells, 11, request)
    # quanta of 2^-24 of the clip norm: the sums agree to float32 rounding of the deltas
    assert np.abs(got - want).max() / SCALE < 1e-5 and np.abs(want).max() / SCALE > 1e-3
