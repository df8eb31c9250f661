"""The policy's embedding of "distinct cells so far" (PolicyConfig.distinct_embedding): the
initial policy is the one without it, a row acts from the first slot with that count on, and the exported
ONNX models (full prefix and incremental) compute what torch computes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pategail.sdk.features import STATE_FEATURES
from pategail.server.policy import Policy, PolicyConfig

from .conftest import N_CELLS, perturbed

DISTINCT = STATE_FEATURES.index("distinct")


def _policy(distinct_embedding: bool, seed: int = 5) -> Policy:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Policy(PolicyConfig(n_cells=N_CELLS, distinct_embedding=distinct_embedding)).eval()


def _inputs(real_sample, n=16):
    return (torch.from_numpy(real_sample["days"][:n].astype(np.int64)),
            torch.from_numpy(real_sample["features"][:n]))


def test_the_initial_policy_is_the_one_without_the_embedding(real_sample):
    cells, features = _inputs(real_sample)
    with_it, without = _policy(True), _policy(False)
    assert with_it.n_parameters == without.n_parameters + 49 * 64
    with torch.no_grad():
        for a, b in zip(with_it(cells, features), without(cells, features)):
            torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_a_row_acts_from_the_first_slot_that_has_its_count(real_sample):
    cells, features = _inputs(real_sample)
    policy = perturbed(_policy(True), seed=3)
    counts = torch.round(features[..., DISTINCT] * 48).long()
    k = int(counts[:, -1].min())                    # a count every day reaches
    assert 2 <= k
    with torch.no_grad():
        before, _ = policy(cells, features)
        # a random direction (a constant one is removed by the LayerNorm)
        policy.distinct_embedding.weight[k] += torch.randn(64, generator=torch.Generator().manual_seed(0))
        after, _ = policy(cells, features)
    changed = (after - before).abs().amax(-1) > 1e-6
    reached = torch.cummax((counts == k).int(), dim=1).values.bool()     # causal: from its first slot on
    assert changed.any()
    np.testing.assert_array_equal(changed.numpy(), reached.numpy())


def test_onnx_models_with_the_embedding_equal_torch(tmp_path, real_sample):
    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import load_bundle, open_generation_session, open_policy_session
    from pategail.sdk.decoding import BufferedDecoder, decoder_for

    policy = perturbed(_policy(True), seed=4)
    bundle = load_bundle(export_bundle(policy, Discriminator(), tmp_path / "bundle"))
    cells, features = real_sample["days"][:8].astype(np.int64), real_sample["features"][:8]
    mask = real_sample["mask"][:8]
    full, log_probs = open_policy_session(bundle).run(["logits", "log_probs"],
                                                      {"cells": cells, "features": features, "mask": mask})
    with torch.no_grad():
        expected, _ = policy(torch.from_numpy(cells), torch.from_numpy(features))
    np.testing.assert_allclose(full, expected.numpy(), atol=1e-4, rtol=0)
    # the incremental model (cache buffers), slot by slot through the SDK's own decoder
    decoder = decoder_for(open_generation_session(bundle))
    assert isinstance(decoder, BufferedDecoder)
    decoder.reset(len(cells))
    rows = [decoder(cells[:, t], features[:, t], mask[:, t]) for t in range(cells.shape[1] - 1)]
    np.testing.assert_allclose(np.stack(rows, axis=1), log_probs[:, :-1], atol=1e-4, rtol=0)
    # and torch's own incremental path (the coordinator's sampling)
    c, f = torch.from_numpy(cells), torch.from_numpy(features)
    buffers, steps = policy.empty_buffers(len(cells)), []
    with torch.no_grad():
        for t in range(cells.shape[1]):
            logits, _, new = policy.forward_step(c[:, t:t + 1], f[:, t:t + 1], torch.tensor(t), buffers)
            for buffer, rows_t in zip(buffers, new):
                buffer[:, :, t:t + 1] = rows_t
            steps.append(logits)
    np.testing.assert_allclose(torch.cat(steps, dim=1).numpy(), expected.numpy(), atol=1e-4, rtol=0)


@pytest.mark.parametrize("count", [0, 48, 60])
def test_counts_outside_a_day_are_clamped(count):
    policy = perturbed(_policy(True), seed=6)
    features = torch.zeros(1, 1, len(STATE_FEATURES))
    features[..., DISTINCT] = count / 48
    with torch.no_grad():
        logits, _ = policy(torch.zeros(1, 1, dtype=torch.int64), features)
    assert torch.isfinite(logits).all()
