"""The benchmarks' smoke tests: each script runs as a user runs it (a child process from the repository root), on
the embedded data (the session fixture ``embedded_data``, its cell table derived from the data, for runs without
privacy; ``public_data`` for private runs) and a tiny configuration, and what it prints or writes is checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = {"rounds": 1, "days_per_round": 6, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, "policy": {"d_model": 16, "n_layers": 1}, "ppo": {"n_epochs": 2, "batch_size": 3}}
"""A configuration that trains in a second: the benchmarks' code paths, not their numbers."""


def run_benchmark(script: str, *args, timeout: float = 300) -> str:
    """Run ``benchmarks/SCRIPT`` with ``args`` from the repository root; its stdout (the test fails on a non-zero
    exit, showing its stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def json_lines(text: str) -> list[dict]:
    """The lines of ``text`` that are JSON objects."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def public_data(tmp_path_factory) -> Path:
    """The embedded data set on a public map of Beijing (every 0.01° square of the box): for private runs."""
    from pategail.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("bench") / "public"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True, public_cells=True,
                    bbox=(39.7, 116.0, 40.2, 116.7))
    return out


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path
