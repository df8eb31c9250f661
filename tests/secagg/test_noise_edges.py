"""Edge cases of the noise samplers against their closed forms."""
from __future__ import annotations

import numpy as np

from pategail.sdk.secagg.noise import negative_binomial


def test_negative_binomial_of_zero_successes_is_zero():
    """NB(0, p) is the point mass at 0 (no successes to wait for): the Poisson count of its compound form is 0."""
    x = negative_binomial(0.0, 0.05, 1000)
    assert x.dtype == np.int64 and x.shape == (1000,) and not x.any()
