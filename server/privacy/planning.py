"""Choose the per-query ε of a run so that the whole run — every release of every round, the initial-state
release included — composes to the target (ε, δ). The paper's ε is per query; a user asks for the total."""
from __future__ import annotations

import logging
import math

from pategail.server.privacy.accountant import QueryRelease, composed_epsilon
from pategail.server.privacy.calibration import sum_noise_scales

log = logging.getLogger(__name__)


SEARCH_INTERVAL = 1e-3
"""PLD grid of the search: 15x faster than the accountant's 1e-4 and pessimistic (it overstates ε by a few
per cent), so a plan that meets the target on this grid meets it on the finer one the run reports."""


def planned_epsilon(per_query_epsilon: float, kappa: float, n_queries: int, delta: float,
                    interval: float = SEARCH_INTERVAL) -> float:
    """Composed ε of ``n_queries`` queries, each releasing Σ D and Σ D² at Theorem 3's split of
    ``per_query_epsilon`` (see calibration.sum_noise_scales)."""
    s = sum_noise_scales(per_query_epsilon, kappa)
    return composed_epsilon([QueryRelease(s.sum_scale, s.sq_sum_scale, n_queries)], delta, interval)


def calibrate_per_query_epsilon(target_epsilon: float, target_delta: float, n_queries: int, kappa: float,
                                iterations: int = 14) -> float:
    """The largest per-query ε (to ~1%) whose ``n_queries``-fold composition is (target_epsilon,
    target_delta)-DP, by bisection in log space on the PLD accountant's (monotone) answer."""
    if not (target_epsilon > 0 and 0 < target_delta < 1 and n_queries >= 1):
        raise ValueError("need target_epsilon > 0, 0 < target_delta < 1 and at least one query")
    # advanced composition gives a starting bracket: ε_total ≈ ε_q sqrt(2 Q ln(1/δ)) for small ε_q
    guess = target_epsilon / math.sqrt(2 * n_queries * math.log(1 / target_delta)) / 2
    lo, hi = guess / 8, guess * 8
    while planned_epsilon(hi, kappa, n_queries, target_delta) <= target_epsilon:
        lo, hi = hi, hi * 8
    while planned_epsilon(lo, kappa, n_queries, target_delta) > target_epsilon:
        lo, hi = lo / 8, lo
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        if planned_epsilon(mid, kappa, n_queries, target_delta) <= target_epsilon:
            lo = mid
        else:
            hi = mid
    log.info("per-query epsilon %.3g gives a total epsilon <= %g at delta %g over %d queries",
             lo, target_epsilon, target_delta, n_queries)
    return lo
