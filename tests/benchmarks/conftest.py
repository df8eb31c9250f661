"""The benchmarks' smoke tests: each script runs as a user runs it (a child process from the repository root), on
the embedded data (the session fixture ``embedded_data``, its cell table derived from the data, for runs without
privacy; ``public_data`` for private runs) and a tiny configuration, and what it prints or writes is checked."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = {"rounds": 1, "days_per_round": 6, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, "policy": {"d_model": 16, "n_layers": 1}, "ppo": {"n_epochs": 2, "batch_size": 3}}
"""A configuration that trains in a second: the benchmarks' code paths, not their numbers."""


def run_python(argv: list, timeout: float = 300) -> str:
    """``python ARGV`` (a script and its arguments, or ``-m MODULE ...``) in a fresh child process run from the
    repository root with one math thread, forked from a server holding the heavy libraries imported
    (tests/forked.py), so that each script's own work is what a test pays for: its stdout (the test fails on a
    non-zero exit or past ``timeout`` seconds, showing its stderr)."""
    import tempfile

    from tests.forked import Child

    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        child = Child(argv, ROOT, out, err, session=True, single_thread=True)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"python {' '.join(map(str, argv))}: still running after {timeout} s:\n{_tail(err)}")
        finally:                                # past the timeout, or the test interrupted: no process left behind
            child.interrupt(grace=10)           # the script stops what it started in sessions of its own
            child.kill_group()
        assert child.returncode == 0, f"{argv[0]} exited {child.returncode}:\n{_tail(err)}"
        return out.read_text(encoding="utf-8") if out.exists() else ""


def _tail(path: Path, chars: int = 3000) -> str:
    """The end of a child's stderr file (empty if it died before opening it)."""
    return path.read_text(encoding="utf-8", errors="replace")[-chars:] if path.exists() else ""


def run_benchmark(script: str, *args, timeout: float = 300) -> str:
    """Run ``benchmarks/SCRIPT`` with ``args`` as ``python benchmarks/SCRIPT ARGS`` would (``run_python``); its
    stdout."""
    return run_python([ROOT / "benchmarks" / script, *args], timeout)


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
