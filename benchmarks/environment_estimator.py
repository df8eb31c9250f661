"""How well the environment release's estimator recovers the home histogram under noise, without training.

For resampled populations of a prepared data set (whole users drawn with replacement), the exact home histogram
(each device's inferred home with its contribution weight) gets Gaussian noise of standard deviation σ on every
cell sum and every region sum, as the private environment release does, and ``pategail.server.spatial``'s
two-level estimator turns the noisy sums back into a histogram — once for each spread of the mass below the
threshold: the even spread (the default), and soft thresholding by each given shrink.

Printed per σ and spread (means over the populations): the total-variation distance to the exact histogram, the
share of the estimate on squares nobody lives in, and the mean distance (km) from the estimate's mass to the
nearest true home square.

    python benchmarks/environment_estimator.py --data runs/pategail-geolife-public --devices 1000 \
        --sigmas 3.12,5.67,19.8 --populations 5
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a prepared data folder (pategail data prepare)")
    p.add_argument("--devices", type=int, default=1000, help="devices of each resampled population")
    p.add_argument("--sigmas", default="3.12,5.67,19.8",
                   help="noise standard deviations on each sum (comma-separated; 3.12, 5.67 and 19.8 are the "
                        "environment's at 1,000 devices and ε = 8, 4 and 1)")
    p.add_argument("--shrinks", default="0,0.5,1,2", help="soft-threshold shrinks to compare with the even spread")
    p.add_argument("--populations", type=int, default=5, help="resampled populations (seeds 0..P-1)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from pategail.data.dataset import load_dataset
    from pategail.sdk.contribution import contribution_weight
    from pategail.sdk.features import infer_home
    from pategail.sdk.geo import haversine_km
    from pategail.sdk.regions import REGION_CELLS, region_map
    from pategail.server.spatial import SOFT_SHRINK, two_level_histogram

    args = _parse(argv)
    ds = load_dataset(args.data)
    users = ds.users
    home = np.array([infer_home(ds.user_days(u)) for u in users])
    weight = np.array([contribution_weight(len(ds.user_days(u))) for u in users])
    cells, n = ds.cells, len(ds.cells)
    region_of = region_map(cells, REGION_CELLS)
    n_regions = int(region_of.max()) + 1
    shrinks = [float(s) for s in args.shrinks.split(",")]
    spreads: dict[str, float | None] = {"even (default)": None, **{
        f"shrink {s:g}" + (" (measured in training)" if s == SOFT_SHRINK else ""): s for s in shrinks}}
    print(f"{args.data}: {len(users)} users, {n:,} squares, {n_regions} regions; {args.devices:,} devices, "
          f"{args.populations} populations")
    print("| σ | spread | TV to the exact histogram | mass on empty squares | km from misplaced mass |")
    print("|---|---|---:|---:|---:|")
    for sigma in (float(s) for s in args.sigmas.split(",")):
        scores: dict[str, list[tuple[float, float, float]]] = {k: [] for k in spreads}
        for seed in range(args.populations):
            rng = np.random.default_rng(seed)
            pick = rng.integers(0, len(users), args.devices)
            truth = np.bincount(home[pick], weights=weight[pick], minlength=n)
            lived = np.flatnonzero(truth > 0)
            km = haversine_km(cells[:, :1], cells[:, 1:], cells[lived, 0][None, :], cells[lived, 1][None, :]).min(1)
            fine = truth + rng.normal(0.0, sigma, n)
            coarse = np.bincount(region_of, weights=truth, minlength=n_regions) + rng.normal(0.0, sigma, n_regions)
            for name, shrink in spreads.items():
                est = two_level_histogram(fine, coarse, region_of, sigma, sigma, truth.sum(), shrink=shrink)
                p = est / est.sum()
                scores[name].append((0.5 * float(np.abs(p - truth / truth.sum()).sum()),
                                     float(p[truth == 0].sum()), float((p * km).sum())))
        for name, rows in scores.items():
            tv, empty, dist = np.mean(rows, axis=0)
            print(f"| {sigma:g} | {name} | {tv:.3f} | {empty:.1%} | {dist:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
