"""The secure sum equals the plain sum of (encoded values + noise shares) exactly, with dropouts at every step."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import COORDINATOR, SecAggAbort
from pategail.sdk.secagg.fixedpoint import SCALE, encode
from pategail.sdk.secagg.policy import DevicePolicy
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

M = 24
NOISE = 0.01  # value units: shares are non-trivial, so exactness covers the noise path too


def plain_sum(clients, values, recorder, survivors):
    """Σ over survivors of encode(clip(D)), encode(clip(D)²) plus their recorded noise shares (int64)."""
    total = np.zeros(2 * M, dtype=np.int64)
    for i, c in enumerate(clients):
        if c.device_id in survivors:
            d = np.clip(values[i], 0, 1)
            (noise_sum, noise_sq), = [recorder.shares[c.device_id][-2:]]
            total += np.concatenate([encode(d) + noise_sum, encode(d * d) + noise_sq])
    return total


def run(federation, rng, n, fraction, degree=0, aggregator="coordinator"):
    # the devices' threshold floor is a strict majority; this exactness test lowers it on purpose (see below)
    coordinator, clients, recorder = federation(n, policy=DevicePolicy(min_threshold_share=0.3) if degree else None)
    values = rng.uniform(-0.2, 1.2, size=(n, M))  # outside [0, 1] on purpose: the device clips
    ids = [c.device_id for c in clients]
    dropouts = Dropouts.random(ids, fraction, rng)
    # The neighbour graph comes from a fresh public seed (os.urandom) each round. With 41 share holders and 30%
    # dropouts, a strict-majority threshold (21) fails for some neighbourhood in about a third of the runs at
    # n = 200; a third of the holders (13) fails with probability < 1e-4, so the test is not flaky.
    threshold = None if degree == 0 else degree // 3
    config = SecureRoundConfig(round_id=7, n_min=max(1, n // 2), sum_noise_scale=NOISE, sq_sum_noise_scale=NOISE,
                               degree=degree, threshold=threshold, aggregator=aggregator)
    result = run_secure_round(clients, values, config, rng, coordinator=coordinator, dropouts=dropouts)
    return clients, values, recorder, dropouts, result


@pytest.mark.parametrize("n, degree", [(3, 0), (50, 0), (200, 40)])
@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.3])
def test_secure_sum_is_exact(federation, rng, n, degree, fraction):
    clients, values, recorder, dropouts, result = run(federation, rng, n, fraction, degree)
    gone = dropouts.after_advertise | dropouts.after_share_keys
    late = dropouts.after_masked_input | dropouts.after_consistency
    assert set(result.survivors) == {c.device_id for c in clients} - gone
    assert late <= set(result.survivors)  # devices that dropped after sending their vector still count
    if fraction == 0.3 and n >= 50:
        assert dropouts.after_masked_input and dropouts.after_consistency
    expected = plain_sum(clients, values, recorder, set(result.survivors))
    got = np.concatenate([result.sum, result.sq_sum]) * SCALE
    np.testing.assert_array_equal(got, expected.astype(np.float64))
    assert result.n_survivors == len(result.survivors)
    assert not result.stats.rejected


@pytest.mark.slow
def test_secure_sum_all_pairs_n100(federation, rng):
    clients, values, recorder, _, result = run(federation, rng, 100, 0.3, degree=0)
    expected = plain_sum(clients, values, recorder, set(result.survivors))
    np.testing.assert_array_equal(np.concatenate([result.sum, result.sq_sum]) * SCALE, expected.astype(float))


def test_device_as_aggregator_sits_out(federation, rng):
    clients, values, recorder, _, result = run(federation, rng, 12, 0.1, aggregator="device")
    assert result.aggregator != COORDINATOR
    assert result.aggregator in {c.device_id for c in clients} and result.aggregator not in result.survivors
    expected = plain_sum(clients, values, recorder, set(result.survivors))
    np.testing.assert_array_equal(np.concatenate([result.sum, result.sq_sum]) * SCALE, expected.astype(float))


def test_below_n_min_aborts_and_releases_nothing(federation, rng):
    coordinator, clients, _ = federation(10)
    ids = [c.device_id for c in clients]
    dropouts = Dropouts(after_share_keys=frozenset(ids[:4]))
    config = SecureRoundConfig(round_id=1, n_min=7, sum_noise_scale=NOISE, sq_sum_noise_scale=NOISE)
    with pytest.raises(SecAggAbort, match="below n_min=7"):
        run_secure_round(clients, rng.random((10, M)), config, rng, coordinator=coordinator, dropouts=dropouts)


def test_too_many_share_holders_lost_aborts(federation, rng):
    """Dropping after the masked input keeps n_min, but too few holders remain to recover b_u."""
    coordinator, clients, _ = federation(6)
    ids = [c.device_id for c in clients]
    dropouts = Dropouts(after_masked_input=frozenset(ids[:3]))
    config = SecureRoundConfig(round_id=1, n_min=3)  # threshold: 4 of 6 holders
    with pytest.raises(SecAggAbort):
        run_secure_round(clients, rng.random((6, M)), config, rng, coordinator=coordinator, dropouts=dropouts)


def test_noise_shares_are_sized_for_n_min(federation, rng):
    coordinator, clients, recorder = federation(4)
    config = SecureRoundConfig(round_id=1, n_min=3, sum_noise_scale=0.5, sq_sum_noise_scale=0.25)
    run_secure_round(clients, rng.random((4, M)), config, rng, coordinator=coordinator)
    # each device asks for one share of the Σ D noise and one of the Σ D² noise, both split among n_min = 3
    # (not among the 4 participants: with one dropout, 3 survivors must still add the whole noise)
    for c in clients:
        assert recorder.calls[c.device_id] == [(0.5 * SCALE, 3, M), (0.25 * SCALE, 3, M)]
        assert [s.shape for s in recorder.shares[c.device_id]] == [(M,), (M,)]
    # every device drew noise, and the shares are not all equal across devices (independent CSPRNG draws)
    firsts = [recorder.shares[c.device_id][0] for c in clients]
    assert not all(np.array_equal(firsts[0], f) for f in firsts[1:])



def _opened_keys(start, coordinator, recorder, round_id):
    """The checksum key each device finds in its envelope, opened the way a device's client does."""
    from pategail.sdk.secagg import crypto
    from pategail.sdk.secagg.checksum import envelope_aad, envelope_key, unpack_secrets
    from pategail.sdk.secagg.config import RoundConfig
    from pategail.sdk.secagg.messages import ChecksumEnvelope

    cfg = RoundConfig.from_signed_bytes(start.config, coordinator.directory.coordinator)
    keys = {}
    for d, raw in start.envelopes.items():
        env = ChecksumEnvelope.decode(raw)
        shared = crypto.agree(recorder.identities[d].envelope_key, cfg.envelope_public)
        keys[d] = unpack_secrets(crypto.open_sealed(envelope_key(shared, cfg.digest, d), env.sealed,
                                                    envelope_aad(cfg.digest, d)))[0]
    return cfg, keys


def test_checksum_key_is_fresh_each_round_and_not_in_the_public_config(federation):
    coordinator, clients, recorder = federation(3)
    ids = [c.device_id for c in clients]
    seen = []
    for round_id in (1, 2):
        start = coordinator.new_round(SecureRoundConfig(round_id, n_min=2), ids, 4)
        cfg, keys = _opened_keys(start, coordinator, recorder, round_id)
        assert len(set(keys.values())) == 1                    # one key per round, for every device
        key = keys[ids[0]]
        assert len(key) == 32
        assert key not in (cfg.round_seed, cfg.envelope_public, bytes(32)) and key not in start.config
        seen.append(key)
    assert seen[0] != seen[1]
