"""Crash-safe run state: one checkpoint per completed round and a journal of every release.

- ``checkpoint.pt``: policy, optimiser, random states, initial states, history, round number — written to a
  temporary file and renamed, so a crash leaves the previous round's checkpoint intact.
- ``releases/intent-NNNNN-AA.json``: written before secure aggregation attempt AA of round NNNNN starts —
  from then on a release may exist (the aggregator unmasks before the coordinator has the result), so the
  privacy accountant, rebuilt from these files on resume, counts it whether or not the result arrived. An
  attempt that aborts below n_min (nothing released) renames its intent to ``aborted-NNNNN-AA.json``: not
  counted, but kept, so attempt numbers — part of the round ids devices see — are never used twice.
- ``releases/round-NNNNN.npz``: each released noisy aggregate and its noise scales, written (atomically) the
  moment it arrives, before it is used: a round interrupted after its release re-uses that release instead
  of asking the devices again (which would be a second, separately counted release).
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pategail.sdk.files import write_atomic

CHECKPOINT = "checkpoint.pt"
RELEASES = "releases"


def save_checkpoint(directory: Path, state: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save(state, buf)
    write_atomic(directory / CHECKPOINT, buf.getvalue())


def load_checkpoint(directory: Path) -> dict | None:
    path = directory / CHECKPOINT
    if not path.is_file():
        return None
    return torch.load(path, weights_only=False)


@dataclass(frozen=True)
class Release:
    """One released noisy aggregate: Σ x + noise and Σ x² + noise over ``n_survivors`` devices, with the
    noise scales (0 without privacy) and the number of coordinates released (= queries)."""

    round: int
    kind: str
    sum: np.ndarray
    sq_sum: np.ndarray
    n_survivors: int
    sum_scale: float
    sq_sum_scale: float

    @property
    def count(self) -> int:
        return len(self.sum)


def journal_release(directory: Path, release: Release) -> None:
    root = directory / RELEASES
    root.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, sum=release.sum, sq_sum=release.sq_sum,
             meta=np.array([release.round, release.n_survivors], dtype=np.int64),
             scales=np.array([release.sum_scale, release.sq_sum_scale]), kind=np.array(release.kind))
    write_atomic(root / f"round-{release.round:05d}.npz", buf.getvalue())


def read_journal(directory: Path) -> dict[int, Release]:
    out = {}
    root = directory / RELEASES
    for path in sorted(root.glob("round-*.npz")) if root.is_dir() else []:
        with np.load(path, allow_pickle=False) as z:
            rnd, n = (int(v) for v in z["meta"])
            out[rnd] = Release(rnd, str(z["kind"]), z["sum"], z["sq_sum"], n, float(z["scales"][0]),
                               float(z["scales"][1]))
    return out


def journal_intent(directory: Path, round_: int, sum_scale: float, sq_sum_scale: float, count: int,
                   noise=None, shares: int = 1) -> Path:
    """Record that a secure aggregation of ``count`` values is about to run; returns the intent's path.
    Attempts of one round are numbered 0, 1, ... over intents and aborted attempts alike (the number is part
    of the round id devices see, so it is never reused, also after an abort)."""
    root = directory / RELEASES
    root.mkdir(parents=True, exist_ok=True)
    attempt = sum(len(list(root.glob(f"{state}-{round_:05d}-*.json"))) for state in ("intent", "aborted"))
    path = root / f"intent-{round_:05d}-{attempt:02d}.json"
    record: dict[str, Any] = {"round": round_, "attempt": attempt, "sum_scale": sum_scale, "sq_sum_scale": sq_sum_scale,
              "count": count}
    if noise is not None:                                     # ``noise``: a privacy.plan.ReleaseNoise
        record.update(noise.scheme.journal_fields(noise, shares))
    write_atomic(path, json.dumps(record).encode())
    return path


def abort_intent(path: Path) -> None:
    """The attempt of ``path`` released nothing (aborted below n_min): stop counting it, keep its number."""
    os.replace(path, path.with_name(path.name.replace("intent-", "aborted-", 1)))


def read_intents(directory: Path) -> list[dict]:
    root = directory / RELEASES
    return [json.loads(p.read_text()) for p in sorted(root.glob("intent-*.json"))] if root.is_dir() else []
