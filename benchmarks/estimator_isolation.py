"""Does the environment release's threshold estimator explain a private run's Radius? A run without noise whose
homes and first cells pass through the estimator private runs use (pategail.server.spatial.two_level_histogram)
at a given noise standard deviation σ — everything else exactly as the noiseless run.

Two modes:
- ``exact``: the estimator applied to the exact sums, thresholds at σ (no noise drawn). This isolates the
  estimator's bias — what its thresholds drop and its even spread re-distributes — from the noise's variance,
  and is deterministic, so one seed answers the question.
- ``noisy``: Gaussian noise of std σ added to the per-cell and per-region sums of homes and first cells first
  (drawn from the seed's own stream; an experiment, not a release), then the estimator: what a private run's
  initial states look like, with the rewards still noiseless.

    python benchmarks/estimator_isolation.py --sigma 3.12 --mode exact -- train --data runs/pategail-geolife \\
        --out runs/iso/exact-s0 --no-privacy --config runs/iso/private-path.json --population 1000 \\
        --population-processes 2 --no-downstream --no-progress --seed 0

(``private-path.json``: {"mechanism": "gaussian", "granularity": "day", "place_law": false, "action_prior":
false}: the private path's generator, so the environment release carries the region sums.) The report's
Radius is then compared with the noiseless run's and the private run's (BENCHMARKS-privacy.md).
"""
from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace

import numpy as np

from pategail.cli import main as pategail_main
from pategail.sdk.contribution import EnvironmentLayout
from pategail.server import initial_states
from pategail.server.spatial import two_level_histogram

log = logging.getLogger("pategail.benchmarks.estimator_isolation")


def estimated(parts, region_of: np.ndarray, sigma: float, mode: str, rng: np.random.Generator):
    """Normalised (homes, firsts) from the environment parts through the estimator at σ."""
    homes, firsts = parts.homes, parts.firsts
    coarse_h, coarse_f = parts.coarse[0], parts.coarse[1]
    if mode == "noisy":
        homes, firsts = homes + rng.normal(0, sigma, homes.shape), firsts + rng.normal(0, sigma, firsts.shape)
        coarse_h, coarse_f = coarse_h + rng.normal(0, sigma, coarse_h.shape), coarse_f + rng.normal(0, sigma,
                                                                                                      coarse_f.shape)
    h = two_level_histogram(homes, coarse_h, region_of, sigma, sigma, parts.weight)
    f = two_level_histogram(firsts, coarse_f, region_of, sigma, sigma, parts.weight - parts.first_at_home)
    return h / h.sum(), f / f.sum()


def patch(sigma: float, mode: str, seed: int) -> None:
    original = initial_states.InitialStates.from_noisy_sums.__func__

    def from_noisy_sums(cls, sums, n_cells, n_bins, noise_std=0.0, region_of=None, action_rates=False):
        states = original(cls, sums, n_cells, n_bins, noise_std, region_of, action_rates)
        if region_of is None:
            raise SystemExit("estimator_isolation: the release has no region sums (use the Gaussian mechanism)")
        n_regions = int(np.max(region_of)) + 1
        parts = EnvironmentLayout(n_cells, n_bins, place_law=True, n_regions=n_regions,
                                  action_rates=action_rates).unpack(np.asarray(sums, dtype=np.float64))
        homes, firsts = estimated(parts, region_of, sigma, mode, np.random.default_rng([seed, 0x150]))
        exact = np.clip(parts.homes, 0, None) / np.clip(parts.homes, 0, None).sum()
        log.warning("estimator_isolation (%s, σ = %g): total variation of the homes from the exact ones %.3f; "
                    "cells with home mass %d -> %d", mode, sigma, 0.5 * np.abs(homes - exact).sum(),
                    np.count_nonzero(exact), np.count_nonzero(homes))
        return replace(states, home_weights=homes, first_weights=firsts)

    initial_states.InitialStates.from_noisy_sums = classmethod(from_noisy_sums)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sigma", type=float, required=True, help="the private run's noise std on an environment sum")
    p.add_argument("--mode", choices=("exact", "noisy"), default="exact")
    p.add_argument("--noise-seed", type=int, default=0)
    p.add_argument("pategail_args", nargs=argparse.REMAINDER, help="-- then the pategail command line")
    args = p.parse_args()
    rest = args.pategail_args[1:] if args.pategail_args[:1] == ["--"] else args.pategail_args
    patch(args.sigma, args.mode, args.noise_seed)
    return pategail_main(rest)


if __name__ == "__main__":
    sys.exit(main())
