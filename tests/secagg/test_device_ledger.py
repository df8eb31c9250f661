"""The device's ledger: each device accounts the releases it took part in with the coordinator's
accountant, refuses a round that would take it past its own budget — state unchanged — and keeps the ledger
across restarts."""
from __future__ import annotations

import pytest

from pategail.sdk.accounting import QueryRelease, composed_epsilon
from pategail.sdk.secagg import RoundLog, SecAggClient
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.ledger import LEDGER_INTERVAL, PrivacyLedger
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

M, N, SCALE_B, DELTA = 8, 6, 4.0, 1e-5


def _two_rounds_budget() -> float:
    """Exactly what two rounds of M queries at Laplace scale SCALE_B (both sums) cost, on the ledger's grid."""
    return composed_epsilon([QueryRelease(SCALE_B, SCALE_B, 2 * M)], DELTA, LEDGER_INTERVAL) * (1 + 1e-9)


def _rounds(federation, rng, ledger_path, first_round, n_rounds, coordinator_and_ids=None):
    """Run rounds with device 100 holding a ledger at ``ledger_path``; returns what each round did for it."""
    coordinator, clients, recorder = coordinator_and_ids or federation(N)
    device = SecAggClient(100, recorder.identities[100], coordinator.directory,
                          ledger=PrivacyLedger(ledger_path, _two_rounds_budget(), DELTA))
    clients = [device, *clients[1:]]
    out = []
    for k in range(n_rounds):
        config = SecureRoundConfig(round_id=first_round + k, n_min=4, sum_noise_scale=SCALE_B,
                                   sq_sum_noise_scale=SCALE_B)
        result = run_secure_round(clients, rng.random((N, M)), config, rng, coordinator=coordinator)
        out.append(100 in result.survivors)
    return out, device, (coordinator, clients, recorder)


def test_the_third_round_is_refused_and_the_ledger_survives_a_restart(federation, rng, tmp_path):
    path = tmp_path / "privacy-ledger.json"
    took_part, device, fed = _rounds(federation, rng, path, 1, 3)
    assert took_part == [True, True, False]                  # the others release round 3 without it
    assert device.ledger.releases == (QueryRelease(SCALE_B, SCALE_B, 2 * M),)
    before = path.read_bytes()
    restarted = PrivacyLedger(path, _two_rounds_budget(), DELTA)
    assert restarted.releases == device.ledger.releases
    took_part, _, _ = _rounds(federation, rng, path, 10, 1, fed)
    assert took_part == [False] and path.read_bytes() == before


def test_a_refusal_leaves_the_device_as_it_was(federation, tmp_path):
    coordinator, clients, recorder = federation(4)
    ids = [c.device_id for c in clients]
    ledger = PrivacyLedger(tmp_path / "ledger.json", target_epsilon=1e-3)
    log = RoundLog(tmp_path / "rounds.json")
    device = SecAggClient(ids[0], recorder.identities[ids[0]], coordinator.directory, ledger=ledger, round_log=log)
    start = coordinator.new_round(SecureRoundConfig(3, n_min=3, sum_noise_scale=SCALE_B,
                                                    sq_sum_noise_scale=SCALE_B), ids, M)
    with pytest.raises(RoundRefused, match="past its budget") as refused:
        device.start_round(start.config, start.envelopes[ids[0]])
    assert refused.value.code == "budget" and device.phase.name == "IDLE"
    assert ledger.releases == () and not (tmp_path / "ledger.json").exists() and not (tmp_path / "rounds.json").exists()
    noiseless = coordinator.new_round(SecureRoundConfig(4, n_min=3), ids, M)
    with pytest.raises(RoundRefused, match="no noise"):
        device.start_round(noiseless.config, noiseless.envelopes[ids[0]])


def test_a_device_is_charged_only_once_its_input_leaves(federation, rng, tmp_path):
    """A device that refuses or drops before its masked input is not charged; the release it joins is."""
    coordinator, clients, recorder = federation(N)
    ledger = PrivacyLedger(tmp_path / "l.json")               # no budget: records only
    device = SecAggClient(100, recorder.identities[100], coordinator.directory, ledger=ledger)
    config = SecureRoundConfig(round_id=1, n_min=4, sum_noise_scale=SCALE_B, sq_sum_noise_scale=SCALE_B)
    run_secure_round([device, *clients[1:]], rng.random((N, M)), config, rng, coordinator=coordinator,
                     dropouts=Dropouts(after_share_keys=frozenset({100})))
    assert ledger.releases == ()
    config = SecureRoundConfig(round_id=2, n_min=4, sum_noise_scale=SCALE_B, sq_sum_noise_scale=SCALE_B)
    run_secure_round([device, *clients[1:]], rng.random((N, M)), config, rng, coordinator=coordinator)
    assert ledger.releases == (QueryRelease(SCALE_B, SCALE_B, M),)
    assert ledger.epsilon() == pytest.approx(
        composed_epsilon([QueryRelease(SCALE_B, SCALE_B, M)], DELTA, LEDGER_INTERVAL))
