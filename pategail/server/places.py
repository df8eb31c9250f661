"""The place law (d-EPR relevance and return-to-the-place-just-left) from the noisy sums of the devices'
place contributions (:func:`pategail.sdk.places.place_contribution`), released with the initial states.

Privacy: the ``n_cells + 3`` entries ride in the same secure noisy release as the initial states; each is in
[0, 1] (sensitivity 1 per entry, the unit the noise is calibrated for) and counts as one query in the
accountant and in the run's :class:`~pategail.server.privacy.plan.PrivacyPlan` (``Coordinator.planned_queries``:
the environment vector's ``EnvironmentLayout(..., place_law=True)`` length, :mod:`pategail.sdk.contribution`),
so its budget share is (n_cells + 3) / (all queries of the run). Everything below is post-processing of the
noisy sums.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.places import PlaceLaw, place_contribution_length

RELEVANCE_PRIOR = 1.0
"""Pseudo-visits, as a share of the mean cell's released visits, added to every cell's relevance: a cell no
device visited keeps a little attraction (explore must be able to reach every candidate), and noise that
clipping left at 0 does not exclude a cell. Chosen on training days with the epr rule model
(benchmarks/place_law.py; BENCHMARKS.md)."""


def place_law_from_noisy_sums(sums: np.ndarray, n_cells: int, noise_std: float = 0.0,
                              prior: float = RELEVANCE_PRIOR, visits: np.ndarray | None = None) -> PlaceLaw:
    """The place law from the noisy sums S of the place contributions (``n_cells + 3`` values).

    relevance(c) = max(S[c], 0) + prior × max(mean_c S, noise_std); return_last, the weight of the place
    just left in the mixture "place just left, else ∝ visits", by the method of moments from the released
    share F that went to it and the share V the visits law alone gave it (both ×Σw, divided by W = Σw):
    F/W = q + (1 − q)·V/W, so q = (F − V) / (W − V), clipped to [0, 1]; 0 when W is not above the noise.

    ``visits``: the visit histogram already estimated from the noisy sums (non-negative, noise thresholded:
    pategail.server.spatial); the floor is then ``prior`` × its mean alone.
    """
    sums = np.asarray(sums, dtype=np.float64)
    if len(sums) != place_contribution_length(n_cells):
        raise ValueError("noisy sums do not have the place-law layout")
    if visits is None:
        visits = np.clip(sums[:n_cells], 0, None)
        floor = prior * max(float(visits.mean()), float(noise_std), 1e-12)
    else:
        visits = np.asarray(visits, dtype=np.float64)
        floor = prior * max(float(visits.mean()), 1e-12)
    went, expected, weight = sums[n_cells:]
    s = max(float(noise_std), 0.0)
    q = 0.0
    if weight > max(10 * s, 0.0) and weight - expected > 0:
        q = float(np.clip((went - expected) / (weight - expected), 0.0, 1.0))
    return PlaceLaw(relevance=visits + floor, return_last=q)
