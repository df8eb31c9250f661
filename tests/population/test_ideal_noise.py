"""The ideal functionality's noise (pategail.population.ideal.distributed_noise) against closed forms: the sum
of S shares sized for d devices has S/d times the total variance — discrete Laplace 2q/(1−q)², discrete
Gaussian σ² — whatever the chunking of the Gaussian draws. Unit-level: no fleet, no data set."""
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
    std = 12.0
    total = distributed_noise(std, divisor, contributors, SIZE, "gaussian")
    assert total.dtype == np.int64 and total.shape == (SIZE,)
    assert total.var() == pytest.approx(contributors / divisor * std ** 2, rel=0.04)
    assert abs(total.mean()) < 6 * std * np.sqrt(contributors / divisor / SIZE)
    # Gaussian, not Laplace: the excess kurtosis of a Gaussian is 0 (a Laplace sum of S/d of the law: 3d/S)
    kurtosis = np.mean((total - total.mean()) ** 4) / total.var() ** 2 - 3
    assert abs(kurtosis) < 0.15


def test_gaussian_default_chunk_holds_every_contributor_in_one_draw():
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
