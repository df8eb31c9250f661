"""The run's accountant at unit level: what record_release and the "what if" queries compose, against the pure
functions on the same grid and δ, and the pure-DP figures by hand (Gaussian releases have none)."""
from __future__ import annotations

import pytest

from pategail.sdk.accounting import GaussianRelease, QueryRelease, composed_delta, composed_epsilon
from pategail.server.privacy.accountant import PrivacyAccountant

GRID = 1e-3


def accountant() -> PrivacyAccountant:
    acc = PrivacyAccountant(target_delta=1e-6, value_discretization_interval=GRID)
    acc.record_release(QueryRelease(2.0, 1.0, 10))
    acc.record_release(QueryRelease(2.0, 1.0, 5))                     # identical noise: merged
    acc.record_release(GaussianRelease(3.0, 1.5, 2, 4))
    return acc


def test_record_release_keeps_every_kind_in_order():
    acc = accountant()
    assert acc.releases == (QueryRelease(2.0, 1.0, 15), GaussianRelease(3.0, 1.5, 2, 4))
    assert acc.num_queries == 17
    acc.record(4.0, None, 3)
    assert acc.releases[-1] == QueryRelease(4.0, None, 3) and acc.num_queries == 20


def test_what_if_queries_compose_the_extra_release_without_recording_it():
    acc = accountant()
    before = acc.releases
    extra = QueryRelease(5.0, 2.5, 7)
    expected = composed_epsilon([*before, extra], 1e-6, GRID)
    assert acc.epsilon_after_release(extra) == pytest.approx(expected, rel=1e-12)
    assert acc.epsilon_after(5.0, 2.5, 7) == pytest.approx(expected, rel=1e-12)
    assert acc.epsilon_after_release(GaussianRelease(3.0, 1.5, 1, 4)) == pytest.approx(
        composed_epsilon([before[0], GaussianRelease(3.0, 1.5, 3, 4)], 1e-6, GRID), rel=1e-12)
    assert acc.releases == before                                      # nothing recorded
    assert acc.epsilon_after(5.0, 2.5, 7) > acc.epsilon()


def test_epsilon_and_delta_on_the_accountant_s_grid():
    acc = accountant()
    assert acc.epsilon() == pytest.approx(composed_epsilon(list(acc.releases), 1e-6, GRID), rel=1e-12)
    assert acc.epsilon(1e-3) == pytest.approx(composed_epsilon(list(acc.releases), 1e-3, GRID), rel=1e-12)
    assert acc.epsilon(1e-3) < acc.epsilon()
    laplace = PrivacyAccountant(1e-6, GRID)
    laplace.record(2.0, 1.0, 15)
    assert laplace.delta(4.0) == pytest.approx(composed_delta([QueryRelease(2.0, 1.0, 15)], 4.0, GRID), rel=1e-12)
    assert laplace.delta(4.0) < laplace.delta(2.0)
    # Laplace releases alone are composed by PLD on the accountant's own grid (not the default 1e-4)
    extra = QueryRelease(5.0, 2.5, 7)
    on_grid = composed_epsilon([QueryRelease(2.0, 1.0, 15), extra], 1e-6, GRID)
    assert on_grid != composed_epsilon([QueryRelease(2.0, 1.0, 15), extra], 1e-6)
    assert laplace.epsilon_after(5.0, 2.5, 7) == pytest.approx(on_grid, rel=1e-12)
    assert laplace.epsilon_after_release(extra) == pytest.approx(on_grid, rel=1e-12)
    assert laplace.epsilon() == pytest.approx(composed_epsilon([QueryRelease(2.0, 1.0, 15)], 1e-6, GRID), rel=1e-12)


def test_pure_dp_figures_count_laplace_releases_only():
    acc = accountant()
    acc.record(4.0, None, 3)
    assert acc.max_per_query_epsilon() == pytest.approx(1 / 2 + 1 / 1)
    assert acc.basic_epsilon() == pytest.approx(15 * 1.5 + 3 * 0.25)
    empty = PrivacyAccountant()
    assert empty.max_per_query_epsilon() == 0.0 and empty.basic_epsilon() == 0.0 and empty.epsilon() == 0.0
    assert empty.target_delta == 1e-5 and empty.value_discretization_interval == 1e-4


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5])
def test_target_delta_must_be_a_probability(delta):
    with pytest.raises(ValueError, match="target_delta"):
        PrivacyAccountant(target_delta=delta)
