"""A training run's progress — what a checkpoint keeps besides the models — and the summary a report reads.

:class:`RunState` is the coordinator's mutable record (rounds done, time, per-round statistics, bytes, the
learned initial states); :class:`RunSummary` is the frozen view of a finished or interrupted run that
``pategail.reporting`` turns into report.json and report.md, so reporting never reaches into the coordinator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pategail.server.config import TrainConfig
from pategail.sdk.places import PlaceLaw
from pategail.server.initial_states import InitialStates


@dataclass
class RoundStats:
    """What one round of Algorithm 1 measured (``history`` holds one per round, as a dict)."""

    round: int
    devices: int
    """Devices asked."""
    survivors: int
    """Devices whose masked input is in the released sum."""
    mean_reward: float
    """Mean over the round's queries of the noisy mean D (R)."""
    disc_accuracy: float
    """Share of generated pairs the ensemble calls generated (mean D below 1/2)."""
    ppo: dict
    """PPO's statistics (``ppo_update``)."""
    bytes_up: float | None
    """Bytes each device sent this round (None for a release re-used after a crash)."""
    bytes_down: float | None
    seconds: float
    epsilon: float | None
    """Composed ε spent so far (None without privacy)."""
    stay_share: float = float("nan")
    """Share of "stay" among the round's generated actions."""
    distinct_histogram: list[int] | None = None
    """Generated days of the round by number of distinct cells: entry k counts the days visiting k cells
    (public: generated days only). The train command turns it into the invented-mode guard per round."""


@dataclass
class RunState:
    """The run's progress, saved with every checkpoint."""

    round: int = 0
    """Rounds completed."""
    wall_seconds: float = 0.0
    """Training time over every session of the run (resumed ones included)."""
    history: list[dict] = field(default_factory=list)
    """One ``RoundStats`` (as a dict) per completed round."""
    bytes_by_round: list[tuple[float, float]] = field(default_factory=list)
    """(down, up) bytes per device of every round whose release was made in this run (not re-used)."""
    initial_states: InitialStates | None = None
    """Learned from the environment release before round 1."""
    initial_seconds: float = 0.0
    """Time before round 1: the environment release, the initial states and the warm start (0 in a checkpoint
    written before it was kept)."""

    def to_dict(self) -> dict:
        return {"round": self.round, "wall_seconds": self.wall_seconds, "history": self.history,
                "bytes_by_round": self.bytes_by_round,
                "initial_states": None if self.initial_states is None else self.initial_states.to_dict(),
                "initial_seconds": self.initial_seconds}

    @classmethod
    def from_dict(cls, d: dict) -> "RunState":
        states = d["initial_states"]
        return cls(d["round"], d["wall_seconds"], d["history"], d["bytes_by_round"],
                   None if states is None else InitialStates.from_dict(states), float(d.get("initial_seconds", 0.0)))


@dataclass(frozen=True)
class RunSummary:
    """What a report says about a run (the coordinator's ``summary()``)."""

    config: TrainConfig
    seed: int
    rounds: int
    """Rounds completed."""
    devices: int
    wall_seconds: float
    """Time in the rounds (every session)."""
    seconds_per_round: float | None
    last_round: dict | None
    bytes_up_per_device_per_round: float
    bytes_down_per_device_per_round: float
    candidates: int
    """K, the EPR explore candidates per cell."""
    explore_factors: np.ndarray
    """(B,) the learned correction of the explore law."""
    privacy: dict
    """The privacy section of the report (``pategail.server.privacy.summary``)."""
    places: PlaceLaw | None = None
    """The released place law the environment uses (None: the classic EPR laws)."""
    initial_seconds: float = 0.0
    """Time before round 1 (environment release, initial states, warm start)."""

    @classmethod
    def of(cls, state: RunState, config: TrainConfig, seed: int, devices: int, candidates: int,
           privacy: dict, places: PlaceLaw | None = None) -> "RunSummary":
        ups = [u for _, u in state.bytes_by_round] or [0.0]
        downs = [d for d, _ in state.bytes_by_round] or [0.0]
        history = state.history
        assert state.initial_states is not None         # released before the first round
        return cls(config, seed, state.round, devices, state.wall_seconds,
                   float(np.mean([h["seconds"] for h in history])) if history else None,
                   history[-1] if history else None, float(np.mean(ups)), float(np.mean(downs)), candidates,
                   state.initial_states.explore_factors, privacy, places, state.initial_seconds)
