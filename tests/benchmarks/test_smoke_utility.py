"""benchmarks/utility.py measures the three arms of a synthetic source, resumes without recomputing, and tables them."""
import json

import numpy as np
import pytest

from pategail.baselines import generate_baseline
from pategail.data.dataset import load_dataset
from pategail.sdk.synthetic import write_synthetic_csv

from .conftest import run_benchmark


@pytest.mark.slow
def test_utility_measure_resume_and_table(tmp_path, embedded_data):
    ds = load_dataset(embedded_data)
    syn = tmp_path / "markov.csv"
    write_synthetic_csv(syn, generate_baseline("markov", ds, 60, np.random.default_rng(0)), ds.cells)
    store = tmp_path / "u.json"
    args = ["measure", "--data", embedded_data, "--seed", 0, "--synthetic", f"chain={syn}", "--json", store,
            "--steps", 30]
    printed = run_benchmark("utility.py", *args)
    assert printed.count("seed 0 ") == 3
    res = json.loads(store.read_text())
    assert set(res["0"]) == {"real", "chain/synthetic", "chain/real+synthetic"}
    assert res["0"]["chain/synthetic"]["days"] == 60 and res["0"]["chain/real+synthetic"]["days"] == 60 + len(
        ds.train_days)
    assert res["persistence"]["acc1"] == pytest.approx(np.mean(ds.test_days[:, 1:] == ds.test_days[:, :-1]))
    assert run_benchmark("utility.py", *args) == ""                     # all there: nothing recomputed
    table = run_benchmark("utility.py", "table", "--json", store)
    assert "| real | recurrent | 1 |" in table and "| chain | 1 |" in table
