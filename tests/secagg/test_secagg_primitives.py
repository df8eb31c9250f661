"""Fixed point, Shamir, PRG masks, neighbour graph, wire format: the building blocks, checked one by one."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import MessageRejected, RoundConfig
from pategail.sdk.secagg import shamir
from pategail.sdk.secagg.fixedpoint import (FRAC_BITS, MAX_DEVICES, MAX_NOISE_SCALE_QUANTA, SAFE_ABS_SUM, SCALE,
                                            decode, encode, from_ring, sum_bound, to_ring)
from pategail.sdk.secagg.graph import NeighbourGraph, secure_threshold
from pategail.sdk.secagg.noise import discrete_laplace_share
from pategail.sdk.secagg.prg import P61, add_mask, expand_mask
from pategail.sdk.secagg.wire import VERSION, Reader, Writer, frame, unframe


def test_encoding_clips_to_unit_interval_and_rounds():
    x = encode(np.array([-3.0, 0.0, 0.5, 1.0, 7.0, 2.0**-25, 3 * 2.0**-25]))
    assert x.tolist() == [0, 0, SCALE // 2, SCALE, SCALE, 0, 2]
    assert FRAC_BITS == 24
    with pytest.raises(ValueError):
        encode(np.array([np.nan]))


def test_no_wraparound_at_100000_devices_with_noise():
    """100,000 devices all at the maximum value 1.0, plus their noise shares at the largest allowed scale for
    n_min = n / 2: the sum in Z_2^64 decodes to the exact integer sum, far from the wrap-around point."""
    n, m, n_min = MAX_DEVICES, 4, MAX_DEVICES // 2
    scale = MAX_NOISE_SCALE_QUANTA / 64
    assert sum_bound(n, scale, n_min) < SAFE_ABS_SUM
    x = np.tile(encode(np.ones(m)), (n, 1))
    noise = discrete_laplace_share(scale, n_min, n * m).reshape(n, m)
    ring_sum = np.zeros(m, dtype=np.uint64)
    for rows in np.array_split(to_ring(x + noise), 10):
        ring_sum += rows.sum(axis=0, dtype=np.uint64)  # wraps mod 2^64 like the aggregator's sum
    exact = [sum(int(v) for v in col) for col in (x + noise).T]
    assert from_ring(ring_sum).tolist() == exact
    assert max(abs(e) for e in exact) < SAFE_ABS_SUM
    assert decode(from_ring(ring_sum)) == pytest.approx(n + noise.sum(0) / SCALE)


def test_config_refuses_parameters_that_could_wrap():
    base = dict(round_id=1, participants=tuple(range(MAX_DEVICES)), num_queries=1, threshold=3, degree=4,
                sq_sum_noise_scale=0.0, round_seed=bytes(32), envelope_public=bytes(32))
    RoundConfig(n_min=MAX_DEVICES // 2, sum_noise_scale=2.0**20, **base)
    with pytest.raises(ValueError, match="wrap"):
        RoundConfig(n_min=1, sum_noise_scale=2.0**26, **base)


@pytest.mark.parametrize("threshold, holders", [(1, 1), (2, 3), (5, 9), (51, 100)])
def test_shamir_any_t_shares_recover_and_fewer_do_not(threshold, holders):
    secret = bytes(range(32))
    xs = list(range(1, holders + 1))
    ys = shamir.split(secret, xs, threshold)
    rng = np.random.default_rng(threshold)
    pick = rng.choice(holders, size=threshold, replace=False)
    assert shamir.reconstruct([(xs[i], ys[i]) for i in pick], threshold) == secret
    if threshold > 1:
        with pytest.raises(ValueError):
            shamir.reconstruct([(xs[i], ys[i]) for i in pick[:-1]], threshold)
        # t - 1 shares plus a wrong one give a different secret: changing one y by 1 moves f(0) by that
        # share's Lagrange coefficient, never 0 mod q (a value >= 2^256 would raise: probability ~2^-248)
        bad = [(xs[i], ys[i]) for i in pick[:-1]] + [(xs[pick[-1]], (ys[pick[-1]] + 1) % shamir.PRIME)]
        assert shamir.reconstruct(bad, threshold) != secret
        # t - 1 correct shares interpolated by a curve of degree t - 2 miss f(0) (f has degree t - 1 with a
        # random leading coefficient; they would hit it only if that coefficient were 0: probability 1/q)
        assert shamir.reconstruct([(xs[i], ys[i]) for i in pick[:-1]], threshold - 1) != secret


def test_shamir_prime_is_prime_and_above_2_256():
    p = shamir.PRIME
    assert p > 2**256
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):  # Miller-Rabin, deterministic enough here
        d, s = p - 1, 0
        while d % 2 == 0:
            d, s = d // 2, s + 1
        x = pow(a, d, p)
        assert x in (1, p - 1) or any(pow(x, 2**r, p) == p - 1 for r in range(1, s))


def test_masks_cancel_in_both_rings():
    seed = bytes(range(32))
    acc = np.zeros(9, dtype=np.uint64)
    acc[:-1] = to_ring(np.arange(-4, 4))
    acc[-1] = np.uint64(12345)
    orig = acc.copy()
    mask = expand_mask(seed, 8)
    assert int(mask[-1]) < P61
    add_mask(acc, mask, +1)
    assert not np.array_equal(acc, orig)
    add_mask(acc, mask, -1)
    np.testing.assert_array_equal(acc, orig)
    assert not np.array_equal(expand_mask(seed, 8), expand_mask(bytes(32), 8))
    np.testing.assert_array_equal(expand_mask(seed, 8), mask)  # deterministic in the seed


def test_secagg_plus_graph_is_regular_symmetric_and_agreed():
    ids = tuple(range(10, 1010))
    g1, g2 = NeighbourGraph(ids, b"s" * 32, 40), NeighbourGraph(ids, b"s" * 32, 40)
    for d in ids[:200]:
        nb = g1.neighbours(d)
        assert len(nb) == 40 and d not in nb and nb == g2.neighbours(d)
        assert all(d in g1.neighbours(v) for v in nb)
    assert g1.neighbours(10) != NeighbourGraph(ids, b"t" * 32, 40).neighbours(10)  # the seed matters
    assert NeighbourGraph(ids[:5], b"s" * 32, 0).neighbours(10) == frozenset(ids[1:5])
    assert secure_threshold(1000, 40) == 22 and secure_threshold(1000, 40, colluders=3) == 25
    assert secure_threshold(41, 0) == 21 and secure_threshold(41, 40) == 21  # degree >= n - 1: all pairs


def test_wire_rejects_malformed_frames():
    body = Writer().u64(5).u32s([1, 2]).blob(b"xy").bytes()
    data = frame(9, body)
    got, _, sig = unframe(data, 9)
    r = Reader(got)
    assert (r.u64(), r.u32s(), r.blob()) == (5, (1, 2), b"xy") and sig == b""
    for bad in (data[:-1], data + b"\x00", b"XXXX" + data[4:], data[:4] + bytes([VERSION + 1]) + data[5:]):
        with pytest.raises(MessageRejected):
            unframe(bad, 9)
    with pytest.raises(MessageRejected, match="kind"):
        unframe(data, 8)
    r = Reader(body + b"\x00")
    r.u64(), r.u32s(), r.blob()
    with pytest.raises(MessageRejected, match="trailing"):
        r.done()
