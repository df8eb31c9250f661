"""A device's own privacy ledger: every release it took part in, composed with the coordinator's accountant.

The coordinator promises a total ε; a device need not take that on trust. It records, at the moment it
sends its masked input (from then on a release containing it may exist), the round's signed noise scales
and query count, and composes them with the same PLD accountant (``pategail.sdk.accounting``) the
coordinator uses, on the grid the coordinator's plan is calibrated on (``LEDGER_INTERVAL``:
pessimistic, so the device never believes it spent less than it did). Before sending anything in a round it
checks that the round's release would keep it within its budget, and refuses otherwise (``RoundRefused``,
code ``BUDGET``) with its state unchanged. A round without noise has ε = ∞: a device with a budget refuses
it. The ledger is written atomically before the masked input leaves, so it survives restarts.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pategail.sdk.accounting import (PLAN_INTERVAL, Release, composed_epsilon,
                                     merge_release, release_from_dict, release_to_dict)
from pategail.sdk.contribution import ENV_L1_BOUND

from .config import RoundConfig
from .errors import RoundRefused

BUDGET = "budget"
"""``RoundRefused.code`` of a round that would take the device past its own budget."""
LEDGER_INTERVAL = PLAN_INTERVAL
"""PLD grid of the ledger: the grid the coordinator's privacy plan is calibrated on
(``pategail.server.privacy.plan``), so an honest run's planned releases never take a device past its budget."""
FORMAT = "pategail-device-ledger/1"


def round_release(cfg: RoundConfig, environment: bool = False, env_l1_bound: float = ENV_L1_BOUND) -> Release | None:
    """The release a device takes part in when it uploads in round ``cfg``; None when a sum has no noise
    (``Mechanism.round_release`` of the round's mechanism). A Gaussian round is one vector query of its clip norm's L2 sensitivity (discretisation included); so is a
    Laplace round uploading the ``environment`` vector, of its L1 sensitivity (the device clips it to
    ``env_l1_bound``); any other Laplace round is ``num_queries`` sensitivity-1 queries."""
    return cfg.noise.round_release(cfg, environment, env_l1_bound)


class PrivacyLedger:
    """Releases this device took part in; ``target_epsilon`` None = keep the record, refuse nothing."""

    def __init__(self, path: Path | str | None = None, target_epsilon: float | None = None,
                 target_delta: float = 1e-5):
        if target_epsilon is not None and not target_epsilon > 0:
            raise ValueError("target_epsilon must be > 0 (or None)")
        self.path = None if path is None else Path(path)
        self.target_epsilon, self.target_delta = target_epsilon, target_delta
        self._releases: list[Release] = []
        self._unbounded = 0  # rounds taken part in without noise (only possible without a budget)
        if self.path is not None and self.path.is_file():
            try:
                state = json.loads(self.path.read_text())
                if state.get("format") != FORMAT:
                    raise ValueError(f"format {state.get('format')!r}")
                self._releases = [release_from_dict(r) for r in state["releases"]]
                self._unbounded = int(state["unbounded"])
            except (ValueError, KeyError, TypeError) as err:
                # refusing is safer than starting from zero: the app must repair or reset the file
                raise RoundRefused(BUDGET, f"{self.path}: unreadable privacy ledger ({err})") from None

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    def epsilon(self, extra: Release | None = None) -> float:
        """Composed ε at ``target_delta`` of everything recorded (plus ``extra``); ∞ after a noiseless round."""
        if self._unbounded:
            return float("inf")
        releases = self._releases if extra is None else merge_release(self._releases, extra)
        return composed_epsilon(releases, self.target_delta, LEDGER_INTERVAL)

    def check(self, cfg: RoundConfig, environment: bool = False, env_l1_bound: float = ENV_L1_BOUND) -> None:
        """Raise RoundRefused (code ``BUDGET``) if taking part in ``cfg`` (uploading the ``environment``
        vector when set) could exceed the budget."""
        if self.target_epsilon is None:
            return
        release = round_release(cfg, environment, env_l1_bound)
        if release is None:
            raise RoundRefused(BUDGET, f"round {cfg.round_id} adds no noise to a sum: ε = ∞ for this device")
        after = self.epsilon(release)
        if after > self.target_epsilon:
            raise RoundRefused(BUDGET, f"round {cfg.round_id} would take this device to ε = {after:.4g}, past "
                                       f"its budget {self.target_epsilon:g} (δ = {self.target_delta:g})")

    def record(self, cfg: RoundConfig, environment: bool = False, env_l1_bound: float = ENV_L1_BOUND) -> None:
        """Account ``cfg``'s release; on disk before it returns (call before the masked input leaves)."""
        release = round_release(cfg, environment, env_l1_bound)
        releases = self._releases if release is None else merge_release(self._releases, release)
        unbounded = self._unbounded + (release is None)
        if self.path is not None:
            state = {"format": FORMAT, "releases": [release_to_dict(r) for r in releases], "unbounded": unbounded}
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.path)
        self._releases, self._unbounded = releases, unbounded
