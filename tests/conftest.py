"""Shared fixtures: the real development data in ../shared/data (skipped with a reason where absent)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
PATEGAIL_GEOLIFE = SHARED_DATA / "pategail-geolife"


@pytest.fixture(scope="session")
def geolife():
    """(cells, train_days) of the paper's preprocessed GeoLife set, read from its plain-text files."""
    if not PATEGAIL_GEOLIFE.is_dir():
        pytest.skip(f"real data not found at {PATEGAIL_GEOLIFE}")
    cells = np.loadtxt(PATEGAIL_GEOLIFE / "gps")
    days = np.loadtxt(PATEGAIL_GEOLIFE / "real.data", dtype=np.int32)
    return cells, days
