"""The embedded default data, prepared once per test module of tests/train."""
from pathlib import Path

import pytest

from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "default"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    return load_dataset(out)
