"""The survivor set the coordinator divides by is the one the devices signed.

An aggregator that removes a survivor from, or adds a dropped device to, the survivor bitmap it reports (sums
unchanged) would bias every mean R = Σ D / n by ~1/n. The coordinator now checks the bitmap against the
devices' signed consistency-check acknowledgements and against the per-device checksum offsets.
"""
from __future__ import annotations

import pytest

from pategail.sdk.secagg import COORDINATOR, TamperDetected
from pategail.sdk.secagg.client import survivor_digest
from pategail.sdk.secagg.messages import AggregateResult, SurvivorAck, from_bitmap, to_bitmap
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

M, N = 16, 8


def _run(federation, rng, rewrite, dropouts=None):
    """One round whose aggregate the adversary rewrites: ``rewrite(msg, cfg, identities) -> AggregateResult``."""
    coordinator, clients, recorder = federation(N)

    def adversary(phase, agg, replies):
        if phase == "aggregate":
            return rewrite(AggregateResult.decode(replies[COORDINATOR]), agg.config, recorder.identities).encode()

    config = SecureRoundConfig(round_id=5, n_min=4, sum_noise_scale=0.01, sq_sum_noise_scale=0.01)
    return run_secure_round(clients, rng.random((N, M)), config, rng, coordinator=coordinator,
                            dropouts=dropouts, adversary=adversary)


def _with_bitmap(msg, bitmap, acks=None):
    return AggregateResult(msg.round_id, msg.config_digest, bitmap, msg.sums, msg.checksum,
                           msg.acks if acks is None else acks)


def test_removing_a_survivor_is_detected(federation, rng):
    def rewrite(msg, cfg, _):
        survivors = from_bitmap(msg.survivors_bitmap, cfg.participants)
        return _with_bitmap(msg, to_bitmap(survivors[1:], cfg.participants))

    with pytest.raises(TamperDetected, match="round 5"):
        _run(federation, rng, rewrite)


def test_adding_a_dropped_device_is_detected(federation, rng):
    dropped = 100 + N - 1

    def rewrite(msg, cfg, _):
        survivors = from_bitmap(msg.survivors_bitmap, cfg.participants)
        assert dropped not in survivors
        return _with_bitmap(msg, to_bitmap([*survivors, dropped], cfg.participants))

    with pytest.raises(TamperDetected, match="round 5"):
        _run(federation, rng, rewrite, Dropouts(after_advertise=frozenset({dropped})))


def test_aggregate_without_the_devices_signatures_is_refused(federation, rng):
    with pytest.raises(TamperDetected, match="signed the survivor set"):
        _run(federation, rng, lambda msg, cfg, _: _with_bitmap(msg, msg.survivors_bitmap, acks=()))


def test_a_colluding_quorum_cannot_move_the_survivor_set_past_the_checksum(federation, rng):
    """Even with ``threshold`` devices signing the altered set (they collude with the aggregator), the set
    must match the offsets inside the checksum: the survivor set is bound to both."""
    def rewrite(msg, cfg, identities):
        survivors = from_bitmap(msg.survivors_bitmap, cfg.participants)
        bitmap = to_bitmap(survivors[1:], cfg.participants)
        digest = survivor_digest(cfg.digest, bitmap)
        acks = tuple(SurvivorAck(cfg.round_id, cfg.digest, d, digest).encode(identities[d].sign) for d in survivors[1:])
        return _with_bitmap(msg, bitmap, acks)

    with pytest.raises(TamperDetected, match="checksum"):
        _run(federation, rng, rewrite)


def test_honest_aggregate_carries_enough_signatures(federation, rng):
    result = _run(federation, rng, lambda msg, cfg, _: msg, Dropouts(after_masked_input=frozenset({101})))
    assert result.n_survivors == N and 101 in result.survivors
