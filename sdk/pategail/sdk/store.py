"""The device's local trajectory store: its owner's days, in the app's storage, and nothing else.

On a phone this is the app's private storage; in the emulator each device has its own directory. The days
never leave the device: what the protocol sends out is computed from them only through the discriminator's
scores and the environment contribution (:mod:`pategail.sdk.contribution`), and both go out only inside a
masked secure-aggregation upload (DESIGN.md, "Roles and trust boundaries").

Layout of the store directory: ``days.npy`` (int32 (n, 48), read with ``allow_pickle=False``), replaced
atomically (write a temporary file, then ``os.replace``) so a crash never leaves half a file.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from pategail.sdk.errors import DataError
from pategail.sdk.features import SLOTS, infer_home
from pategail.sdk.files import replacing

DAYS_FILE = "days.npy"


def validate_days(days: ArrayLike, n_cells: int | None = None, slots: int = SLOTS, where: str = "days") -> np.ndarray:
    """int32 (n, slots) copy of ``days``; DataError when the shape, the type or a cell id is wrong.

    Cell ids must be >= 0 and, when ``n_cells`` is known, < n_cells. The message names the offending row and
    slot but never a cell id of a stored day (it may be shown to someone other than the owner).
    """
    arr = np.asarray(days)
    if arr.ndim != 2 or arr.shape[1] != slots:
        raise DataError(f"{where}: expected shape (n, {slots}), got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise DataError(f"{where}: cell ids must be integers")
    limit = np.iinfo(np.int32).max if n_cells is None else n_cells
    bad = (arr < 0) | (arr >= limit)
    if bad.any():
        row, slot = (int(i) for i in np.argwhere(bad)[0])
        rng = f"0..{n_cells - 1}" if n_cells is not None else ">= 0"
        raise DataError(f"{where}: row {row}, slot {slot}: cell id out of range ({rng})")
    return arr.astype(np.int32)


class TrajectoryStore:
    """The owner's days under ``root`` (created if missing). ``n_cells``, once known (the device sets it from
    its model bundle), bounds the cell ids :meth:`add_days` accepts."""

    def __init__(self, root: str | os.PathLike[str], *, n_cells: int | None = None, slots: int = SLOTS):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.n_cells = n_cells
        self.slots = slots
        self._days = self._load()
        self._home: int | None = None

    @property
    def path(self) -> Path:
        return self.root / DAYS_FILE

    def _load(self) -> np.ndarray:
        if not self.path.is_file():
            return np.empty((0, self.slots), dtype=np.int32)
        try:
            arr = np.load(self.path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise DataError(f"{self.path}: unreadable trajectory store ({type(e).__name__})") from None
        return validate_days(arr, None, self.slots, where=str(self.path))

    def __len__(self) -> int:
        return len(self._days)

    def days(self) -> np.ndarray:
        """int32 (n, slots): every stored day (a copy), in the order they were added."""
        return self._days.copy()

    def add_days(self, days: ArrayLike) -> int:
        """Validate ``days`` (n, slots) and append them; returns how many days the store now holds.
        Nothing is changed when validation fails (DataError)."""
        new = validate_days(days, self.n_cells, self.slots)
        merged = np.concatenate([self._days, new])
        self._write(merged)
        self._days, self._home = merged, None
        return len(merged)

    def _write(self, days: np.ndarray) -> None:
        with replacing(self.path) as tmp, open(tmp, "wb") as f:
            np.save(f, days, allow_pickle=False)

    @property
    def home(self) -> int:
        """The owner's home cell (``infer_home``: most visited night cell), cached until days are added.
        DataError when the store is empty."""
        if not len(self._days):
            raise DataError(f"{self.root}: the trajectory store holds no days")
        if self._home is None:
            self._home = infer_home(self._days)
        return self._home

    def max_cell(self) -> int:
        """The largest cell id stored (-1 when empty): lets a device check a new bundle's cell table."""
        return int(self._days.max()) if len(self._days) else -1
