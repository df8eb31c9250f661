"""The population fleet's fast paths compute what their plain definitions compute: the vectorised minibatch
draws are index for index each device's own loop of Generator.integers calls (rejections, a bound of 1 and
odd batch halves included), and the hand-written gradient and fused AdamW step are torch autograd's gradient
of the training loss and torch's AdamW after per-device clipping; copies of one user share one day array."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pategail.population.draws import loop_draws, minibatch_draws
from pategail.population.stacked import (Layout, OptimiserSettings, adamw_step, gradients, logits,
                                         probabilities, stable_bce)


@pytest.mark.parametrize("k,n_pos,n_neg", [(20, 32, 32), (3, 5, 6), (1, 1, 1)])
def test_vectorised_draws_are_each_devices_own_draws(k, n_pos, n_neg):
    rng = np.random.default_rng(k)
    devices = np.arange(500, 560)
    bounds = rng.integers(1, 5000, len(devices))
    bounds[::5] = 3 * 2**30          # (u · b) mod 2³² < 2³⁰ rejects a quarter of the draws: the loop's way
    bounds[1] = 1                    # numpy draws nothing for a bound of 1
    for neg_bound in (4512, 2**31 + 3):
        pos, neg = minibatch_draws(7, devices, 4, k, n_pos, n_neg, bounds, neg_bound)
        assert pos.shape == (len(devices), k, n_pos) and neg.shape == (len(devices), k, n_neg)
        for j, device in enumerate(devices):
            p, q = loop_draws(7, int(device), 4, k, n_pos, n_neg, int(bounds[j]), neg_bound)
            np.testing.assert_array_equal(pos[j], p)
            np.testing.assert_array_equal(neg[j], q)


def test_loop_draws_are_the_sdk_devices_calls():
    rng = np.random.default_rng([3, 41, 2])
    p, q = loop_draws(3, 41, 2, 2, 4, 5, 100, 900)
    np.testing.assert_array_equal(p[0], rng.integers(0, 100, 4))
    np.testing.assert_array_equal(q[0], rng.integers(0, 900, 5))
    np.testing.assert_array_equal(p[1], rng.integers(0, 100, 4))


def _layout():
    slices, at = {}, 0
    for name, shape in (("fc1.weight", (64, 15)), ("fc1.bias", (64,)), ("fc2.weight", (64, 64)),
                        ("fc2.bias", (64,)), ("out.weight", (1, 64)), ("out.bias", (1,))):
        size = int(np.prod(shape))
        slices[name] = (at, at + size, shape)
        at += size
    return Layout(slices, at)


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    layout = _layout()
    params = (rng.standard_normal((5, layout.n_parameters)) * 0.3).astype(np.float32)
    pairs = rng.standard_normal((5, 64, 15)).astype(np.float32)
    labels = np.concatenate([np.full(32, 0.9), np.zeros(32)]).astype(np.float32)
    return layout, params, pairs, labels


def test_hand_written_gradient_is_autograds(problem):
    layout, params, pairs, labels = problem
    flat = torch.from_numpy(params).requires_grad_(True)
    loss = stable_bce(logits(layout, flat, torch.from_numpy(pairs)), torch.from_numpy(labels)).sum()
    (expected,) = torch.autograd.grad(loss, flat)
    got = np.empty_like(params)
    gradients(layout, params, pairs, labels, got)
    assert np.abs(got - expected.numpy()).max() < 1e-6 * max(1.0, float(expected.abs().max()))
    assert np.abs(expected.numpy()).max() > 1e-3          # not a trivially zero gradient


def test_step_is_clipped_torch_adamw(problem):
    layout, params, pairs, labels = problem
    opt = OptimiserSettings(1e-3, 1e-2, 0.05, 0.9, 0.999, 1e-8, 0.9, 0.0)   # clipping active
    ours = torch.from_numpy(params.copy())
    m1, m2 = torch.zeros_like(ours), torch.zeros_like(ours)
    reference = [torch.nn.Parameter(torch.from_numpy(params[i].copy())) for i in range(len(params))]
    optimisers = [torch.optim.AdamW([p], lr=opt.learning_rate, betas=(opt.beta1, opt.beta2), eps=opt.eps,
                                    weight_decay=opt.weight_decay) for p in reference]
    for step in range(1, 4):
        adamw_step(layout, opt, ours, m1, m2, step, pairs, labels)
        for i, (p, o) in enumerate(zip(reference, optimisers)):
            o.zero_grad()
            logit = logits(layout, p[None], torch.from_numpy(pairs[i:i + 1]))
            stable_bce(logit, torch.from_numpy(labels)).sum().backward()
            torch.nn.utils.clip_grad_norm_([p], opt.max_grad_norm)
            o.step()
    expected = torch.stack([p.detach() for p in reference])
    # Adam's step is nearly scale-free: where a gradient is ~0 its rounding decides the step's direction, so
    # the bound is the SDK-equivalence tolerance (the ORT optimizer model meets it against torch), not 1e-7
    assert (ours - expected).abs().max() < 1e-5
    assert (ours - torch.from_numpy(params)).abs().max() > 1e-3      # 3 steps of 1e-3 moved the weights


def test_grouped_scores_of_distinct_pairs_are_each_devices_forward_graph(problem):
    layout, params, _, _ = problem
    rng = np.random.default_rng(1)
    pairs = rng.standard_normal((1500, 15)).astype(np.float32)            # several pair blocks
    pairs = pairs[rng.permutation(np.r_[np.arange(1500), np.arange(300)])]   # 300 repeated pairs
    got = probabilities(layout, params, pairs)
    first = {row.tobytes(): j for j, row in reversed(list(enumerate(pairs)))}
    twin = np.array([first[row.tobytes()] for row in pairs])
    assert (twin != np.arange(len(pairs))).sum() == 300
    np.testing.assert_array_equal(got, got[:, twin])                      # a repeat gets its pair's score
    with torch.no_grad():
        expected = torch.sigmoid(logits(layout, torch.from_numpy(params), torch.from_numpy(pairs))).numpy()
    assert np.abs(got - expected).max() < 1e-6
    np.testing.assert_array_equal(got[2:3], probabilities(layout, params[2:3], pairs))


def test_copies_of_a_user_share_one_day_array_and_subsets_are_per_device(dataset):
    from pategail.population.resample import resample_population

    whole = resample_population(dataset.users, 40, seed=1)
    days = whole.devices_days(dataset, 0, 40)
    for i in range(40):
        np.testing.assert_array_equal(days[i], dataset.user_days(int(whole.users[i])))
        np.testing.assert_array_equal(days[i], whole.device_days(dataset, i))
    twins = [i for i in range(40) if whole.users[i] == whole.users[0]]
    assert len(twins) > 1 and all(days[i] is days[0] for i in twins)
    half = resample_population(dataset.users, 40, seed=1, day_share=0.5)
    subsets = half.devices_days(dataset, 0, 40)
    for i in twins:
        own = dataset.user_days(int(half.users[i]))
        np.testing.assert_array_equal(subsets[i], own[half.day_indices(i, len(own))])
        np.testing.assert_array_equal(subsets[i], half.device_days(dataset, i))
    assert any(not np.array_equal(subsets[i], subsets[twins[0]]) for i in twins[1:])
