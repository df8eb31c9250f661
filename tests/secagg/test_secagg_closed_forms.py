"""Shamir, fixed point, noise and checksum against values worked by hand or closed forms."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pategail.sdk.secagg import crypto, shamir
from pategail.sdk.secagg.checksum import checksum, envelope_aad, envelope_key, unpack_secrets, weights
from pategail.sdk.secagg.errors import TamperDetected
from pategail.sdk.secagg.fixedpoint import SAFE_ABS_SUM, SCALE, clip_unit, decode, encode, from_ring, sum_bound, to_ring
from pategail.sdk.secagg.noise import csprng_uniform, discrete_laplace_share, negative_binomial
from pategail.sdk.secagg.prg import P61
from pategail.server.secagg.checksum import seal_envelope, verify_aggregate

Q = shamir.PRIME


# -- Shamir -------------------------------------------------------------------------------------------------
def test_reconstruct_a_line_by_hand():
    # f(x) = 5 + 7x: shares (1, 12), (2, 19); Lagrange at 0: 2·12 - 1·19 = 5
    assert shamir.reconstruct([(1, 12), (2, 19)], 2) == (5).to_bytes(32, "big")
    # f(x) = 1 + 2x + 3x²: (1, 6), (2, 17), (4, 57) -> f(0) = 1, in any order
    assert shamir.reconstruct([(4, 57), (1, 6), (2, 17)], 3) == (1).to_bytes(32, "big")
    # the first t shares by x are used: a wrong extra share at a larger x does not matter
    assert shamir.reconstruct([(2, 19), (1, 12), (9, 1234)], 2) == (5).to_bytes(32, "big")
    # a negative coefficient lives mod q: f(x) = 3 - x: (1, 2), (3, 0)
    assert shamir.reconstruct([(1, 2), (3, 0)], 2) == (3).to_bytes(32, "big")


def test_split_has_degree_exactly_t_minus_1():
    """t + 1 shares lie on one curve of degree t - 1 (any t of them predict the last); t - 1 do not fix f(0)."""
    secret = bytes(range(100, 132))
    for t in (2, 3, 5):
        xs = list(range(1, t + 3))
        ys = shamir.split(secret, xs, t)
        pts = list(zip(xs, ys))
        # predict share t+1 from the first t by Lagrange at x = xs[t] (independent of reconstruct's code)
        x0 = xs[t]
        pred = 0
        for i in range(t):
            num, den = 1, 1
            for j in range(t):
                if j != i:
                    num = num * (x0 - xs[j]) % Q
                    den = den * (xs[i] - xs[j]) % Q
            pred = (pred + ys[i] * num * pow(den, -1, Q)) % Q
        assert pred == ys[t]
        assert shamir.reconstruct(pts[1:t + 1], t) == secret
        assert shamir.reconstruct(pts[:t - 1] + [pts[-1]], t) == secret
        # with t - 1 shares, the degree t - 2 curve through them misses the secret
        if t > 1:
            assert shamir.reconstruct(pts[:t - 1], t - 1) != secret


def test_threshold_one_gives_every_holder_the_secret():
    secret = bytes(range(32))
    assert shamir.split(secret, [1, 2, 3], 1) == [int.from_bytes(secret, "big")] * 3


def test_split_draws_fresh_coefficients():
    a = shamir.split(bytes(32), [1, 2], 2)
    b = shamir.split(bytes(32), [1, 2], 2)
    assert a != b                              # probability 1/q of a collision
    assert all(0 <= y < Q for y in a + b)


@pytest.mark.parametrize("secret, xs, t", [
    (bytes(31), [1, 2], 1), (bytes(33), [1, 2], 1), (bytes(32), [1, 2], 0), (bytes(32), [1, 2], 3),
    (bytes(32), [1, 1], 2), (bytes(32), [0, 1], 2), (bytes(32), [1, Q], 2), (bytes(32), [1, -1], 2)])
def test_split_rejects_bad_parameters(secret, xs, t):
    with pytest.raises(ValueError):
        shamir.split(secret, xs, t)


def test_split_accepts_the_extreme_parameters():
    secret = (1 << 256) - 1
    ys = shamir.split(secret.to_bytes(32, "big"), [1, Q - 1], 2)
    assert shamir.reconstruct([(1, ys[0]), (Q - 1, ys[1])], 2) == secret.to_bytes(32, "big")
    assert shamir.split(bytes(32), [5], 1) == [0]


def test_reconstruct_refuses_too_few_and_values_beyond_32_bytes():
    with pytest.raises(ValueError):
        shamir.reconstruct([(1, 12), (1, 12)], 2)        # one distinct share only
    with pytest.raises(ValueError):
        shamir.reconstruct([(1, 1 << 256)], 1)           # f(0) = 2^256 is a field element, not 32 bytes
    assert shamir.reconstruct([(1, (1 << 256) - 1)], 1) == b"\xff" * 32


def test_share_bytes_round_trip_and_range():
    assert shamir.y_to_bytes(Q - 1) == (Q - 1).to_bytes(33, "big")
    assert shamir.y_from_bytes((Q - 1).to_bytes(33, "big")) == Q - 1
    assert shamir.y_from_bytes(bytes(33)) == 0
    with pytest.raises(ValueError):
        shamir.y_from_bytes(Q.to_bytes(33, "big"))
    for n in (32, 34):
        with pytest.raises(ValueError):
            shamir.y_from_bytes(bytes(n))


# -- fixed point --------------------------------------------------------------------------------------------
def test_fixed_point_by_hand():
    assert SCALE == 2**24
    assert encode(np.array([0.25, 1 - 2.0**-24, 2.5 * 2.0**-24])).tolist() == [2**22, 2**24 - 1, 2]
    assert encode(np.array([0.5])).dtype == np.int64
    assert to_ring(np.array([-1, 0, 5])).tolist() == [2**64 - 1, 0, 5]
    assert to_ring(np.array([-1])).dtype == np.uint64
    assert from_ring(np.array([2**64 - 1, 2**63, 2**63 - 1], dtype=np.uint64)).tolist() == [-1, -2**63, 2**63 - 1]
    assert decode(np.array([2**24, -2**23, 3])).tolist() == [1.0, -0.5, 3 / 2**24]
    np.testing.assert_array_equal(clip_unit([-0.5, 0.3, 1.5]), [0.0, 0.3, 1.0])
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError):
            clip_unit([0.5, bad])


def test_sum_bound_closed_form():
    """B = n 2^24 + t, t = (2/a)(r ln(p / (1 - e^(-a/2))) + (k+1) ln 2), p = 1 - e^(-a), r = n / n_min."""
    assert sum_bound(10, 0.0, 5) == 10 * 2**24
    for n, scale, n_min, k in [(10, 1e6, 5, 64.0), (1000, 2.0**30, 100, 64.0), (7, 3.0, 7, 10.0)]:
        a = 1 / scale
        p = 1 - math.exp(-a)
        t = 2 / a * ((n / n_min) * math.log(p / (1 - math.exp(-a / 2))) + (k + 1) * math.log(2))
        assert sum_bound(n, scale, n_min, k) == pytest.approx(n * 2**24 + t, rel=1e-9)


def test_sum_bound_is_a_bound_on_sampled_sums():
    """With tail 2^-10 the bound holds for 2000 sums of 8 shares at n_min 4 (all > bound would be a bug)."""
    n, n_min, scale = 8, 4, 50.0
    shares = np.stack([discrete_laplace_share(scale, n_min, 2000) for _ in range(n)])
    bound = sum_bound(n, scale, n_min, tail_log2=10.0) - n * SCALE
    assert np.abs(shares.sum(0)).max() < bound
    # and it is not vacuous: a tenth of the noise bound is exceeded somewhere
    assert np.abs(shares.sum(0)).max() > bound / 10


# -- noise --------------------------------------------------------------------------------------------------
def _dlap_var(scale):
    q = math.exp(-1 / scale)
    return 2 * q / (1 - q) ** 2


@pytest.mark.parametrize("n_min", [1, 4])
def test_one_share_carries_one_n_min_th_of_the_variance(n_min):
    """Var DLap(a) = 2q/(1-q)², q = e^(-a); a share is an n_min-th of it (NB(1/n_min) - NB(1/n_min))."""
    scale = 6.0
    x = discrete_laplace_share(scale, n_min, 400_000)
    assert x.dtype == np.int64 and x.shape == (400_000,)
    assert x.var() == pytest.approx(_dlap_var(scale) / n_min, rel=0.03)
    assert abs(x.mean()) < 5 * math.sqrt(_dlap_var(scale) / n_min / 400_000)


def test_summed_shares_have_the_discrete_laplace_pmf():
    """n_min = 3 shares sum to DLap: P(k) = (1-q)/(1+q) q^|k|."""
    scale, size = 2.0, 300_000
    total = sum(discrete_laplace_share(scale, 3, size) for _ in range(3))
    q = math.exp(-1 / scale)
    for k in (0, 1, -1, 3, -4):
        p = (1 - q) / (1 + q) * q ** abs(k)
        assert np.mean(total == k) == pytest.approx(p, abs=5 * math.sqrt(p / size))


def test_negative_binomial_moments():
    """NB(r, p = 1 - q) counting failures: mean r q / (1 - q), variance r q / (1 - q)²."""
    r, a, size = 0.5, 0.2, 400_000
    q = math.exp(-a)
    x = negative_binomial(r, a, size)
    assert x.min() >= 0
    assert x.mean() == pytest.approx(r * q / (1 - q), rel=0.02)
    assert x.var() == pytest.approx(r * q / (1 - q) ** 2, rel=0.04)
    # P(0) = p^r, P(1) = r p^r q, P(2) = r (r + 1) / 2 p^r q²
    p = 1 - q
    assert np.mean(x == 0) == pytest.approx(p ** r, abs=0.005)
    assert np.mean(x == 1) == pytest.approx(r * p ** r * q, abs=0.004)
    assert np.mean(x == 2) == pytest.approx(r * (r + 1) / 2 * p ** r * q ** 2, abs=0.004)


def test_noise_scale_limits():
    assert discrete_laplace_share(0, 3, 5).tolist() == [0] * 5
    assert discrete_laplace_share(1.0, 1, 3).shape == (3,)
    for scale in (0.5, 2.0**50 * 1.01):
        with pytest.raises(ValueError):
            discrete_laplace_share(scale, 3, 5)
    with pytest.raises(ValueError):
        discrete_laplace_share(10.0, 0, 5)


def test_csprng_uniforms_fill_the_open_unit_interval():
    u = csprng_uniform(200_000)
    assert u.min() > 0 and u.max() < 1
    assert u.mean() == pytest.approx(0.5, abs=0.005) and u.var() == pytest.approx(1 / 12, rel=0.02)
    # 53 random bits each: more than 2^32 distinct levels in a small sample
    assert len(np.unique(u[:1000])) == 1000 and np.any(u * 2.0**32 % 1 != 0)


# -- checksum -----------------------------------------------------------------------------------------------
def test_checksum_is_the_weighted_sum_plus_the_offset_mod_p61():
    w = [3, P61 - 1, 10]
    assert checksum(np.array([1, 2, -4]), w, 0) == (3 + 2 * (P61 - 1) - 40) % P61
    assert checksum(np.array([0, 0, 0]), w, 0) == 0
    assert checksum(np.array([0, 0, 0]), w, P61 - 1) == P61 - 1
    assert checksum(np.array([1, 2, -4]), w, 7) == (3 + 2 * (P61 - 1) - 40 + 7) % P61
    assert checksum(np.array([2**62, 0, 0]), w, 0) == 3 * 2**62 % P61


def test_checksum_weights_depend_on_the_key_and_are_in_the_field():
    a, b = weights(b"\x01" * 32, 50), weights(b"\x02" * 32, 50)
    assert len(a) == 50 and all(0 <= w < P61 for w in a)
    assert a != b and len(set(a)) == 50
    assert weights(b"\x01" * 32, 10) == a[:10]                 # a prefix: one expansion per key


def test_envelope_is_bound_to_configuration_and_device():
    d1, d2 = b"\x01" * 32, b"\x02" * 32                        # two round configurations' digests
    assert envelope_aad(d1, 2) != envelope_aad(d2, 2) and envelope_aad(d1, 2) != envelope_aad(d1, 3)
    s = b"\x07" * 32
    keys = {envelope_key(s, d, dev) for d in (d1, d2) for dev in (1, 2)}
    assert len(keys) == 4 and envelope_key(s, d1, 1) != envelope_key(b"\x08" * 32, d1, 1)


def test_sealed_envelope_opens_only_for_its_device_with_the_key():
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from pategail.sdk.secagg.messages import ChecksumEnvelope

    eph, dev, other = (X25519PrivateKey.generate() for _ in range(3))
    digest = b"\x05" * 32
    sealed = ChecksumEnvelope.decode(seal_envelope(eph, crypto.public_bytes(dev), 4, digest, 9, b"K" * 32, 11))
    assert (sealed.round_id, sealed.device) == (4, 9)
    shared = crypto.agree(dev, crypto.public_bytes(eph))
    plain = crypto.open_sealed(envelope_key(shared, digest, 9), sealed.sealed, envelope_aad(digest, 9))
    assert unpack_secrets(plain) == (b"K" * 32, 11)
    with pytest.raises(Exception):
        crypto.open_sealed(envelope_key(crypto.agree(other, crypto.public_bytes(eph)), digest, 9), sealed.sealed,
                           envelope_aad(digest, 9))


def test_verify_aggregate_checks_range_and_checksum():
    key, offsets = b"k" * 32, 12345
    sums = np.array([5, -3, SAFE_ABS_SUM - 1], dtype=np.int64)
    c = checksum(sums, weights(key, 3), offsets)
    np.testing.assert_array_equal(verify_aggregate(to_ring(sums), c, key, offsets, 1), sums)
    with pytest.raises(TamperDetected):
        verify_aggregate(to_ring(sums), (c + 1) % P61, key, offsets, 1)
    with pytest.raises(TamperDetected):
        verify_aggregate(to_ring(sums), c, b"j" * 32, offsets, 1)
    with pytest.raises(TamperDetected):                         # another survivor set: other offsets
        verify_aggregate(to_ring(sums), c, key, offsets + 1, 1)
    changed = sums.copy()
    changed[0] += 1
    with pytest.raises(TamperDetected):
        verify_aggregate(to_ring(changed), c, key, offsets, 1)
    for edge in (SAFE_ABS_SUM, -SAFE_ABS_SUM, -2**63, 2**63 - 1):
        big = np.array([edge], dtype=np.int64)
        with pytest.raises(TamperDetected, match="range"):
            verify_aggregate(to_ring(big), checksum(big, weights(key, 1), 0), key, 0, 1)
    ok = np.array([-(SAFE_ABS_SUM - 1)], dtype=np.int64)
    verify_aggregate(to_ring(ok), checksum(ok, weights(key, 1), 0), key, 0, 1)
