"""A tampering aggregator is detected; bad messages are rejected without disturbing the round; devices
refuse to reveal both secrets of a device and refuse to help unmask below n_min."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import COORDINATOR, MessageRejected, RefusedUnmask, SecAggAbort, TamperDetected
from pategail.sdk.secagg.fixedpoint import SCALE, encode
from pategail.sdk.secagg.messages import (AggregateResult, MaskedInput, SurvivorSet, UnmaskShares, to_bitmap)
from pategail.sdk.secagg.prg import P61
from pategail.sdk.secagg.wire import VERSION, frame
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

M = 16
N = 8


def _strip_signature(data: bytes) -> bytes:
    """The same frame with its 64-byte signature removed (signature length byte set to 0)."""
    assert data[-65] == 64
    return data[:-65] + b"\x00"


def _exact(clients, values, recorder, result):
    total = np.zeros(2 * M, dtype=np.int64)
    for i, c in enumerate(clients):
        if c.device_id in result.survivors:
            ns, nq = recorder.shares[c.device_id][-2:]
            total += np.concatenate([encode(values[i]) + ns, encode(values[i] ** 2) + nq])
    np.testing.assert_array_equal(np.concatenate([result.sum, result.sq_sum]) * SCALE, total.astype(float))


def _round(federation, rng, adversary, dropouts=None, n_min=4):
    coordinator, clients, recorder = federation(N)
    values = rng.random((N, M))
    config = SecureRoundConfig(round_id=3, n_min=n_min, sum_noise_scale=0.01, sq_sum_noise_scale=0.01)
    result = run_secure_round(clients, values, config, rng, coordinator=coordinator, dropouts=dropouts,
                              adversary=adversary)
    return clients, values, recorder, result


@pytest.mark.parametrize("change", ["plus_one", "plus_p", "swap"])
def test_tampered_aggregate_is_detected(federation, rng, change):
    def adversary(phase, agg, replies):
        if phase != "aggregate":
            return None
        msg = AggregateResult.decode(replies[COORDINATOR])
        sums = msg.sums.copy()
        if change == "plus_one":
            sums[3] += np.uint64(1)
        elif change == "plus_p":  # invisible to the checksum mod p: caught by the range check
            sums[3] += np.uint64(P61)
        else:
            sums[[0, 1]] = sums[[1, 0]]
        return AggregateResult(msg.round_id, msg.config_digest, msg.survivors_bitmap, sums, msg.checksum,
                               msg.acks).encode()

    with pytest.raises(TamperDetected):
        _round(federation, rng, adversary)


def test_forged_checksum_without_key_is_detected(federation, rng):
    def adversary(phase, agg, replies):
        if phase == "aggregate":
            msg = AggregateResult.decode(replies[COORDINATOR])
            sums = msg.sums.copy()
            sums[0] += np.uint64(5)
            return AggregateResult(msg.round_id, msg.config_digest, msg.survivors_bitmap, sums,
                                   (msg.checksum + 5) % P61, msg.acks).encode()

    with pytest.raises(TamperDetected, match="checksum"):
        _round(federation, rng, adversary)


def test_bad_messages_are_rejected_without_disturbing_the_round(federation, rng):
    seen: list[str] = []

    def expect_rejected(receive, data, match):
        with pytest.raises(MessageRejected, match=match):
            receive(data)
        seen.append(match)

    def adversary(phase, agg, replies):
        if phase == "input":
            victim, other = sorted(replies)[:2]
            genuine = replies[victim]
            expect_rejected(agg.receive_masked_input, genuine, "duplicate")  # replay within the round
            expect_rejected(agg.receive_masked_input, _strip_signature(genuine), "unsigned")
            msg = MaskedInput.decode(genuine, agg._dir)
            wrong_signer = MaskedInput(msg.round_id, msg.config_digest, victim, msg.vector).encode(
                fed_identities[other].sign)
            expect_rejected(agg.receive_masked_input, wrong_signer, "bad signature")
            dropped = sorted(set(agg.shares) - set(agg.inputs))[0]  # dropped after ShareKeys: not a duplicate
            short = MaskedInput(msg.round_id, msg.config_digest, dropped, msg.vector[:-2]).encode(
                fed_identities[dropped].sign)
            expect_rejected(agg.receive_masked_input, short, "length")
            old_round = MaskedInput(msg.round_id - 1, msg.config_digest, dropped, msg.vector).encode(
                fed_identities[dropped].sign)
            expect_rejected(agg.receive_masked_input, old_round, "round")
            expect_rejected(agg.receive_shares, b"PGSA" + bytes([VERSION, 5]) + b"\xff" * 10, "truncated")
        if phase == "ack":
            expect_rejected(agg.receive_masked_input, stash["input"], "phase")  # late replay

    stash = {}

    def recording(phase, agg, replies):
        if phase == "input":
            stash["input"] = next(iter(replies.values()))
        adversary(phase, agg, replies)

    coordinator, clients, recorder = federation(N)
    fed_identities = recorder.identities
    values = rng.random((N, M))
    dropouts = Dropouts(after_share_keys=frozenset({clients[-1].device_id}))
    config = SecureRoundConfig(round_id=3, n_min=4, sum_noise_scale=0.01, sq_sum_noise_scale=0.01)
    result = run_secure_round(clients, values, config, rng, coordinator=coordinator, dropouts=dropouts,
                              adversary=recording)
    assert len(seen) == 7
    assert result.n_survivors == N - 1
    _exact(clients, values, recorder, result)


def test_replayed_config_and_forged_envelope_are_rejected(federation, rng):
    coordinator, clients, _ = federation(4)
    ids = [c.device_id for c in clients]
    start = coordinator.new_round(SecureRoundConfig(1, n_min=3), ids, M)
    clients[0].start_round(start.config, start.envelopes[ids[0]])
    with pytest.raises(MessageRejected, match="replay"):
        clients[0].start_round(start.config, start.envelopes[ids[0]])
    start2 = coordinator.new_round(SecureRoundConfig(2, n_min=3), ids, M)
    with pytest.raises(MessageRejected, match="decryption"):  # another device's envelope cannot be opened
        clients[1].start_round(start2.config, start2.envelopes[ids[2]].replace(
            ids[2].to_bytes(4, "big"), ids[1].to_bytes(4, "big"), 1))
    forged = frame(1, start2.config[10:-65], lambda data: bytes(64))  # same body, not the coordinator's key
    with pytest.raises(MessageRejected, match="not signed by the coordinator"):
        clients[1].start_round(forged, start2.envelopes[ids[1]])


def test_device_refuses_a_second_survivor_set(federation, rng):
    """The aggregator cannot show one device two survivor sets (the route to both secrets of a device)."""
    def adversary(phase, agg, replies):
        if phase == "ack":
            cfg = agg.config
            fewer = to_bitmap(set(agg.inputs) - {cfg.participants[0]}, cfg.participants)
            client = clients_by_id[cfg.participants[1]]
            with pytest.raises(RefusedUnmask):
                client.consistency_check(SurvivorSet(cfg.round_id, cfg.digest, fewer).encode())
            refused.append(True)

    refused = []
    coordinator, clients, recorder = federation(N)
    clients_by_id = {c.device_id: c for c in clients}
    values = rng.random((N, M))
    config = SecureRoundConfig(round_id=3, n_min=4)
    result = run_secure_round(clients, values, config, rng, coordinator=coordinator, adversary=adversary)
    assert refused and result.n_survivors == N


def test_unmask_message_with_both_secrets_is_rejected(federation):
    coordinator, clients, recorder = federation(2)
    share = bytes(33)
    ident = recorder.identities[100]
    both = UnmaskShares(1, bytes(32), 100, ((101, share),), ((101, share),)).encode(ident.sign)
    with pytest.raises(MessageRejected, match="both secrets"):
        UnmaskShares.decode(both, coordinator.directory)


def test_device_refuses_to_unmask_below_n_min(federation, rng):
    """Even if a malicious aggregator skips its own check, each device refuses below n_min."""
    def adversary(phase, agg, replies):
        if phase == "input":
            cfg = agg.config
            few = to_bitmap(cfg.participants[:3], cfg.participants)
            with pytest.raises(SecAggAbort, match="n_min"):
                clients[0].consistency_check(SurvivorSet(cfg.round_id, cfg.digest, few).encode())
            refused.append(True)

    refused = []
    coordinator, clients, recorder = federation(N)
    values = rng.random((N, M))
    result = run_secure_round(clients, values, SecureRoundConfig(round_id=3, n_min=6), rng,
                              coordinator=coordinator, adversary=adversary)
    assert refused and result.n_survivors == N  # the refusal left the device able to finish the round
