"""PNG plots of a run: the five statistics real vs synthetic, and a map of visit density."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pategail.metrics.km import (distinct_cells, global_rank_shares, individual_rank_shares, jump_lengths_km,
                                 km_bins, radius_of_gyration_km)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")                       # files only, no screen
    import matplotlib.pyplot as plt
    return plt


def plot_statistics(real: np.ndarray, synthetic: np.ndarray, cells: np.ndarray, path: Path,
                    labels=("real (test)", "synthetic")) -> None:
    """Five panels: Distance and Radius (km, log bins), DailyLoc, G-rank and I-rank shares."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 5, figsize=(22, 4))
    # the km mode's own bins: one for exactly 0, 40 log-spaced from 0.1 to 100 km, one for >= 100 km
    ticks = [0, 14, 27, 41]
    tick_labels = ["0", "1 km", "10 km", "≥100"]
    for ax, fn, title in ((axes[0], jump_lengths_km, "Distance: jump length (km)"),
                          (axes[1], radius_of_gyration_km, "Radius of gyration (km)")):
        for days, label in zip((real, synthetic), labels):
            share = km_bins(fn(days, cells).ravel())
            ax.step(np.arange(len(share)), share / share.sum(), where="mid", label=label, linewidth=1.5)
        ax.set_yscale("log")
        ax.set_xticks(ticks, tick_labels)
        ax.set_ylabel("share")
        ax.set_title(title)
    for days, label in zip((real, synthetic), labels):
        axes[2].hist(distinct_cells(days), bins=np.arange(0.5, 49.5), histtype="step", density=True, label=label,
                     linewidth=1.5)
        axes[3].plot(np.arange(1, 101), global_rank_shares(days), label=label)
        axes[4].plot(np.arange(1, 21), individual_rank_shares(days).mean(0), marker="o", ms=3, label=label)
    axes[2].set_title("DailyLoc: distinct cells a day")
    axes[3].set_title("G-rank: visit share of r-th cell")
    axes[3].set_yscale("log")
    axes[4].set_title("I-rank: a day's share of its r-th cell")
    axes[4].set_yscale("log")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_density(real: np.ndarray, synthetic: np.ndarray, cells: np.ndarray, path: Path,
                 labels=("real (test)", "synthetic")) -> None:
    """Two maps of visit density on one colour scale (log), over the box that holds the central 90% of the
    real visits, padded by a third on each side — the city, not the outliers hundreds of km away."""
    plt = _pyplot()
    pts = cells[real.ravel()]
    lo, hi = np.percentile(pts, 5, axis=0), np.percentile(pts, 95, axis=0)
    pad = (hi - lo) / 3 + 0.01
    lo, hi = lo - pad, hi + pad
    # one pixel per grid cell (edges half a step around the cell centres) where the grid is regular
    edges = []
    for k in (1, 0):
        u = np.unique(cells[:, k])
        step = max(float(np.median(np.diff(u))) if len(u) > 1 else 0.01, (hi[k] - lo[k]) / 200)
        start = np.round(lo[k] / step) * step - step / 2
        edges.append(np.arange(start, hi[k] + step, step))
    maps = []
    for days in (real, synthetic):
        p = cells[days.ravel()]
        h, xe, ye = np.histogram2d(p[:, 1], p[:, 0], bins=edges)
        maps.append(np.log10(1 + h.T / max(len(days), 1) * 1000))
    vmax = max(m.max() for m in maps)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    for ax, img, label in zip(axes, maps, labels):
        shown = ax.imshow(img, origin="lower", cmap="magma", vmin=0, vmax=vmax,
                          extent=[xe[0], xe[-1], ye[0], ye[-1]], aspect="auto")
        ax.set_title(f"{label}: visits per 1,000 days (log10 1+x)")
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
        fig.colorbar(shown, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
