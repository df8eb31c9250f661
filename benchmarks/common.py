"""What several benchmarks share: the machine line of a report, a process's resident memory, a training
configuration read from a JSON file, and the initial bundle a run starts from.

The benchmarks run as scripts (``python benchmarks/NAME.py``), so this folder is first on ``sys.path`` and they
import it as ``common``.
"""
from __future__ import annotations

import json
import os
import platform
import resource
from pathlib import Path


def machine() -> str:
    """``N cores, ARCH, Python X.Y.Z``: the machine a report's figures were measured on."""
    return f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"


def rss_mib(pid: int | str = "self") -> tuple[float, float]:
    """(current, peak) resident set size of a process in MiB (Linux ``/proc/PID/status``: VmRSS, VmHWM)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields.get("VmHWM", fields["VmRSS"])


def peak_rss_gb() -> float:
    """Peak resident memory of this process in GiB (``ru_maxrss`` is in KiB on Linux; children not included)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def train_config(path: Path | None, **overrides):
    """A ``TrainConfig`` from a JSON object of settings (None: the defaults), with ``overrides`` on top."""
    from pategail.server.config import TrainConfig

    settings = json.loads(path.read_text()) if path else {}
    from pategail.server.config import merge_settings

    return TrainConfig.from_dict(merge_settings(settings, overrides), where=str(path) if path else "options")


def initial_bundle(config, dataset, seed: int, out: Path, checkpoint: Path | None = None) -> Path:
    """The bundle a run's devices install before round 1, as ``pategail train`` writes it. With ``checkpoint``
    the run's privacy plan is made there and declared in the bundle (what a private run's devices check)."""
    from pategail.training import write_initial_bundle

    if checkpoint is None:
        return write_initial_bundle(config, dataset, seed, out)
    from pategail.server.coordinator import run_plan

    plan = run_plan(config, dataset.cells, checkpoint)
    return write_initial_bundle(config, dataset, seed, out,
                                privacy=plan.declare(config.secagg.min_survivors, config.secagg.colluders))
