"""Smoke tests of the device-side benchmarks: a round, ONNX Runtime's costs, generation speed, the EPR defaults
and the Java device."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from .conftest import ROOT, run_benchmark


def test_device_round_reports_cpu_memory_and_bytes(tmp_path, embedded_data):
    out_md = tmp_path / "device.md"
    run_benchmark("device_round.py", "--data", embedded_data, "--out", out_md)
    text = out_md.read_text()
    cpu = float(re.search(r"CPU of `handle\(RoundRequest\)`, median over 10 devices \| ([0-9.]+) ms", text).group(1))
    assert 0 < cpu < 10_000
    assert "| bytes out: Ack | 23 |" in text                 # a device answers a round with an Ack and nothing else


def test_onnx_latency_sizes_and_times_a_bundle(tmp_path):
    out_md = tmp_path / "onnx.md"
    run_benchmark("onnx_latency.py", "--data", ROOT / "data" / "default", "--out", out_md, "--days", "20")
    text = out_md.read_text()
    sizes = dict(re.findall(r"\| `([a-z_.]+)` \| ([0-9,]+) \|", text))
    assert {"policy.onnx", "policy_step.onnx", "discriminator_training_model.onnx", "manifest.json"} <= set(sizes)
    total = int(re.search(r"\*\*total\*\* \| \*\*([0-9,]+)\*\*", text).group(1).replace(",", ""))
    assert total == sum(int(v.replace(",", "")) for v in sizes.values())
    assert "generating 20 days" in text


def test_generate_throughput_in_process_gives_the_same_days_for_every_variant(embedded_data):
    out = run_benchmark("generate_throughput.py", "--data", embedded_data, "--days", "20", "--big", "0", "--reps", "1",
                        "--cpu", "-1", "--no-cli", "--variants", "masked-explore,buffers")
    result = json.loads(out.splitlines()[-1].removeprefix("JSON "))
    assert set(result["in_process"]) == {"masked-explore", "buffers"}
    assert result["same_days"] is True
    assert all(r["days"] == 20 and r["best_cpu_s"] > 0 for r in result["in_process"].values())


@pytest.mark.slow
def test_generate_cli_abba_times_pategail_generate_in_the_given_order(tmp_path, embedded_data):
    out_json = tmp_path / "abba.json"
    run_benchmark("generate_cli_abba.py", "--data", embedded_data, "--cpu", "-1", "--small", "20:AB", "--big", "",
                  "--json", out_json)
    runs = json.loads(out_json.read_text())
    assert [r["variant"][0] for r in runs] == ["A", "B"]
    assert all(r["days"] == 20 and r["cpu_s"] > 0 and r["peak_rss_mb"] > 0 for r in runs)


def test_epr_defaults_fits_alpha_for_each_candidate_count(embedded_data):
    out = run_benchmark("epr_defaults.py", "--data", embedded_data, "--sizes", "50,100")
    rows = re.findall(r"^\| (50|100) \| ([0-9.]+)% \| ([0-9.]+) \|$", out, flags=re.M)
    assert [r[0] for r in rows] == ["50", "100"]
    assert float(rows[0][1]) < float(rows[1][1]) <= 100         # more candidates hold more of the real moves


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("java") and shutil.which("javac")), reason="no JDK (java, javac)")
def test_android_secagg_round_times_the_java_core(tmp_path):
    out_md = tmp_path / "android.md"
    run_benchmark("android_secagg_round.py", "--rounds", "1", "--out", out_md, timeout=600)
    rows = re.findall(r"^\| 1 \| ([0-9.]+) \| ([0-9.]+) \|", out_md.read_text(), flags=re.M)
    assert rows and all(float(x) > 0 for x in rows[0])
