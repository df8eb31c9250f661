"""ONNX Runtime == torch (policy logits and values, discriminator logits) on random and real inputs, and the
onnx.reference evaluator == ONNX Runtime on the inference models, all within 1e-5."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from pategail.sdk.bundle import open_policy_session, open_scoring_session
from pategail.server.policy import masked_log_probs

TOL = 1e-5


def _torch_policy(policy, cells, features, mask):
    with torch.no_grad():
        logits, values = policy(torch.from_numpy(cells), torch.from_numpy(features))
        log_probs = masked_log_probs(logits, torch.from_numpy(mask))
    return log_probs.numpy(), logits.numpy(), values.numpy()


def _check_policy(bundle, policy, cells, features, mask):
    session = open_policy_session(bundle)
    ort_lp, ort_logits, ort_values = session.run(None, {"cells": cells, "features": features, "mask": mask})
    lp, logits, values = _torch_policy(policy, cells, features, mask)
    np.testing.assert_allclose(ort_logits, logits, atol=TOL, rtol=0)
    np.testing.assert_allclose(ort_values, values, atol=TOL, rtol=0)
    np.testing.assert_allclose(ort_lp[mask], lp[mask], atol=TOL, rtol=0)
    assert np.all(np.exp(ort_lp[~mask]) == 0)
    assert np.abs(values).max() > 1e-3                               # not a vacuous comparison


def test_policy_random_inputs(bundle, torch_models, random_policy_inputs):
    _check_policy(bundle, torch_models[0], *random_policy_inputs)


@pytest.mark.parametrize("batch, slots", [(1, 1), (3, 17), (64, 48)])
def test_policy_dynamic_batch_and_slots(bundle, torch_models, batch, slots):
    rng = np.random.default_rng(batch * 100 + slots)
    cells = rng.integers(0, torch_models[0].config.n_cells, (batch, slots)).astype(np.int64)
    features = rng.normal(size=(batch, slots, 11)).astype(np.float32)
    mask = np.ones((batch, slots, 4), dtype=bool)
    _check_policy(bundle, torch_models[0], cells, features, mask)


def test_policy_real_inputs(bundle, torch_models, real_sample):
    s = real_sample
    _check_policy(bundle, torch_models[0], s["days"].astype(np.int64), s["features"], s["mask"])


def _check_discriminator(bundle, discriminator, pairs):
    ort_logit, ort_prob = open_scoring_session(bundle).run(None, {"pairs": pairs})
    with torch.no_grad():
        logit = discriminator(torch.from_numpy(pairs)).numpy()
    np.testing.assert_allclose(ort_logit, logit, atol=TOL, rtol=0)
    np.testing.assert_allclose(ort_prob, 1 / (1 + np.exp(-logit.astype(np.float64))), atol=TOL, rtol=0)


def test_discriminator_random_inputs(bundle, torch_models):
    pairs = np.random.default_rng(3).normal(size=(4096, 15)).astype(np.float32) * 2
    _check_discriminator(bundle, torch_models[1], pairs)


def test_discriminator_real_inputs(bundle, torch_models, real_sample):
    _check_discriminator(bundle, torch_models[1], real_sample["pairs"])


def test_discriminator_training_session_scores_like_torch(bundle, torch_models, real_sample):
    from pategail.sdk.bundle import open_training_session

    logit, prob = open_training_session(bundle).score(real_sample["pairs"])
    with torch.no_grad():
        expected = torch_models[1](torch.from_numpy(real_sample["pairs"])).numpy()
    np.testing.assert_allclose(logit, expected, atol=TOL, rtol=0)


def test_reference_evaluator_agrees_with_ort_on_the_policy(bundle, random_policy_inputs, real_sample):
    ref = ReferenceEvaluator(str(bundle.policy.path))
    session = open_policy_session(bundle)
    cells, features, mask = random_policy_inputs
    for feeds in ({"cells": cells[:2], "features": features[:2], "mask": mask[:2]},
                  {"cells": real_sample["days"][:4].astype(np.int64), "features": real_sample["features"][:4],
                   "mask": real_sample["mask"][:4]}):
        with np.errstate(divide="ignore"):                            # reference LogSoftmax: log(0) = -inf
            ref_lp, ref_logits, ref_values = ref.run(None, feeds)
        ort_lp, ort_logits, ort_values = session.run(None, feeds)
        np.testing.assert_allclose(ref_logits, ort_logits, atol=TOL, rtol=0)
        np.testing.assert_allclose(ref_values, ort_values, atol=TOL, rtol=0)
        m = feeds["mask"]
        np.testing.assert_allclose(ref_lp[m], ort_lp[m], atol=TOL, rtol=0)
        # masked actions: the reference gives log 0 = -inf, ORT log(exp(-1e9)) ≈ -1e9; both probability 0
        np.testing.assert_array_equal(np.exp(ref_lp[~m]), 0)
        np.testing.assert_array_equal(np.exp(ort_lp[~m]), 0)


def test_reference_evaluator_agrees_with_ort_on_the_discriminator(bundle, real_sample):
    ref = ReferenceEvaluator(str(bundle.discriminator["inference"].path))
    session = open_scoring_session(bundle)
    random_pairs = np.random.default_rng(5).normal(size=(512, 15)).astype(np.float32)
    for pairs in (random_pairs, real_sample["pairs"]):
        for r, o in zip(ref.run(None, {"pairs": pairs}), session.run(None, {"pairs": pairs})):
            np.testing.assert_allclose(r, o, atol=TOL, rtol=0)
