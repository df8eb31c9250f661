"""The device's side of DP-FedAvg: the policy's maximum-likelihood artifacts in a real ONNX Runtime training
session (the loss and an SGD step are torch's), and the device's round — local epochs from the coordinator's
parameters, the delta L2-clipped on the device before it becomes the pending vector."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pategail.export.policy_training import policy_nll
from pategail.sdk.bundle import load_bundle
from pategail.sdk.device import Device
from pategail.sdk.features import infer_home
from pategail.sdk.fedavg_round import PolicyTrainer, labelled_days, local_update
from pategail.sdk.messages import Ack, ErrorReply, FedAvgRequest, from_bytes
from pategail.server.fedavg.coordinator import trainable_names
from pategail.server.policy import Policy, PolicyConfig


def _torch_policy(bundle) -> Policy:
    """The bundle's initial policy as torch weights (from the training checkpoint's flat vector)."""
    policy = Policy(PolicyConfig(**bundle.manifest["policy"]["config"]))
    names = trainable_names(policy)
    assert [n for n, _ in bundle.policy_training.parameters] == names
    flat = torch.from_numpy(PolicyTrainer(bundle).get_parameters())
    torch.nn.utils.vector_to_parameters(flat, [policy.get_parameter(n) for n in names])
    return policy


def test_the_manifest_describes_the_policy_training_artifacts(fedavg_bundle):
    bundle = load_bundle(fedavg_bundle)
    section = bundle.manifest["policy_training"]
    assert [t["name"] for t in section["models"]["training"]["inputs"]] == ["cells", "features", "mask", "targets"]
    assert [t["name"] for t in section["models"]["training"]["outputs"]] == ["loss", "log_likelihood"]
    assert section["optimizer"]["type"] == "SGD" and section["frozen"] == ["value_head.bias", "value_head.weight"]
    # SGD run as ONNX Runtime's AdamW (betas 0, 0; eps = the scale): the optimizer that opens in its C API's sessions
    assert bundle.policy_training.learning_rate_scale == section["optimizer"]["learning_rate_scale"] == 1e8
    import onnx

    ops = [n.op_type for n in onnx.load(bundle.policy_training.models["optimizer"].path).graph.node]
    assert "AdamWOptimizer" in ops and "SGDOptimizerV2" not in ops
    policy = Policy(PolicyConfig(**bundle.manifest["policy"]["config"]))
    assert bundle.policy_training.n_parameters == policy.n_parameters - 17 == section["n_parameters"]
    for path in [bundle.policy_training.checkpoint, *(m.path for m in bundle.policy_training.models.values())]:
        assert path.name in bundle.manifest["files"]


def test_the_artifacts_train_in_ort_as_torch_does(fedavg_bundle, dataset):
    bundle = load_bundle(fedavg_bundle)
    user = int(dataset.users[0])
    days = dataset.user_days(user)[:12]
    data = labelled_days(days, infer_home(days), bundle.environment.cells)
    batch = (data.cells, data.features, data.mask, data.targets)
    trainer = PolicyTrainer(bundle)
    policy = _torch_policy(bundle)
    tensors = [torch.from_numpy(a) for a in batch]
    loss = policy_nll(policy, *tensors).detach()
    assert trainer.loss(batch) == pytest.approx(float(loss), rel=1e-5)
    # every labelled action is possible: the loss is a real likelihood (−log of 4 near-uniform actions at start)
    assert (data.targets.astype(bool) <= data.mask).all() and 0.5 < float(loss) < np.log(4) + 0.1
    trainer.train_step(batch, 0.5)
    params = [policy.get_parameter(n) for n in trainable_names(policy)]
    grads = torch.autograd.grad(policy_nll(policy, *tensors), params)
    expected = torch.cat([(p - 0.5 * g).detach().reshape(-1) for p, g in zip(params, grads)]).numpy()
    moved = trainer.get_parameters()
    assert np.abs(moved - expected).max() < 1e-6
    assert np.abs(moved - torch.nn.utils.parameters_to_vector(params).detach().numpy()).max() > 1e-3
    assert trainer.loss(batch) < float(loss)          # one step of gradient descent on the batch lowers its loss


def _device(tmp_path, bundle_dir, dataset, user_index=1) -> Device:
    device = Device(tmp_path / "device", 0, rng=np.random.default_rng(0))
    device.add_days(dataset.user_days(int(dataset.users[user_index])))
    device.install_bundle(bundle_dir)
    return device


def _request(device, clip_norm, seed=5):
    device.rng = np.random.default_rng(seed)
    theta = PolicyTrainer(device.bundle).get_parameters()
    request = FedAvgRequest(1, 2, 16, 0.1, clip_norm, theta)
    reply = from_bytes(device.handle(request.to_bytes()))
    assert isinstance(reply, Ack) and reply.kind == "fedavg_request" and reply.n == len(theta)
    return device.pending, theta


def test_a_device_delta_is_clipped_on_the_device(tmp_path, fedavg_bundle, dataset):
    device = _device(tmp_path, fedavg_bundle, dataset)
    raw_upload, theta = _request(device, 1e6)            # a clip no delta reaches: the delta itself over C
    raw = raw_upload * 1e6
    # the delta is the device's local epochs from θ: recomputed with its own generator, the same
    data = labelled_days(device.store.days(), device.store.home, device.bundle.environment.cells)
    again = local_update(PolicyTrainer(device.bundle), data, theta, epochs=2, batch_size=16, learning_rate=0.1,
                         rng=np.random.default_rng(5))
    assert np.abs(again - raw).max() < 1e-6 and np.linalg.norm(raw) > 0.05
    clip = 0.1 * np.linalg.norm(raw)
    clipped, _ = _request(device, clip)
    assert np.linalg.norm(clipped) == pytest.approx(1.0, abs=1e-9)          # ‖Δ‖ > C: scaled to C, sent as Δ / C
    assert np.abs(clipped * clip - raw * 0.1).max() < 1e-9                  # the same direction
    loose, _ = _request(device, 2 * np.linalg.norm(raw))
    assert np.linalg.norm(loose) == pytest.approx(0.5, rel=1e-6)            # ‖Δ‖ ≤ C: not scaled


def test_a_request_for_another_policy_is_refused_and_changes_nothing(tmp_path, fedavg_bundle, dataset):
    device = _device(tmp_path, fedavg_bundle, dataset)
    n = device.bundle.policy_training.n_parameters
    reply = from_bytes(device.handle(FedAvgRequest(1, 1, 8, 0.1, 1.0, np.zeros(n + 1, np.float32)).to_bytes()))
    assert isinstance(reply, ErrorReply) and reply.code == "incompatible" and device.pending is None
    bad = FedAvgRequest(1, 1, 8, 0.1, 1.0, np.zeros(n, np.float32)).to_bytes()
    corrupt = bad[:-4] + np.float32(np.nan).tobytes()
    reply = from_bytes(device.handle(corrupt))
    assert isinstance(reply, ErrorReply) and reply.code == "non_finite" and device.pending is None


def test_the_request_round_trips_on_the_wire():
    request = FedAvgRequest(7, 3, 32, 0.05, 0.25, np.arange(5, dtype=np.float32) / 3)
    back = from_bytes(request.to_bytes())
    assert (back.round, back.epochs, back.batch_size, back.learning_rate, back.clip_norm) == (7, 3, 32, 0.05, 0.25)
    assert np.array_equal(back.parameters, request.parameters)
