"""Smoke tests of the mutation-testing benchmark: its report of a direct-mode stage, and (with mutmut installed,
`make mutation`) one sampled mutant checked for real."""
from __future__ import annotations

import importlib.util
import json
import re

import pytest

from .conftest import ROOT, run_benchmark


def _row(table: str, module: str) -> list[str]:
    return next(line.split("|")[2:-1] for line in table.splitlines() if line.startswith(f"| {module} |"))


def test_direct_report_counts_killed_survived_and_equivalent(tmp_path):
    equivalent = next(line.split("\t")[0] for line in (ROOT / "benchmarks" / "mutation_equivalent.tsv")
                      .read_text().splitlines() if line and not line.startswith("#"))
    module = "geo"
    rows = [{"mutant": "m.killed", "module": module, "status": "killed", "exit": 1, "seconds": 1.0},
            {"mutant": "m.timeout", "module": module, "status": "timeout", "exit": -9, "seconds": 60.0},
            {"mutant": "m.survived", "module": module, "status": "survived", "exit": 0, "seconds": 1.0},
            {"mutant": equivalent, "module": module, "status": "survived", "exit": 0, "seconds": 1.0}]
    (tmp_path / "direct-results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = run_benchmark("mutation.py", "--direct", "--report", "--stage", tmp_path, "--module", module)
    mutants, killed, slow, survived, eq, raw, score = (c.strip() for c in _row(table, module))
    assert (mutants, killed, slow, survived, eq) == ("4", "2", "1", "2", "1")
    assert (raw, score) == ("50%", "67%")                     # killed / checked, killed / (checked − equivalent)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mutmut") is None, reason="mutmut not installed (`make mutation`)")
def test_one_sampled_mutant_is_checked(tmp_path):
    table = run_benchmark("mutation.py", "--direct", "--stage", tmp_path / "stage", "--sample", "1", "--jobs", "1",
                          "--module", "geo", timeout=900)
    assert re.match(r"\| 1 \| [01] \|", "|" + "|".join(_row(table, "geo")[:2]) + "|")
