"""The ideal functionality's noise (pategail.population.ideal.distributed_noise) against closed forms: the sum
of S shares sized for d devices has S/d times the total variance — discrete Laplace 2q/(1−q)², discrete
Gaussian σ² — whatever the chunking of the Gaussian draws, and one draw stands for the Gaussian sum exactly
where the shares are wide enough for the sum to be a discrete Gaussian up to τ < 2^-64. Unit-level: no fleet,
no data set."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.population import ideal
from pategail.population.ideal import distributed_noise

SIZE = 60_000


def dlap_var(scale: float) -> float:
    q = np.exp(-1 / scale)
    return 2 * q / (1 - q) ** 2


@pytest.mark.parametrize("contributors, divisor, per_chunk", [(5, 2, 2), (3, 3, 1), (4, 1, 3)])
def test_gaussian_sum_has_s_over_d_times_the_variance_in_any_chunking(monkeypatch, contributors, divisor,
                                                                      per_chunk):
    # chunks of per_chunk contributors (the last one shorter when it does not divide): every contributor counted once
    monkeypatch.setattr(ideal, "CHUNK_VALUES", per_chunk * SIZE + SIZE // 2)
    monkeypatch.setattr(ideal, "SUM_TAU", 0.0)             # share by share, however wide the shares
    std = 12.0
    total = distributed_noise(std, divisor, contributors, SIZE, "gaussian")
    assert total.dtype == np.int64 and total.shape == (SIZE,)
    assert total.var() == pytest.approx(contributors / divisor * std ** 2, rel=0.04)
    assert abs(total.mean()) < 6 * std * np.sqrt(contributors / divisor / SIZE)
    # Gaussian, not Laplace: the excess kurtosis of a Gaussian is 0 (a Laplace sum of S/d of the law: 3d/S)
    kurtosis = np.mean((total - total.mean()) ** 4) / total.var() ** 2 - 3
    assert abs(kurtosis) < 0.15


def test_gaussian_default_chunk_holds_every_contributor_in_one_draw(monkeypatch):
    monkeypatch.setattr(ideal, "SUM_TAU", 0.0)
    total = distributed_noise(5.0, 4, 6, 20_000, "gaussian")
    assert total.shape == (20_000,)
    assert total.var() == pytest.approx(6 / 4 * 25.0, rel=0.06)


def test_laplace_sum_of_divisor_one_shares():
    """Divisor 1 is allowed (one honest share carries all the noise): S contributors give S times DLap's variance."""
    total = distributed_noise(16.0, 1, 3, SIZE)
    assert total.var() == pytest.approx(3 * dlap_var(16.0), rel=0.05)


@pytest.mark.parametrize("contributors, divisor", [(0, 3), (3, 0), (-1, 2)])
def test_at_least_one_contributor_and_divisor(contributors, divisor):
    with pytest.raises(ValueError, match="at least 1"):
        distributed_noise(16.0, divisor, contributors, 10)


def _counting_shares(monkeypatch):
    from pategail.sdk.secagg.mechanisms import GAUSSIAN
    calls, share = [], GAUSSIAN.noise_share

    def counted(scale_quanta, n_min, size):
        calls.append(size)
        return share(scale_quanta, n_min, size)
    monkeypatch.setattr(GAUSSIAN, "noise_share", counted)
    return calls


def test_one_draw_stands_for_wide_gaussian_shares_and_narrow_ones_are_drawn_each(monkeypatch):
    from pategail.sdk.accounting import discrete_gaussian_tau
    calls = _counting_shares(monkeypatch)
    contributors, divisor, std = 10_000, 8_000, 3.0e6         # a share of 33,541 quanta: τ underflows to 0
    total = distributed_noise(std, divisor, contributors, SIZE, "gaussian")
    assert calls == [SIZE]
    assert total.var() == pytest.approx(contributors / divisor * std ** 2, rel=0.04)
    kurtosis = np.mean((total - total.mean()) ** 4) / total.var() ** 2 - 3
    assert abs(kurtosis) < 0.15
    # shares of 2 quanta: τ = 7e-17 at 10,000 contributors, above SUM_TAU — drawn share by share
    calls.clear()
    narrow = 2.0 * np.sqrt(divisor)
    assert discrete_gaussian_tau(2.0, contributors) > ideal.SUM_TAU
    total = distributed_noise(narrow, divisor, contributors, 1_000, "gaussian")
    assert sum(calls) == contributors * 1_000
    assert total.var() == pytest.approx(contributors / divisor * narrow ** 2, rel=0.2)
