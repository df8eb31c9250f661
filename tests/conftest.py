"""Shared fixtures: the real development data (the paper's preprocessed GeoLife folder, looked for at
../shared/data/pategail-geolife beside the checkout; skipped with a reason where absent)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one of several test processes on a small machine: numerical libraries must not each start a thread per
    # core (before numpy, torch and their children start their pools)
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
PATEGAIL_GEOLIFE = SHARED_DATA / "pategail-geolife"


def pytest_sessionstart(session):
    """Each session starts with pategail's kept results cleared (privacy plans, accountants, Lagrange weights,
    message sizes): mutation testing runs a mutant's tests in a process forked from one that ran the clean code's,
    whose kept answers must not stand in for the mutant's (a test that patches a calibration clears them itself).
    A fresh process has kept none."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "pategail":
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == name:
                value.cache_clear()


@pytest.fixture(scope="session")
def geolife():
    """(cells, train_days) of the paper's preprocessed GeoLife set, read from its plain-text files."""
    if not PATEGAIL_GEOLIFE.is_dir():
        pytest.skip(f"real data not found at {PATEGAIL_GEOLIFE}")
    cells = np.loadtxt(PATEGAIL_GEOLIFE / "gps")
    days = np.loadtxt(PATEGAIL_GEOLIFE / "real.data", dtype=np.int32)
    return cells, days


DEFAULT_DATA = ROOT / "data" / "default"


@pytest.fixture(scope="session")
def embedded_data(tmp_path_factory) -> Path:
    """The folder of the prepared embedded data set (`pategail data prepare` of data/default)."""
    from pategail.data.prepare import prepare_dataset

    if not DEFAULT_DATA.is_dir():
        pytest.skip(f"embedded development data not found at {DEFAULT_DATA}")
    out = tmp_path_factory.mktemp("device-data") / "data"
    prepare_dataset("pategail", DEFAULT_DATA, out, allow_pickle=True)
    return out


@pytest.fixture(scope="session")
def dataset(embedded_data):
    """The prepared embedded data set: 10 users, 644 training days, 4,210 cells."""
    from pategail.data.dataset import load_dataset

    return load_dataset(embedded_data)


def _dlap_cdf(k: np.ndarray, scale: float) -> np.ndarray:
    """CDF of DLap(a = 1/scale): P(X <= k) = 1 - q^(k+1)/(1+q) for k >= 0, q^(-k)/(1+q) for k < 0."""
    q = np.exp(-1.0 / scale)
    k = np.asarray(k, dtype=np.float64)
    return np.where(k >= 0, 1 - q ** (k + 1) / (1 + q), q ** (-k) / (1 + q))


def _dlap_gof_pvalue(samples: np.ndarray, scale: float, bins: int = 24) -> float:
    """Chi-square goodness of fit of integer samples to DLap(1/scale) on ~equiprobable integer bins."""
    from scipy import stats

    grid = np.arange(-40 * int(scale), 40 * int(scale) + 1)
    cdf = _dlap_cdf(grid, scale)
    cuts = np.unique(grid[np.searchsorted(cdf, np.arange(1, bins) / bins)])
    edges_cdf = np.concatenate([[0.0], _dlap_cdf(cuts, scale), [1.0]])
    expected = np.diff(edges_cdf) * samples.size
    observed = np.bincount(np.searchsorted(cuts, samples, side="left"), minlength=cuts.size + 1)
    return stats.chisquare(observed, expected).pvalue


@pytest.fixture(scope="session")
def dlap_gof():
    """gof(samples, scale) -> p-value: chi-square goodness of fit of integer noise to the discrete Laplace
    DLap(1/scale) (the law the accountant assumes for the released noise)."""
    return _dlap_gof_pvalue

