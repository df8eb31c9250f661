"""The discriminator's on-device training artifacts: one ORT step == one torch step, 2,000 steps on separable
data stay finite, flat parameters round-trip exactly, and no parameter is lost or tied."""
from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
import torch

from pategail.export.artifacts import TrainingConfig
from pategail.export.discriminator import LABEL_EXPERT, LABEL_GENERATED, Discriminator, stable_bce_with_logits
from pategail.sdk.bundle import open_training_session

TOL = 1e-5


def _flat(module: torch.nn.Module) -> np.ndarray:
    return torch.cat([p.detach().flatten() for p in module.parameters()]).numpy()


def _batch(rng, n=64, scale=1.0):
    pairs = (rng.normal(size=(n, 15)) * scale).astype(np.float32)
    labels = np.where(rng.random(n) < 0.5, LABEL_EXPERT, LABEL_GENERATED).astype(np.float32)
    return pairs, labels


def _torch_step(model, optimizer, config, pairs, labels):
    optimizer.zero_grad()
    loss = stable_bce_with_logits(model(torch.from_numpy(pairs)), torch.from_numpy(labels))
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
    optimizer.step()
    return loss.item(), norm.item()


def _compare_steps(session, model, config, batches):
    optimizer = config.torch_optimizer(model.parameters())
    session.set_learning_rate(config.learning_rate)
    np.testing.assert_array_equal(session.get_flat_parameters(), _flat(model))
    norms = []
    for pairs, labels in batches:
        ort_loss = session.train_step(pairs, labels)
        torch_loss, norm = _torch_step(model, optimizer, config, pairs, labels)
        norms.append(norm)
        assert abs(ort_loss - torch_loss) <= TOL
        np.testing.assert_allclose(session.get_flat_parameters(), _flat(model), atol=TOL, rtol=0)
    return norms


def test_one_ort_step_equals_one_torch_step(bundle, fresh_discriminator):
    config = TrainingConfig(**{k: v for k, v in bundle.manifest["discriminator"]["optimizer"].items()
                               if k in ("learning_rate", "weight_decay", "max_grad_norm", "eps")})
    rng = np.random.default_rng(0)
    _compare_steps(open_training_session(bundle), fresh_discriminator, config, [_batch(rng)])


def test_steps_with_active_clipping_and_weight_decay_equal_torch(tmp_path, fresh_discriminator):
    """A config where clipping acts on every step and weight decay matters: still step for step."""
    from pategail.export.bundle import export_bundle
    from pategail.sdk.bundle import load_bundle
    from pategail.server.policy import Policy, PolicyConfig

    config = TrainingConfig(learning_rate=1e-2, weight_decay=0.1, max_grad_norm=0.05)
    custom = load_bundle(export_bundle(Policy(PolicyConfig(n_cells=10)), copy.deepcopy(fresh_discriminator),
                                       tmp_path / "bundle", training_config=config))
    assert custom.learning_rate == config.learning_rate
    rng = np.random.default_rng(1)
    norms = _compare_steps(open_training_session(custom), fresh_discriminator, config,
                           [_batch(rng, scale=3.0) for _ in range(5)])
    assert min(norms) > config.max_grad_norm                       # clipping really acted


def test_label_smoothing_trains_towards_the_manifest_label_like_torch(tmp_path, fresh_discriminator):
    """One-sided label smoothing travels as the manifest's expert label; ORT steps on such soft targets
    still equal torch's, and the loss has its minimum at D = 0.9 rather than at certainty."""
    from pategail.export.bundle import export_bundle
    from pategail.sdk.bundle import load_bundle
    from pategail.server.policy import Policy, PolicyConfig

    config = TrainingConfig(expert_label=0.9)
    smoothed = load_bundle(export_bundle(Policy(PolicyConfig(n_cells=10)), copy.deepcopy(fresh_discriminator),
                                         tmp_path / "bundle", training_config=config))
    labels = smoothed.manifest["discriminator"]["labels"]
    assert labels == {"expert": 0.9, "generated": LABEL_GENERATED}
    rng = np.random.default_rng(4)
    batches = []
    for _ in range(3):
        pairs, hard = _batch(rng)
        batches.append((pairs, np.where(hard == LABEL_EXPERT, labels["expert"], labels["generated"])
                        .astype(np.float32)))
    _compare_steps(open_training_session(smoothed), fresh_discriminator, config, batches)
    logits = torch.linspace(-6, 6, 1201)
    losses = torch.stack([stable_bce_with_logits(x[None], torch.tensor([0.9])) for x in logits])
    assert torch.sigmoid(logits[losses.argmin()]).item() == pytest.approx(0.9, abs=0.01)
    with pytest.raises(ValueError, match="expert_label"):
        TrainingConfig(expert_label=0.4)


def test_stable_loss_matches_torch_bce_and_is_finite_for_huge_logits():
    x = torch.tensor([-1e4, -50.0, -1.0, 0.0, 1.0, 50.0, 1e4])
    t = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    ours = stable_bce_with_logits(x, t)
    assert torch.isfinite(ours)
    torch.testing.assert_close(ours, torch.nn.functional.binary_cross_entropy_with_logits(x, t))


def _separable(rng, n):
    """Perfectly separable pairs: expert pairs have feature 0 >= 1, generated pairs <= -1."""
    pairs, labels = _batch(rng, n)
    pairs[:, 0] = np.where(labels == LABEL_EXPERT, 1 + np.abs(pairs[:, 0]), -1 - np.abs(pairs[:, 0]))
    return pairs, labels


def test_two_thousand_steps_on_separable_data_stay_finite(bundle):
    session = open_training_session(bundle)
    session.set_learning_rate(1e-2)                                # aggressive: drives logits apart fast
    rng = np.random.default_rng(2)
    losses = []
    for _ in range(2000):
        losses.append(session.train_step(*_separable(rng, 64)))
    assert np.all(np.isfinite(losses))
    assert np.all(np.isfinite(session.get_flat_parameters()))
    pairs, labels = _separable(rng, 1024)
    logit, prob = session.score(pairs)
    assert np.all(np.isfinite(logit)) and np.all((prob >= 0) & (prob <= 1))
    assert np.mean((logit > 0) == (labels == LABEL_EXPERT)) == 1.0
    assert losses[-1] < 0.01 < losses[0]


def test_training_stays_finite_with_saturated_logits(bundle):
    """|logit| in the hundreds, where log(sigmoid(x)) underflows (the built-in BCE went NaN at |x| ≳ 17):
    the loss is finite, right-side pairs cost ~0, and the step leaves finite parameters."""
    session = open_training_session(bundle)
    flat = session.get_flat_parameters()
    out_weight = slice(bundle.n_parameters - 65, bundle.n_parameters - 1)
    flat[out_weight] = 60.0 * np.sign(flat[out_weight] + 1e-12)
    session.set_flat_parameters(flat)
    pairs, labels = _batch(np.random.default_rng(8), scale=5.0)
    logit, _ = session.score(pairs)
    assert np.abs(logit).max() > 100
    for target in (labels, (logit > 0).astype(np.float32), (logit <= 0).astype(np.float32)):
        loss = session.train_step(pairs, target)
        assert np.isfinite(loss)
        assert np.all(np.isfinite(session.get_flat_parameters()))


def test_flat_parameters_round_trip_exactly(bundle):
    session = open_training_session(bundle)
    flat = session.get_flat_parameters()
    assert flat.shape == (bundle.n_parameters,)
    new = np.random.default_rng(4).normal(size=flat.shape).astype(np.float32)
    session.set_flat_parameters(new)
    np.testing.assert_array_equal(session.get_flat_parameters(), new)
    # the training session's own round trip, as a device without our helper would call it
    from onnxruntime import OrtValue

    buf = session.module.get_contiguous_parameters(trainable_only=True)
    session.module.copy_buffer_to_parameters(buf, trainable_only=True)
    np.testing.assert_array_equal(session.get_flat_parameters(), new)
    session.module.copy_buffer_to_parameters(OrtValue.ortvalue_from_numpy(flat)._ortvalue, trainable_only=True)
    np.testing.assert_array_equal(session.get_flat_parameters(), flat)


def test_flat_vector_follows_the_manifest_parameter_order(bundle):
    session = open_training_session(bundle)
    flat = np.arange(bundle.n_parameters, dtype=np.float32)
    session.set_flat_parameters(flat)
    params = session.state.parameters
    offset = 0
    for name, shape in bundle.parameters:
        size = int(np.prod(shape))
        np.testing.assert_array_equal(params[name].data.ravel(), flat[offset:offset + size])
        assert params[name].data.shape == shape
        offset += size
    assert offset == bundle.n_parameters


def test_every_state_dict_name_is_present_and_no_parameters_are_tied(bundle, bundle_dir, torch_models):
    names = list(torch_models[1].state_dict())
    assert [n for n, _ in bundle.parameters] == names
    training = onnx.load(bundle_dir / "discriminator_training_model.onnx")
    inputs = [vi.name for vi in training.graph.input]
    grads = {vi.name for vi in training.graph.output}
    for n in names:
        assert inputs.count(n) == 1, f"{n} is not one graph input of the training model"
        assert f"{n}_grad.accumulation.out" in grads, f"{n} gets no gradient"
    inference = onnx.load(bundle_dir / "discriminator_inference.onnx")
    assert sorted(i.name for i in inference.graph.initializer if i.name in names) == sorted(names)
    state = open_training_session(bundle).state
    assert sorted(state.parameters[n].name for n in names) == sorted(names)
    # equal initial values would be merged into one initializer by a constant-folding export: make two
    # parameters equal, take a step, and check they move independently afterwards
    session = open_training_session(bundle)
    flat = session.get_flat_parameters()
    b1 = slice(64 * 15, 64 * 15 + 64)                              # fc1.bias
    b2 = slice(64 * 15 + 64 + 64 * 64, 64 * 15 + 64 + 64 * 64 + 64)  # fc2.bias
    flat[b1] = flat[b2] = 0.0
    session.set_flat_parameters(flat)
    session.train_step(*_batch(np.random.default_rng(9)))
    after = session.get_flat_parameters()
    assert not np.array_equal(after[b1], after[b2])


def test_checkpoint_save_and_resume(tmp_path, bundle):
    session = open_training_session(bundle)
    rng = np.random.default_rng(6)
    for _ in range(3):
        session.train_step(*_batch(rng))
    session.save_checkpoint(tmp_path / "device_ckpt")
    resumed = open_training_session(bundle, tmp_path / "device_ckpt")
    np.testing.assert_array_equal(resumed.get_flat_parameters(), session.get_flat_parameters())


@pytest.mark.parametrize("bad", [dict(learning_rate=0), dict(max_grad_norm=-1), dict(beta1=1.0)])
def test_training_config_is_validated(bad):
    with pytest.raises(ValueError):
        TrainingConfig(**bad)


def _optimizer_stepper(model: onnx.ModelProto, params, grads, step=3, lr=1e-3):
    """order → the optimizer model's AdamW step on the tensors given in that order (zero moments), the updated
    parameters put back in the original order as one flat vector. One plain inference session of the model with
    AdamW's updated-parameters output exposed, opened once."""
    import onnxruntime as ort

    model = copy.deepcopy(model)
    adam = next(n for n in model.graph.node if n.op_type == "AdamWOptimizer")
    adam.output.append("updated_params")
    model.graph.output.append(onnx.helper.make_tensor_sequence_value_info("updated_params", onnx.TensorProto.FLOAT,
                                                                          None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    zeros = [np.zeros_like(p) for p in params]

    def run(order):
        def pick(arrays):
            return [arrays[i].copy() for i in order]
        updated = session.run(["updated_params"], {
            "learning_rate": np.array([lr], np.float32), "step": np.array([step], np.int64), "params": pick(params),
            "gradients": pick(grads), "first_order_moments": pick(zeros), "second_order_moments": pick(zeros)})[0]
        back = dict(zip(order, updated))
        return np.concatenate([back[i].ravel() for i in range(len(params))])
    return run


def test_the_clip_does_not_depend_on_the_order_onnx_runtime_passes_the_tensors_in(bundle):
    """ONNX Runtime builds the optimizer's parameter and gradient sequences in an order that changes between
    processes; a clipped step must not change with it (it did with ORT's InplaceClipGradNorm: seeded runs did
    not replay). Every order of the six tensors gives bit for bit the same step; ORT's own clip on the same
    tensors does not (so the gradients do exercise the order)."""
    import itertools

    model = onnx.load(bundle.discriminator["optimizer"].path)
    assert not any(n.op_type == "InplaceClipGradNorm" for n in model.graph.node)
    rng = np.random.default_rng(3)
    params = [p.detach().numpy().copy() for p in Discriminator().parameters()]
    grads = [rng.normal(scale=0.02 * (i + 1), size=p.shape).astype(np.float32) for i, p in enumerate(params)]
    assert np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads)) > 1.0     # the clip acts
    orders = list(itertools.permutations(range(len(params))))[::7]
    ours = _optimizer_stepper(model, params, grads)
    reference = ours(orders[0])
    for order in orders[1:]:
        np.testing.assert_array_equal(ours(order), reference)

    ort_clip = copy.deepcopy(model)                  # the same model with ONNX Runtime's clip instead of ours
    adam = copy.deepcopy(next(n for n in ort_clip.graph.node if n.op_type == "AdamWOptimizer"))
    adam.input[3] = "ort_clipped"
    del ort_clip.graph.node[:]
    ort_clip.graph.node.extend([onnx.helper.make_node("InplaceClipGradNorm", ["gradients"], ["ort_clipped"],
                                                      domain="com.microsoft", max_norm=1.0), adam])
    theirs = _optimizer_stepper(ort_clip, params, grads)
    steps = {theirs(order).tobytes() for order in orders}
    assert len(steps) > 1
