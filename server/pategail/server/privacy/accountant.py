"""Privacy accounting of a run: every release recorded, composed with Google's ``dp-accounting``.

The pure maths (``QueryRelease``, ``to_dp_event``, ``composed_epsilon``, ``composed_delta``) lives in
``pategail.sdk.accounting`` — devices keep their own ledger with it — and is re-exported here; this module
holds the stateful ``PrivacyAccountant`` that records releases (the split Opacus uses between
``accountants/analysis`` and ``accountants``). A run's accountant is rebuilt from the release journal's
intents on every start (:mod:`pategail.server.releases`), so it has no state of its own to save.

What is recorded: one ``QueryRelease`` per round — ``count`` queried pairs, each answered with Σ D + noise
(Laplace scale ``sum_scale``) and, optionally, Σ D² + noise (``sq_sum_scale``); both sums have
sensitivity 1; the Laplace mechanism's environment release is one such query of noise multiplier b/Δ₁ (one
vector query of L1 sensitivity Δ₁, ``pategail.sdk.accounting.laplace_vector_release``). A run's ε at δ is the
tight PLD composition of all of them (privacy-loss distributions, Meiser-Mohammadi / Koskela et al.);
``basic_epsilon`` is the pure-DP sum Σ 1/b for comparison.

Modelling note: the secure aggregation adds discrete Laplace noise on a 2^-24 grid (sensitivity 2^24
quanta); the accountant uses the continuous Laplace PLD with the same ε per release. The two privacy-loss
distributions share their support bound ±1/b and differ by O(2^-24) in mass; dp-accounting 0.6's own
discrete-Laplace PLD is unusable at this sensitivity (it reports ε ~ 83 where the Laplace figure is ~1).
"""
from __future__ import annotations

import math

from pategail.sdk.accounting import (QueryRelease as QueryRelease, Release, composed_delta,  # noqa: F401
                                     composed_epsilon, merge_release,
                                     to_dp_event as to_dp_event)  # to_dp_event: re-exported for callers
from pategail.server.privacy.adjacency import ENVIRONMENT, REWARDS, SensitivityFactors


# -- state ------------------------------------------------------------------------------------------------
class PrivacyAccountant:
    """Records every release of a run; reports composed (ε, δ) next to the per-query ε.

    ``value_discretization_interval`` is dp-accounting's PLD grid: 1e-4 composes a 1.6 M-query run in about
    a second and overstates ε by ~1% against 1e-5 (the estimate is pessimistic, never optimistic).
    """

    def __init__(self, target_delta: float = 1e-5, value_discretization_interval: float = 1e-4):
        if not 0 < target_delta < 1:
            raise ValueError("target_delta must be in (0, 1)")
        self.target_delta = target_delta
        self.value_discretization_interval = value_discretization_interval
        self._releases: list[Release] = []
        self._kinds: list[str] = []
        """What each entry of ``_releases`` is (adjacency.RELEASE_KINDS: rewards, the environment, the cell
        table; its sensitivity scales differently under another relation)."""

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    def releases_under(self, factors: SensitivityFactors) -> list[Release]:
        """Every release with its recorded (zero-out) sensitivity multiplied by ``factors`` (another
        neighbouring relation, or a group of devices; pategail.server.privacy.adjacency)."""
        return [r.scaled(factors.of(kind)) for r, kind in zip(self._releases, self._kinds)]

    def epsilon_under(self, factors: SensitivityFactors, delta: float | None = None,
                      extra: Release | None = None, extra_kind: str = REWARDS) -> float:
        """Composed ε at ``delta`` (default target_delta) with every sensitivity multiplied by ``factors``;
        ``extra``: as if that release (of ``extra_kind``) were added."""
        releases = self.releases_under(factors)
        if extra is not None:
            extra = extra.scaled(factors.of(extra_kind))
            releases = merge_release(releases, extra)
        return composed_epsilon(releases, self.target_delta if delta is None else delta,
                                self.value_discretization_interval)

    @property
    def num_queries(self) -> int:
        return sum(r.count for r in self._releases)

    def record(self, sum_scale: float, sq_sum_scale: float | None, count: int) -> None:
        """Record ``count`` reward queries answered with the given noise scales (merged with an identical last
        entry)."""
        self.record_release(QueryRelease(float(sum_scale), None if sq_sum_scale is None else float(sq_sum_scale),
                                         int(count)))

    def record_release(self, release: Release, environment: bool = False, kind: str | None = None) -> None:
        """Record a ``QueryRelease`` or ``GaussianRelease`` (merged with an identical last reward entry);
        ``environment``: it is an environment release; ``kind``: what it is (adjacency.RELEASE_KINDS), when
        given."""
        kind = kind or (ENVIRONMENT if environment else REWARDS)
        if kind != REWARDS or (self._kinds and self._kinds[-1] != REWARDS):
            self._releases = [*self._releases, release]
            self._kinds.append(kind)
            return
        self._releases = merge_release(self._releases, release)
        self._kinds += [REWARDS] * (len(self._releases) - len(self._kinds))

    def releases_of(self, kind: str) -> list[Release]:
        """The recorded releases of ``kind`` (zero-out sensitivities)."""
        return [r for r, k in zip(self._releases, self._kinds) if k == kind]

    def epsilon_after_release(self, release: Release) -> float:
        """Composed ε (at target_delta) if ``release`` were added."""
        return composed_epsilon(merge_release(self._releases, release), self.target_delta,
                                self.value_discretization_interval)

    def epsilon(self, delta: float | None = None) -> float:
        """Composed ε of everything recorded, at ``delta`` (default: target_delta)."""
        return composed_epsilon(self._releases, self.target_delta if delta is None else delta,
                                self.value_discretization_interval)

    def epsilon_after(self, sum_scale: float, sq_sum_scale: float | None, count: int) -> float:
        """Composed ε (at target_delta) if ``count`` more queries at these scales were released."""
        new = QueryRelease(float(sum_scale), None if sq_sum_scale is None else float(sq_sum_scale), int(count))
        return composed_epsilon(merge_release(self._releases, new), self.target_delta,
                                self.value_discretization_interval)

    def delta(self, epsilon: float) -> float:
        """Composed δ at ``epsilon``."""
        return composed_delta(self._releases, epsilon, self.value_discretization_interval)

    def max_per_query_epsilon(self) -> float:
        """The largest pure ε of a single query recorded (the paper's ε of the noisiest-spending release;
        Laplace releases only — a Gaussian release has no pure ε)."""
        return max((r.per_query_epsilon for r in self._releases if isinstance(r, QueryRelease)), default=0.0)

    def basic_epsilon(self) -> float:
        """Pure-DP total by basic composition, Σ count * per-query ε (an upper bound at δ = 0; Laplace only)."""
        return math.fsum(r.count * r.per_query_epsilon for r in self._releases if isinstance(r, QueryRelease))
