"""The SDK fleet's memory stays flat: a run of a few dozen emulated devices holds no more memory round after
round.

The run happens in a fresh Python process (this file, run as a script), so that what other tests allocated
cannot blur its resident set size; the process reports its RSS after every round.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVICES = 36
ROUNDS = 6


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _explore_table_mib() -> float:
    """MiB of the explore laws' kept rows filled so far (pategail.sdk.epr.ExploreLaw: a cell's cumulative
    weights and ranks, filled the first time agents explore from it; bounded by the cell table, not a leak)."""
    import gc

    from pategail.sdk.epr import ExploreLaw

    total = 0
    for law in (o for o in gc.get_objects() if isinstance(o, ExploreLaw)):
        for kept in (law._table, law._rank) if law.fast else (law._table,):
            total += kept.data.nbytes
    return total / 2**20


def _run(work: Path, keep_sessions: bool) -> None:
    """The child: DEVICES devices (the 10 users of the embedded data, each held by several devices) for ROUNDS
    rounds; prints one JSON line: RSS (MiB) after set-up and after each round."""
    import gc

    import numpy as np
    import torch

    from pategail.data.dataset import load_dataset
    from pategail.data.prepare import prepare_dataset
    from pategail.emulator import EmulatedFleet
    from pategail.server.config import TrainConfig
    from pategail.server.coordinator import Coordinator
    from pategail.server.ppo import PPOConfig
    from pategail.training import write_initial_bundle

    prepare_dataset("pategail", ROOT / "data" / "default", work / "data", allow_pickle=True)
    dataset = load_dataset(work / "data")
    users = np.resize(dataset.users, DEVICES)
    # 48 generated days a round: the devices score 2,256 pairs, a batch large enough that buffers kept per
    # device between rounds (an ONNX Runtime memory arena, for one) would show
    config = TrainConfig(rounds=ROUNDS, days_per_round=48, discriminator={"steps": 4, "batch_size": 64}, environment={"candidates": 50, "action_prior_days": 64, "action_prior_epochs": 2}, policy={"d_model": 16, "n_layers": 1}, average_rounds=2, ppo=PPOConfig(n_epochs=1, batch_size=16))
    torch.set_num_threads(1)            # as `pategail train` (--threads 1): no per-thread allocator pools
    bundle = write_initial_bundle(config, dataset, 0, work / "bundle-initial")
    gc.collect()
    rss = {"before": _rss_mib(), "rounds": []}
    fleet = EmulatedFleet(dataset, users, work / "devices", bundle, seed=0, keep_sessions=keep_sessions)
    coordinator = Coordinator(config, fleet, dataset.cells, work / "run", seed=0)
    gc.collect()
    rss["set-up"] = _rss_mib()

    rss["explore_tables"] = []

    def on_round(stats) -> None:
        gc.collect()
        rss["rounds"].append(_rss_mib())
        rss["explore_tables"].append(_explore_table_mib())

    coordinator.train(on_round)
    # what `pategail train` does last: every device checks and keeps the published policy
    assert coordinator.publish_policy((bundle / "policy.onnx").read_bytes()) == DEVICES
    gc.collect()
    rss["published"] = _rss_mib()
    print(json.dumps(rss))


def _measure(tmp_path: Path, keep_sessions: bool = False) -> dict:
    # one malloc arena: the allocator then grows in one or two steps in the first rounds, not whenever one of
    # ONNX Runtime's threads' own arenas does (a leak grows the same either way)
    out = subprocess.run([sys.executable, __file__, str(tmp_path), str(int(keep_sessions))], capture_output=True,
                         text=True, timeout=900, cwd=ROOT, env={**os.environ, "MALLOC_ARENA_MAX": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_resident_memory_does_not_grow_round_after_round(tmp_path):
    rss = _measure(tmp_path)
    rounds, tables = rss["rounds"], rss["explore_tables"]
    assert len(rounds) == ROUNDS
    # Beside the explore laws' rows filled for cells explored from the first time (a bounded cache: ~8 MiB over
    # these rounds), the process's allocator grows in a step or two in the first rounds (3-6 MiB, then 0-1 MiB;
    # measured with one arena on 2026-11-29), and stays flat after. A leak grows in every round: the second
    # flattest of the five rounds after the first grows less than 1.5 MiB (measured 0.0-0.02; a kept buffer of
    # 0.1 MiB a device would add 3.6 in each), and rounds 2 to 6 add at most 24 in all.
    growth = np.sort(np.diff(np.subtract(rounds, tables)))
    assert growth[1] <= 1.5, rss
    assert rounds[-1] - rounds[0] - (tables[-1] - tables[0]) <= 24.0, rss
    last = rounds[-1]
    # the final publication of the policy: each device checks it and keeps it on disk, not in memory
    # (measured: +13-20 MiB in all; main's code kept every check's session, +389 MiB for these 36 devices)
    assert rss["published"] - last <= 2.0 * DEVICES, rss


if __name__ == "__main__":
    _run(Path(sys.argv[1]), keep_sessions=sys.argv[2] == "1")
