"""The prepared data set directory: what `pategail data prepare` writes and every other command reads.

Layout of DIR (documented in docs/data.md):

- ``dataset.json``     metadata: format version, slot length, cell size, source, counts.
- ``cells.csv``        ``cell,lat,lon``: the centre of every cell, in degrees (WGS84); cell ids are 0..n-1.
- ``train_days.npy``   int32 (n_train, 48): one training day per row, a cell id per half-hour slot.
- ``train_users.npy``  int32 (n_train,): the user (device) that holds each training day.
- ``test_days.npy``    int32 (n_test, 48): the held-out days that generators are evaluated against.
- ``test_users.npy``   int32 (n_test,): the user of each test day, -1 where the source does not say.
- ``holdout_days.npy``, ``holdout_users.npy`` (only when users were held out, see holdout.py): every training
  day of the users kept out of training, and their users — the non-members of the membership attacks.

A user's training days are what that user's device holds. Arrays are plain ``.npy`` and are read with
``allow_pickle=False``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pategail.server.errors import DataError
from pategail.sdk.features import SLOTS
from pategail.sdk.files import replacing_directory

FORMAT = "pategail-dataset"
FORMAT_VERSION = 1
"""Half-hour slots; the MDP of the paper is defined on 48 slots a day."""
_ARRAYS = ("train_days", "train_users", "test_days", "test_users")
_OPTIONAL_ARRAYS = ("holdout_days", "holdout_users")


@dataclass(frozen=True)
class Dataset:
    """A prepared data set, validated on construction.

    cells: float64 (n_cells, 2) — (lat, lon) of each cell centre in degrees.
    train_days / test_days: int32 (n, 48) — cell ids. train_users / test_users: int32 (n,), -1 = unknown.
    meta: the JSON metadata (source, slot length, cell size...).
    """

    cells: np.ndarray
    train_days: np.ndarray
    train_users: np.ndarray
    test_days: np.ndarray
    test_users: np.ndarray
    meta: dict = field(default_factory=dict)
    where: str = "data set"
    holdout_days: np.ndarray | None = None
    """int32 (n_holdout, 48) or None: days of users kept out of training entirely (``--holdout-users``)."""
    holdout_users: np.ndarray | None = None
    """int32 (n_holdout,) or None: the user of each held-out day; none of them holds a training day."""

    def __post_init__(self):
        validate(self)

    @property
    def public_cell_table(self) -> bool:
        """Whether the cell table is public (every square of a bounding box, ``data prepare --public-cells``)
        rather than the squares the users' days visit."""
        return (self.meta.get("cell_table") or {}).get("kind") == "public"

    @property
    def n_cells(self) -> int:
        return len(self.cells)

    @property
    def users(self) -> np.ndarray:
        """Sorted ids of the users that hold training days."""
        return np.unique(self.train_users)

    @property
    def heldout_users(self) -> np.ndarray:
        """Sorted ids of the users kept out of training (empty when none were)."""
        return np.unique(self.holdout_users) if self.holdout_users is not None else np.zeros(0, np.int32)

    def user_days(self, user: int) -> np.ndarray:
        """The training days (n, 48) of one user: what that user's device holds."""
        return self.train_days[self.train_users == user]


def validate(ds: Dataset) -> None:
    """Check shapes, dtypes, cell ids and coordinates; raise DataError naming the field."""
    w = ds.where
    c = ds.cells
    if c.ndim != 2 or c.shape[1] != 2 or len(c) == 0:
        raise DataError(f"{w}: cells must be a non-empty (n, 2) table of lat, lon; got shape {c.shape}")
    if not np.all(np.isfinite(c)):
        row = int(np.argwhere(~np.isfinite(c))[0, 0])
        raise DataError(f"{w}: cells row {row}: coordinate is not a finite number")
    bad = (np.abs(c[:, 0]) > 90) | (np.abs(c[:, 1]) > 180)
    if bad.any():
        row = int(np.argmax(bad))
        raise DataError(f"{w}: cells row {row}: coordinate out of range (lat {c[row, 0]}, lon {c[row, 1]})")
    for split in ("train", "test"):
        days, users = getattr(ds, f"{split}_days"), getattr(ds, f"{split}_users")
        if days.ndim != 2 or days.shape[1] != SLOTS:
            raise DataError(f"{w}: {split}_days must have shape (n, {SLOTS}); got {days.shape}")
        if not np.issubdtype(days.dtype, np.integer):
            raise DataError(f"{w}: {split}_days must hold integer cell ids; got {days.dtype}")
        if len(days) == 0:
            raise DataError(f"{w}: {split}_days is empty")
        if days.min() < 0 or days.max() >= len(c):
            row = int(np.argwhere((days < 0) | (days >= len(c)))[0, 0])
            raise DataError(f"{w}: {split}_days row {row}: cell id outside 0..{len(c) - 1}")
        if users.shape != (len(days),):
            raise DataError(f"{w}: {split}_users must have one entry per day ({len(days)}); got {users.shape}")
        if not np.issubdtype(users.dtype, np.integer) or users.min() < -1:
            raise DataError(f"{w}: {split}_users must be integer user ids (-1 = unknown)")
    if ds.train_users.min() < 0:
        raise DataError(f"{w}: every training day needs its user (train_users has -1)")
    if (ds.holdout_days is None) != (ds.holdout_users is None):
        raise DataError(f"{w}: holdout_days and holdout_users go together")
    if ds.holdout_days is not None:
        h, hu = ds.holdout_days, ds.holdout_users
        assert hu is not None                   # together with holdout_days (checked above)
        if h.ndim != 2 or h.shape[1] != SLOTS or not np.issubdtype(h.dtype, np.integer):
            raise DataError(f"{w}: holdout_days must be integer cell ids of shape (n, {SLOTS}); got "
                            f"{h.dtype} {h.shape}")
        if len(h) and (h.min() < 0 or h.max() >= len(c)):
            row = int(np.argwhere((h < 0) | (h >= len(c)))[0, 0])
            raise DataError(f"{w}: holdout_days row {row}: cell id outside 0..{len(c) - 1}")
        if hu.shape != (len(h),) or not np.issubdtype(hu.dtype, np.integer) or (len(hu) and hu.min() < 0):
            raise DataError(f"{w}: holdout_users must be one user id (>= 0) per held-out day ({len(h)})")
        both = np.intersect1d(hu, ds.train_users)
        if len(both):
            raise DataError(f"{w}: user {int(both[0])} is held out and also holds training days")


def load_user_days(path: str | os.PathLike, user: int) -> np.ndarray:
    """One user's days of the prepared data set at ``path`` (what `pategail device --data DIR --user U` holds)."""
    dataset = load_dataset(path)
    if user not in set(int(u) for u in dataset.users):
        raise DataError(f"{path}: no user {user}")
    days = dataset.user_days(user)
    if not len(days):
        raise DataError(f"{path}: user {user} has no days")
    return days


def load_dataset(path: str | os.PathLike) -> Dataset:
    """Read and validate a data set directory written by :func:`save_dataset`."""
    root = Path(path)
    meta_path = root / "dataset.json"
    if not meta_path.is_file():
        raise DataError(f"{root}: not a data set directory (no dataset.json); make one with `pategail data prepare`")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{meta_path}: not valid JSON ({e})") from None
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise DataError(f"{meta_path}: format {meta.get('format')!r} version {meta.get('format_version')!r}; "
                        f"this version reads {FORMAT!r} version {FORMAT_VERSION}")
    cells = _read_cells(root / "cells.csv")
    arrays = {}
    for name in _ARRAYS:
        f = root / f"{name}.npy"
        try:
            arrays[name] = np.load(f, allow_pickle=False)
        except FileNotFoundError:
            raise DataError(f"{f}: missing") from None
        except (ValueError, OSError, EOFError) as e:
            raise DataError(f"{f}: unreadable or truncated ({e})") from None
    for name in _OPTIONAL_ARRAYS:
        f = root / f"{name}.npy"
        if f.is_file():
            try:
                arrays[name] = np.load(f, allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise DataError(f"{f}: unreadable or truncated ({e})") from None
    return Dataset(cells=cells, meta=meta, where=str(root), **arrays)


def _read_cells(path: Path) -> np.ndarray:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise DataError(f"{path}: missing") from None
    if not lines or lines[0].strip() != "cell,lat,lon":
        raise DataError(f"{path}: row 1: header must be 'cell,lat,lon'")
    out = np.empty((len(lines) - 1, 2))
    for i, line in enumerate(lines[1:]):
        parts = line.split(",")
        try:
            cell, lat, lon = int(parts[0]), float(parts[1]), float(parts[2])
        except (ValueError, IndexError):
            raise DataError(f"{path}: row {i + 2}: expected 'cell,lat,lon' numbers, got {line!r}") from None
        if cell != i:
            raise DataError(f"{path}: row {i + 2}: cell ids must be 0..n-1 in order; got {cell}")
        out[i] = lat, lon
    return out


def save_dataset(ds: Dataset, path: str | os.PathLike) -> None:
    """Write the data set atomically: a crash leaves either the old directory or the new one, never a mix."""
    root = Path(path)
    if root.exists() and any(root.iterdir()) and not (root / "dataset.json").exists():
        raise DataError(f"{root}: exists and is not a data set directory; refusing to overwrite it")
    with replacing_directory(root) as tmp:
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "slots_per_day": SLOTS, **ds.meta,
                "n_cells": ds.n_cells, "users": int(len(ds.users)), "train_days": int(len(ds.train_days)),
                "test_days": int(len(ds.test_days)),
                **({"holdout_days": int(len(ds.holdout_days))} if ds.holdout_days is not None else {})}
        (tmp / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
        rows = [f"{i},{lat:.6f},{lon:.6f}" for i, (lat, lon) in enumerate(ds.cells)]
        (tmp / "cells.csv").write_text("cell,lat,lon\n" + "\n".join(rows) + "\n")
        for name in _ARRAYS + _OPTIONAL_ARRAYS:
            if getattr(ds, name) is not None:
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(ds, name), dtype=np.int32))
