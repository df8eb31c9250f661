"""Messages are bound to the signed round configuration, not just its round id; round ids
are never reused after an abort; a device remembers the last round it accepted across restarts.
"""
from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.sdk.secagg import DeviceIdentity, DevicePublicKeys, MessageRejected, RoundLog, SecAggClient
from pategail.sdk.secagg.messages import KIND_KEY_BROADCAST, RelayedFrames
from pategail.server.checkpoint import abort_intent, journal_intent, read_intents
from pategail.server.secagg import Aggregator, SecAggCoordinator
from pategail.server.secagg.config import SecureRoundConfig

M = 8


def _two_sessions(n: int = 4):
    """Two coordinator sessions with one (persisted) signing key and the same enrolled devices."""
    key = Ed25519PrivateKey.generate()
    first, second = SecAggCoordinator(key), SecAggCoordinator(key)
    identities = {d: DeviceIdentity.generate() for d in range(10, 10 + n)}
    for coordinator in (first, second):
        for d, ident in identities.items():
            coordinator.enroll(d, DevicePublicKeys(ident.signing_public, ident.envelope_public))
    assert first.directory == second.directory
    return first, second, identities


def test_a_message_of_another_configuration_with_the_same_round_id_is_rejected():
    first, second, identities = _two_sessions()
    ids = sorted(identities)
    old = first.new_round(SecureRoundConfig(5, n_min=3), ids, M)
    adverts = {d: SecAggClient(d, identities[d], first.directory).start_round(old.config, old.envelopes[d])
               for d in ids}
    new = second.new_round(SecureRoundConfig(5, n_min=3), ids, M)   # same round id, another configuration
    aggregator = Aggregator(new.config, second.directory)
    with pytest.raises(MessageRejected, match="another configuration of round 5"):
        aggregator.receive_advertise(adverts[ids[0]])       # the network replays the old session's message
    assert not aggregator.adverts                            # ... and the aggregator's state is unchanged

    client = SecAggClient(ids[1], identities[ids[1]], second.directory)
    client.start_round(new.config, new.envelopes[ids[1]])
    stale = RelayedFrames(KIND_KEY_BROADCAST, 5, aggregator.digest,
                          tuple(adverts[d] for d in ids if d != ids[1])).encode()
    with pytest.raises(MessageRejected, match="another configuration"):
        client.share_keys(stale)
    with pytest.raises(MessageRejected, match="decryption"):  # the old envelope does not open under the new one
        SecAggClient(ids[2], identities[ids[2]], second.directory).start_round(new.config, old.envelopes[ids[2]])


def test_the_last_accepted_round_survives_a_restart(tmp_path):
    first, _, identities = _two_sessions()
    ids = sorted(identities)
    start = first.new_round(SecureRoundConfig(7, n_min=3), ids, M)
    log_path = tmp_path / "secagg-rounds.json"
    SecAggClient(ids[0], identities[ids[0]], first.directory, round_log=RoundLog(log_path)).start_round(
        start.config, start.envelopes[ids[0]])
    assert json.loads(log_path.read_text()) == {first.directory.coordinator.hex(): 7}
    restarted = SecAggClient(ids[0], identities[ids[0]], first.directory, round_log=RoundLog(log_path))
    with pytest.raises(MessageRejected, match="replay"):
        restarted.start_round(start.config, start.envelopes[ids[0]])
    newer = first.new_round(SecureRoundConfig(8, n_min=3), ids, M)
    restarted.start_round(newer.config, newer.envelopes[ids[0]])
    assert RoundLog(log_path).last(first.directory.coordinator) == 8


def test_a_refused_round_does_not_advance_the_log(tmp_path):
    first, _, identities = _two_sessions()
    ids = sorted(identities)
    start = first.new_round(SecureRoundConfig(3, n_min=3), ids, M)
    log = RoundLog(tmp_path / "log.json")
    with pytest.raises(MessageRejected):                     # someone else's envelope
        SecAggClient(ids[0], identities[ids[0]], first.directory, round_log=log).start_round(
            start.config, start.envelopes[ids[1]])
    assert log.last(first.directory.coordinator) == -1 and not (tmp_path / "log.json").exists()


def test_round_ids_are_not_reused_after_an_abort(tmp_path):
    first = journal_intent(tmp_path, 19, 1.0, 1.0, 10)
    abort_intent(first)                                      # below n_min: nothing released, nothing counted
    second = journal_intent(tmp_path, 19, 1.0, 1.0, 10)
    attempts = [i["attempt"] for i in read_intents(tmp_path)]
    assert attempts == [1] and first != second
