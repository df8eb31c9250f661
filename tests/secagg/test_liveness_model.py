"""The liveness model (server.secagg.liveness) predicts exactly which real rounds complete: same graph, same
dropout schedule, the real protocol against the model's rules."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pategail.sdk.secagg import SecAggAbort
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.graph import NeighbourGraph, round_failure_bound, secagg_plus_degree, secure_threshold
from pategail.server.secagg import coordinator as coordinator_module
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.liveness import round_completes
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, enroll_clients, run_secure_round


class _Recording(SecAggCoordinator):
    def new_round(self, *args, **kwargs):
        start = super().new_round(*args, **kwargs)
        self.last = RoundConfig.from_signed_bytes(start.config, self.directory.coordinator)
        return start


@pytest.mark.parametrize("n, degree", [(40, 8), (30, 0)])
def test_the_model_agrees_with_real_rounds(rng, n, degree, monkeypatch):
    # the round seeds (which neighbour graph each round has) from the test's seeded generator, not the OS: with
    # random graphs a run could, rarely, abort all 16 rounds and compare only one kind
    monkeypatch.setattr(coordinator_module, "os", SimpleNamespace(urandom=rng.bytes))
    coordinator = _Recording()
    ids = list(range(1, n + 1))
    clients = enroll_clients(coordinator, ids)
    outcomes = set()
    for trial in range(16):
        fraction = (0.15, 0.3, 0.4, 0.5)[trial % 4]
        dropouts = Dropouts.random(ids, fraction, rng)
        config = SecureRoundConfig(round_id=trial + 1, n_min=n // 2, degree=degree, sum_noise_scale=0.01,
                                   sq_sum_noise_scale=0.01)
        try:
            run_secure_round(clients, rng.random((n, 2)), config, rng, coordinator=coordinator, dropouts=dropouts)
            real = True
        except SecAggAbort:
            real = False
        cfg = coordinator.last
        graph = NeighbourGraph(cfg.participants, cfg.round_seed, cfg.degree)
        predicted = round_completes(graph, cfg.threshold, cfg.n_min, dropouts)
        assert predicted.complete == real, (trial, fraction, predicted)
        outcomes.add(real)
    assert outcomes == {True, False}            # both kinds of round were compared


def test_the_default_degree_meets_its_failure_bound_and_the_bound_holds():
    """secagg_plus_degree picks the smallest even k within the bound; the bound itself is an upper bound on
    the model's failure rate (independent dropouts, 300 rounds)."""
    k = secagg_plus_degree(300, 0.2, failure=0.05)
    assert round_failure_bound(300, k, 0.2) <= 0.05 < round_failure_bound(300, k - 2, 0.2)
    rng = np.random.default_rng(0)
    ids = tuple(range(300))
    failed = 0
    for _ in range(300):
        gone = [d for d in ids if rng.random() < 0.2]
        dropouts = Dropouts(after_consistency=frozenset(gone))
        graph = NeighbourGraph(ids, rng.bytes(32), k)
        failed += not round_completes(graph, secure_threshold(300, k), 150, dropouts).complete
    assert failed / 300 <= 0.05 + 3 * (0.05 * 0.95 / 300) ** 0.5
