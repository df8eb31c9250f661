"""The last round a device accepted, per coordinator key — kept on disk so a restart does not reopen old rounds.

A device takes part in a round only if its id is newer than every round it accepted before from the same
coordinator key (the key in the device's ``KeyDirectory``). Held in memory only, that guard forgot everything
when the app restarted: a replayed, validly signed configuration of an earlier round would be answered again,
with fresh keys and a second noisy copy of whatever vector the device then held. With a path, the log is
written (atomically) before the device answers, so a crash can lose at most a round it never answered.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import MessageRejected


class RoundLog:
    """coordinator public key -> last accepted round id; persisted to ``path`` when one is given."""

    def __init__(self, path: Path | str | None = None):
        self.path = None if path is None else Path(path)
        self._last: dict[str, int] = {}
        if self.path is not None and self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
                self._last = {str(k): int(v) for k, v in data.items()}
            except (ValueError, AttributeError, TypeError) as err:
                # refusing every round is safer than forgetting: the app must repair or reset the file
                raise MessageRejected(f"{self.path}: unreadable round log ({err})") from None

    def last(self, coordinator: bytes) -> int:
        """The last round accepted from ``coordinator`` (-1 if none)."""
        return self._last.get(coordinator.hex(), -1)

    def check(self, coordinator: bytes, round_id: int) -> None:
        """Raise MessageRejected unless ``round_id`` is newer than the last one accepted from ``coordinator``."""
        last = self.last(coordinator)
        if round_id <= last:
            raise MessageRejected(f"round {round_id} is not newer than {last} (replay)")

    def accept(self, coordinator: bytes, round_id: int) -> None:
        """Record ``round_id`` (checked first); on disk before it returns."""
        self.check(coordinator, round_id)
        updated = {**self._last, coordinator.hex(): round_id}
        if self.path is not None:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(updated, sort_keys=True))
            os.replace(tmp, self.path)
        self._last = updated
