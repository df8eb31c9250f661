"""Incremental decoding: the key/value-cache policy models (the buffered one bundles carry, and the first,
concatenating one older bundles carry) against the full-prefix model on real days, the running day state
against ``state_features`` / ``action_mask``, and generated days against the old path (full prefix
re-featurised at every slot) for the same seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pategail.sdk.bundle import open_generation_session, open_policy_session
from pategail.sdk.decoding import (BufferedDecoder, CacheLayout, CachedDecoder, PrefixDecoder, cache_names,
                                   decoder_for, past_names)


@pytest.fixture(scope="module")
def step_session(bundle):
    return open_generation_session(bundle)


@pytest.fixture(scope="module")
def concat_session(torch_models, tmp_path_factory):
    """An ONNX Runtime session on the first incremental model (growing cache), as older bundles carry."""
    import onnx
    import onnxruntime as ort

    from pategail.export.onnx_policy import export_policy_concat_step_onnx

    path = tmp_path_factory.mktemp("concat") / "policy_step.onnx"
    onnx.save(export_policy_concat_step_onnx(torch_models[0]), path)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def geometry(geolife):
    from pategail.sdk.epr import CellGeometry

    return CellGeometry.build(geolife[0], candidates=200)


def test_the_bundle_session_for_generation_is_the_buffered_incremental_model(bundle, step_session,
                                                                             concat_session):
    assert isinstance(decoder_for(step_session), BufferedDecoder)
    assert isinstance(decoder_for(concat_session), CachedDecoder)
    assert isinstance(decoder_for(open_policy_session(bundle)), PrefixDecoder)
    assert CacheLayout.of_session(step_session) == CacheLayout(2, 4, 16)
    assert CacheLayout.of_session(concat_session) == CacheLayout(2, 4, 16)


def _run_buffered(session, cells, features, mask, capacity=47, buffers=None):
    """log_probs (n, T, 4) slot by slot through the buffered model, the new rows written in place."""
    layout = CacheLayout.of_session(session)
    buffers = layout.buffers(len(cells), capacity) if buffers is None else buffers
    rows = []
    for t in range(cells.shape[1]):
        out = session.run(None, {"cells": cells[:, t:t + 1], "features": features[:, t:t + 1],
                                 "mask": mask[:, t:t + 1], "slot": np.array(t, dtype=np.int64),
                                 **dict(zip(cache_names(layout.n_layers), buffers))})
        rows.append(out[0])
        assert out[3].shape == (len(cells), 4, 1, 16)
        for buffer, new in zip(buffers, out[3:]):
            buffer[:, :, t] = new[:, :, 0]
    return np.concatenate(rows, axis=1), buffers


def test_slot_by_slot_with_the_cache_buffers_equals_the_full_prefix_model_on_real_days(bundle, step_session,
                                                                                      real_sample):
    cells, features, mask = real_sample["days"].astype(np.int64), real_sample["features"], real_sample["mask"]
    (full,) = open_policy_session(bundle).run(["log_probs"], {"cells": cells, "features": features, "mask": mask})
    lp, buffers = _run_buffered(step_session, cells[:, :47], features[:, :47], mask[:, :47])
    np.testing.assert_allclose(lp, full[:, :47], atol=1e-5, rtol=0)
    # a larger capacity, and buffers left over from other days: the rows not yet written are masked out
    stale = [np.random.default_rng(3).normal(size=(len(cells), 4, 60, 16)).astype(np.float32)
             for _ in buffers]
    again, _ = _run_buffered(step_session, cells[:, :47], features[:, :47], mask[:, :47], buffers=stale)
    np.testing.assert_allclose(again, full[:, :47], atol=1e-5, rtol=0)


class _Watched:
    """The step model's session, checking at every call that the cache rows < slot hold exactly the keys and
    values it returned at the earlier slots, and recording the buffers' capacity and address."""

    def __init__(self, session):
        self.session, self.capacities, self.addresses, self.kept = session, [], set(), None

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, names, feeds):
        t, buffers = int(feeds["slot"]), [feeds[name] for name in cache_names(2)]
        if t == 0:
            self.kept = [np.zeros((*b.shape[:2], 0, b.shape[3]), dtype=np.float32) for b in buffers]
        for buffer, kept in zip(buffers, self.kept):
            np.testing.assert_array_equal(buffer[:, :, :t], kept)
        self.capacities.append(buffers[0].shape[2])
        self.addresses.update(b.__array_interface__["data"][0] for b in buffers)
        out = self.session.run(names, feeds)
        self.kept = [np.concatenate([kept, new], axis=2) for kept, new in zip(self.kept, out[1:])]
        return out


def test_the_decoder_grows_the_buffers_in_stages_and_moves_the_filled_rows(step_session, real_sample):
    """The buffered decoder serves the model buffers of 12, 24, 36 and 47 rows as the day grows, every filled
    row moved across each stage's end, on the same memory from stage to stage and day to day; its
    log-probabilities equal those of one 47-row buffer within float rounding on real days."""
    cells, features, mask = real_sample["days"].astype(np.int64), real_sample["features"], real_sample["mask"]
    watched = _Watched(step_session)
    staged, whole = decoder_for(watched), BufferedDecoder(step_session, CacheLayout.of_session(step_session),
                                                          stage=47)
    assert staged.capacities == (12, 24, 36, 47) and whole.capacities == (47,)
    for day in range(2):                        # the second day starts again from the first stage
        staged.reset(len(cells))
        whole.reset(len(cells))
        for t in range(47):
            np.testing.assert_allclose(staged(cells[:, t], features[:, t], mask[:, t]),
                                       whole(cells[:, t], features[:, t], mask[:, t]), atol=1e-5, rtol=0)
    assert watched.capacities == 2 * ([12] * 12 + [24] * 12 + [36] * 12 + [47] * 11)
    assert len(watched.addresses) == 4          # one block of memory per buffer
    with pytest.raises(ValueError, match="holds 47 slots"):
        staged(cells[:, 0], features[:, 0], mask[:, 0])
    # a batch that is not a whole number of the moves' groups of 32 days (as the CLI's last batch can be)
    staged.reset(50)
    for t in range(47):
        staged(cells[:50, t], features[:50, t], mask[:50, t])


@pytest.mark.parametrize("batch", [1, 31, 33, 65])
@pytest.mark.parametrize("heads", [1, 4])
def test_moving_the_rows_to_a_longer_stage_keeps_every_day(batch, heads):
    """Rows moved between two views of one block of memory arrive intact for every day, whatever the batch's
    remainder modulo the groups of 32 days the move works in."""
    from pategail.sdk.decoding import _move_rows

    memory = np.zeros(batch * heads * 47 * 3, dtype=np.float32)
    for short, long in ((12, 24), (24, 36), (36, 47)):
        view = memory[:batch * heads * short * 3].reshape(batch, heads, short, 3)
        view[...] = np.random.default_rng(short).normal(size=view.shape)
        rows = view.copy()
        _move_rows(view, memory[:batch * heads * long * 3].reshape(batch, heads, long, 3), short)
        np.testing.assert_array_equal(memory[:batch * heads * long * 3].reshape(batch, heads, long, 3)[:, :, :short],
                                      rows)


def test_the_first_incremental_model_still_equals_the_full_prefix_model(bundle, concat_session, real_sample):
    cells, features, mask = real_sample["days"].astype(np.int64), real_sample["features"], real_sample["mask"]
    (full,) = open_policy_session(bundle).run(["log_probs"], {"cells": cells, "features": features, "mask": mask})
    layout = CacheLayout.of_session(concat_session)
    cache = layout.empty(len(cells))
    rows = []
    for t in range(cells.shape[1]):
        out = concat_session.run(None, {"cells": cells[:, t:t + 1], "features": features[:, t:t + 1],
                                        "mask": mask[:, t:t + 1], **dict(zip(past_names(layout.n_layers), cache))})
        rows.append(out[0])
        cache = out[3:]
        assert cache[0].shape == (len(cells), 4, t + 1, 16)
    np.testing.assert_allclose(np.concatenate(rows, axis=1), full, atol=1e-5, rtol=0)
    # with an empty cache it reads a whole prefix at once
    whole = concat_session.run(["log_probs"], {"cells": cells, "features": features, "mask": mask,
                                               **dict(zip(past_names(2), layout.empty(len(cells))))})[0]
    np.testing.assert_allclose(whole, full, atol=1e-5, rtol=0)


def test_the_cache_carries_the_history(step_session, real_sample):
    """Slot 10's output with the true cache differs from its output with the cache of other days, and from
    its output with slot 10 told as 9 (one cached row fewer)."""
    cells, features, mask = real_sample["days"][:8].astype(np.int64), real_sample["features"][:8], \
        real_sample["mask"][:8]
    _, own = _run_buffered(step_session, cells[:, :10], features[:, :10], mask[:, :10])
    _, other = _run_buffered(step_session, cells[::-1, :10], features[::-1, :10], mask[::-1, :10])
    step = {"cells": cells[:, 10:11], "features": features[:, 10:11], "mask": mask[:, 10:11]}

    def logits(buffers, slot):
        return step_session.run(["logits"], {**step, "slot": np.array(slot, dtype=np.int64),
                                             **dict(zip(cache_names(2), buffers))})[0]

    assert not np.allclose(logits(own, 10), logits(other, 10), atol=1e-4)
    assert not np.allclose(logits(own, 10), logits(own, 9), atol=1e-4)


def test_torch_incremental_paths_equal_forward(torch_models, real_sample):
    """forward_step (cache buffers written in place) and forward_cached (growing cache), slot by slot and in
    chunks of several slots, equal forward on the whole day."""
    policy = torch_models[0]
    cells = torch.from_numpy(real_sample["days"][:16].astype(np.int64))
    features = torch.from_numpy(real_sample["features"][:16])
    with torch.no_grad():
        full_logits, full_values = policy(cells, features)
        buffers, past, got = policy.empty_buffers(16), policy.empty_cache(16), {"step": [], "cached": []}
        start = 0
        for t in (1, 2, 5, 20, 48):
            lg, v, new = policy.forward_step(cells[:, start:t], features[:, start:t], torch.tensor(start), buffers)
            for buffer, rows in zip(buffers, new):
                buffer[:, :, start:t] = rows
            got["step"].append((lg, v))
            lg, v, past = policy.forward_cached(cells[:, start:t], features[:, start:t], past)
            got["cached"].append((lg, v))
            start = t
    for pieces in got.values():
        torch.testing.assert_close(torch.cat([lg for lg, _ in pieces], 1), full_logits, atol=1e-5, rtol=0)
        torch.testing.assert_close(torch.cat([v for _, v in pieces], 1), full_values, atol=1e-5, rtol=0)


def test_day_state_rows_equal_state_features_and_action_mask_bit_for_bit(real_sample):
    from pategail.sdk.day_state import DayState

    days, homes, cells = real_sample["days"], real_sample["homes"], real_sample["cells"]
    state = DayState(cells)
    state.reset(homes, days[:, 0])
    for t in range(days.shape[1]):
        if t:
            state.push(days[:, t])
        np.testing.assert_array_equal(state.features(), real_sample["features"][:, t])
        np.testing.assert_array_equal(state.mask(), real_sample["mask"][:, t])
    np.testing.assert_array_equal(state.days, days)


def _generate_old_path(session, geometry, homes, first, rng, slots=48):
    """The loop generate_days ran before incremental decoding: the full-prefix model on ``state_features``
    and ``action_mask`` of the whole prefix, recomputed at every slot."""
    from pategail.sdk.epr import EPREnvironment
    from pategail.sdk.generate import policy_step, sample_actions

    env = EPREnvironment(geometry, slots=slots, rng=rng)
    env.reset(homes, first)
    lps = []
    while not env.done:
        lp = policy_step(session, env.history(), env.homes, geometry.cells, slots)
        a = sample_actions(lp, rng)
        lps.append(np.take_along_axis(lp, a[:, None].astype(np.int64), 1)[:, 0])
        env.step(a)
    return env.days.copy(), np.stack(lps, 1)


def test_generated_days_equal_the_old_path_for_the_same_seed(bundle, step_session, concat_session, geolife,
                                                             geometry):
    """Same seed → the same days through the incremental model as through the old full-prefix loop; the
    log-probabilities agree within 1e-5 (float rounding), which could only change a day if a uniform draw
    fell within 1e-5 of a CDF step (documented tolerance; none does here)."""
    from pategail.sdk.generate import generate_days

    _, days = geolife
    homes, first = days[200:264, 0], days[200:264, 0]
    old_days, old_lp = _generate_old_path(open_policy_session(bundle), geometry, homes, first,
                                          np.random.default_rng(5))
    new = generate_days(step_session, geometry, homes, first, np.random.default_rng(5))
    np.testing.assert_array_equal(new.days, old_days)
    np.testing.assert_allclose(new.log_probs, old_lp, atol=1e-5, rtol=0)
    # an older bundle's incremental model (growing cache) too
    older = generate_days(concat_session, geometry, homes, first, np.random.default_rng(5))
    np.testing.assert_array_equal(older.days, old_days)
    np.testing.assert_allclose(older.log_probs, old_lp, atol=1e-5, rtol=0)
    # and the full-prefix model through the new loop (running features) gives the old days exactly
    prefix = generate_days(open_policy_session(bundle), geometry, homes, first, np.random.default_rng(5))
    np.testing.assert_array_equal(prefix.days, old_days)
    np.testing.assert_array_equal(prefix.log_probs, old_lp)


def test_coordinator_sampling_uses_the_cache_and_matches_onnx(bundle, torch_models, geolife, geometry):
    from pategail.sdk.generate import generate_days
    from pategail.server.sampling import TorchPolicyStepSession

    _, days = geolife
    homes = days[300:332, 0]
    session = TorchPolicyStepSession(torch_models[0])
    assert isinstance(decoder_for(session), BufferedDecoder)
    assert decoder_for(session).capacities == (47,)     # one buffer: seeded training runs replay as before stages
    a = generate_days(session, geometry, homes, homes, np.random.default_rng(9))
    b = generate_days(open_generation_session(bundle), geometry, homes, homes, np.random.default_rng(9))
    np.testing.assert_array_equal(a.days, b.days)
    np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-5, rtol=0)
