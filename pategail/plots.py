"""PNG plots of a run: the five statistics real vs synthetic, and a map of visit density."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pategail.metrics.km import (LOG_EDGES_KM, distinct_cells, global_rank_shares, individual_rank_shares,
                                 jump_lengths_km, radius_of_gyration_km)


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
    edges = np.concatenate([[0.0], LOG_EDGES_KM])
    for ax, fn, title in ((axes[0], jump_lengths_km, "Distance: jump length (km)"),
                          (axes[1], radius_of_gyration_km, "Radius of gyration (km)")):
        for days, label in zip((real, synthetic), labels):
            v = np.clip(fn(days, cells).ravel(), 0.05, 150)
            ax.hist(v, bins=np.concatenate([[0.05], edges[1:], [150]]), histtype="step", density=True,
                    label=label, linewidth=1.5)
        ax.set_xscale("log")
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
    """Two maps of visit density (log colour), over the box holding 98% of the real visits."""
    plt = _pyplot()
    pts = cells[real.ravel()]
    lo, hi = np.percentile(pts, 1, axis=0), np.percentile(pts, 99, axis=0)
    pad = (hi - lo) * 0.05 + 0.01
    lo, hi = lo - pad, hi + pad
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    for ax, days, label in zip(axes, (real, synthetic), labels):
        p = cells[days.ravel()]
        h, xe, ye = np.histogram2d(p[:, 1], p[:, 0], bins=80, range=[[lo[1], hi[1]], [lo[0], hi[0]]])
        img = ax.imshow(np.log10(1 + h.T / max(len(days), 1) * 1000), origin="lower", cmap="magma",
                        extent=[xe[0], xe[-1], ye[0], ye[-1]], aspect="auto")
        ax.set_title(f"{label}: visits per 1,000 days (log10 1+x)")
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
        fig.colorbar(img, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
