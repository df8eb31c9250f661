"""``pategail data prepare``: turn a source of mobility data into a data set directory (see dataset.py).

Formats:

- ``pategail``    the paper's preprocessed folder (see pategail_format.py); its own test days are the test
                  split; the per-user pickle is read only with ``allow_pickle=True``.
- ``gps-csv``     fixes ``user_id,timestamp,lat,lon`` (see fixes.read_gps_csv), gridded into days.
- ``geolife-plt`` the official GeoLife layout ``Data/NNN/Trajectory/*.plt``, gridded the same way.

Fixes become days as described in gridding.py; each user's last days are the test split. Nothing is
written unless everything succeeded, and then atomically (save_dataset).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from pategail.data.dataset import Dataset, save_dataset
from pategail.data.fixes import Fixes, read_geolife_plt, read_gps_csv
from pategail.data.gridding import (MINUTES_PER_DAY, bbox_keys, fixes_to_days, grid_keys, in_bbox, key_centres,
                                    slots_per_day, split_last_days, thin_fixes)
from pategail.data.holdout import hold_out_users
from pategail.data.pategail_format import read_pategail_folder
from pategail.server.errors import DataError
from pategail.sdk.features import SLOTS

log = logging.getLogger(__name__)

FORMATS = ("pategail", "gps-csv", "geolife-plt")

DEFAULT_MIN_OBSERVED_SLOTS = 6
"""Days with fewer observed half-hour slots are dropped. Measured on GeoLife (geolife_1min.csv.gz, UTC+8):
of 11,146 user-days, 5,581 have >= 6 observed slots (169 users, 79 of them with >= 10 days) and only 2,341
have >= 12 (141 users, 53 with >= 10 days). 6 slots (3 hours of a 24-hour day) keeps about as many days as
the paper's training set (5,616) and most users, whereas 12 would halve both the days and the users with
enough days to train a personal discriminator; below 6, a day is more than 7/8 gap-filled."""


@dataclass(frozen=True)
class PrepareSummary:
    """What ``prepare_dataset`` kept and dropped.

    users / train_days / test_days / cells: what the data set holds. fixes_read: GPS fixes read (0 for the
    ``pategail`` format). fixes_outside_bbox: fixes dropped by ``bbox``. fixes_thinned: fixes dropped by
    ``max_fixes_per_day``. days_seen: user-days with a fix.
    days_dropped_sparse: of those, dropped for too few observed slots. users_dropped: source users left
    without a day. seconds: wall time of the whole preparation.
    """

    out_dir: str
    format: str
    users: int
    train_days: int
    test_days: int
    cells: int
    fixes_read: int = 0
    fixes_outside_bbox: int = 0
    fixes_thinned: int = 0
    days_seen: int = 0
    days_dropped_sparse: int = 0
    min_observed_slots: int = 0
    users_dropped: int = 0
    holdout_users: int = 0
    holdout_days: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        text = (f"Prepared {self.out_dir} from {self.format} in {self.seconds:.1f} s: {self.users:,} users, "
                f"{self.train_days:,} training days, {self.test_days:,} test days, {self.cells:,} cells.")
        if self.format != "pategail":
            outside = f" ({self.fixes_outside_bbox:,} outside the bounding box)" if self.fixes_outside_bbox else ""
            if self.fixes_thinned:
                outside += f"; thinned away {self.fixes_thinned:,} (--max-fixes-per-day)"
            text += (f" Read {self.fixes_read:,} fixes{outside}; "
                     f"of {self.days_seen:,} user-days with a fix, dropped {self.days_dropped_sparse:,} with fewer "
                     f"than {self.min_observed_slots} observed slots; {self.users_dropped:,} users were left "
                     f"without a day.")
        if self.holdout_users:
            text += (f" Held out {self.holdout_users:,} users ({self.holdout_days:,} days) from training "
                     f"(holdout_days.npy: the non-members of the membership attacks).")
        return text


def _check_options(fmt, out_dir, utc_offset, bbox, test_fraction, slot_minutes):
    if fmt not in FORMATS:
        raise DataError(f"--format {fmt!r}: unknown format; choose one of {', '.join(FORMATS)}")
    n_slots = slots_per_day(slot_minutes)
    if n_slots != SLOTS:
        raise DataError(f"--slot-minutes {slot_minutes}: gives {n_slots} slots a day, but data sets hold "
                        f"{SLOTS} slots a day (the paper's MDP is defined on 48 half-hour slots); "
                        f"use {MINUTES_PER_DAY // SLOTS}")
    if not (math.isfinite(utc_offset) and -14 <= utc_offset <= 14):
        raise DataError(f"--utc-offset {utc_offset}: must be between -14 and 14 hours")
    if not 0 < test_fraction < 1:
        raise DataError(f"--test-fraction {test_fraction}: must be above 0 and below 1")
    if bbox is not None:
        if len(bbox) != 4 or not all(math.isfinite(v) for v in bbox):
            raise DataError(f"--bbox {bbox}: expected four numbers MIN_LAT,MIN_LON,MAX_LAT,MAX_LON")
        min_lat, min_lon, max_lat, max_lon = bbox
        if not (-90 <= min_lat < max_lat <= 90 and -180 <= min_lon < max_lon <= 180):
            raise DataError(f"--bbox {','.join(f'{v:g}' for v in bbox)}: expected MIN_LAT,MIN_LON,MAX_LAT,MAX_LON "
                            f"with -90 <= MIN_LAT < MAX_LAT <= 90 and -180 <= MIN_LON < MAX_LON <= 180")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "dataset.json").exists():
        raise DataError(f"{out}: exists and is not a data set directory; refusing to overwrite it")


def prepare_dataset(fmt: str, input_path: str | Path, out_dir: str | Path, *, allow_pickle: bool = False,
                    utc_offset: float = 0.0, cell_deg: float = 0.01, slot_minutes: int = 30,
                    min_observed_slots: int = DEFAULT_MIN_OBSERVED_SLOTS,
                    bbox: Sequence[float] | None = None,
                    test_fraction: float = 0.2, holdout_fraction: float = 0.0,
                    holdout_seed: int = 0, max_fixes_per_day: int | None = None,
                    thin_seed: int = 0, public_cells: bool = False) -> PrepareSummary:
    """Read ``input_path`` in format ``fmt`` and write the data set directory ``out_dir``.

    allow_pickle: ``pategail`` only — permit reading the per-user pickle (with a restricted unpickler).
    The rest apply to ``gps-csv`` and ``geolife-plt``: utc_offset (hours added to UTC before days are cut),
    cell_deg (grid square side, degrees), slot_minutes (must give 48 slots), min_observed_slots (sparser
    days are dropped), bbox ((min_lat, min_lon, max_lat, max_lon); fixes outside are dropped), test_fraction
    (each user's last days held out; see gridding.split_last_days), max_fixes_per_day (keep at most this many
    fixes of each user-day, drawn at random with ``thin_seed``, before anything else: a sparse, check-in-like
    variant of a GPS data set; see gridding.thin_fixes).
    holdout_fraction, holdout_seed: keep round(fraction × users) whole users, drawn with the seed, out of
    training (holdout.hold_out_users); every format.
    public_cells: the cell table is every square of side ``cell_deg`` of ``bbox`` (required), visited or not
    (gridding.bbox_keys), instead of the squares the data visits — a table that reveals nothing about anyone and
    that private runs require; ``pategail`` data is re-mapped onto it (days through a cell outside ``bbox`` are
    dropped).
    Raises DataError (one line naming the file and row or option) on bad input; then nothing is written.
    """
    start = time.perf_counter()
    bbox = tuple(float(v) for v in bbox) if bbox is not None else None
    _check_options(fmt, out_dir, float(utc_offset), bbox, float(test_fraction), slot_minutes)
    if not 0 <= holdout_fraction < 1:
        raise DataError(f"--holdout-users {holdout_fraction}: must be at least 0 and below 1")
    input_path = Path(input_path)
    universe = None
    if public_cells:
        if bbox is None:
            raise DataError("--public-cells needs --bbox MIN_LAT,MIN_LON,MAX_LAT,MAX_LON: the public box whose every "
                            "square becomes a cell")
        universe = bbox_keys(bbox, cell_deg)
    if fmt == "pategail":
        dataset, counts = _from_pategail(input_path, allow_pickle)
        if universe is not None:
            dataset, counts = _onto_universe(dataset, counts, universe, bbox, float(cell_deg))
    else:
        dataset, counts = _from_fixes(fmt, input_path, utc_offset=float(utc_offset), cell_deg=cell_deg,
                                      slot_minutes=slot_minutes, min_observed_slots=min_observed_slots,
                                      bbox=bbox, test_fraction=float(test_fraction),
                                      max_fixes_per_day=max_fixes_per_day, thin_seed=thin_seed, universe=universe)
    dataset.meta["cell_table"] = (
        {"kind": "public", "bbox": list(bbox), "cell_deg": float(cell_deg),
         "note": "every square of the bounding box, visited or not: nothing about the users"}
        if universe is not None and bbox is not None else       # a universe comes from the bbox
        {"kind": "data", "note": "the squares the users' kept days visit: it reveals where someone went, so "
                                 "private runs refuse it (make a public one with --public-cells --bbox)"})
    dataset = hold_out_users(dataset, float(holdout_fraction), holdout_seed)
    try:
        save_dataset(dataset, out_dir)
    except OSError as e:
        raise DataError(f"{out_dir}: cannot write the data set ({e.strerror or e})") from None
    summary = PrepareSummary(out_dir=str(out_dir), format=fmt, users=len(dataset.users),
                             train_days=len(dataset.train_days), test_days=len(dataset.test_days),
                             cells=dataset.n_cells, holdout_users=len(dataset.heldout_users),
                             holdout_days=0 if dataset.holdout_days is None else len(dataset.holdout_days),
                             seconds=time.perf_counter() - start, **counts)
    log.debug("%s", summary)  # the command prints it
    return summary


def _from_pategail(folder: Path, allow_pickle: bool) -> tuple[Dataset, dict]:
    cells, by_user, test = read_pategail_folder(folder, allow_pickle=allow_pickle)
    kept = [u for u, days in by_user.items() if len(days)]  # users without training days are dropped
    train = np.concatenate([by_user[u] for u in kept])
    train_users = np.concatenate([np.full(len(by_user[u]), i) for i, u in enumerate(kept)])
    meta = {"source": {"format": "pategail", "input": str(folder.resolve())},
            "options": {"allow_pickle": allow_pickle},
            "slot_minutes": 30, "cell_deg": 0.01,  # the paper's preprocessing (docs/data.md)
            "source_user_ids": kept,
            "test_split": "the source folder's test.data (users unknown: -1)",
            "dropped": {"users_without_training_days": len(by_user) - len(kept)}}
    dataset = Dataset(cells=cells, train_days=train.astype(np.int32), train_users=train_users.astype(np.int32),
                      test_days=test.astype(np.int32), test_users=np.full(len(test), -1, np.int32),
                      meta=meta, where=str(folder))
    return dataset, {"users_dropped": len(by_user) - len(kept)}


def _onto_universe(dataset: Dataset, counts: dict, universe: np.ndarray, bbox, cell_deg: float
                   ) -> tuple[Dataset, dict]:
    """A celled data set re-mapped onto a public universe: each cell to the square of ``cell_deg`` holding its
    centre; days through a cell outside ``bbox`` are dropped (users left without training days too)."""
    lat, lon = dataset.cells[:, 0], dataset.cells[:, 1]
    keys = grid_keys(lat, lon, cell_deg)
    inside = in_bbox(lat, lon, bbox)
    pos = np.minimum(np.searchsorted(universe, keys), len(universe) - 1)
    inside &= universe[pos] == keys
    new_id = np.where(inside, pos, -1)

    def remap(days, users):
        mapped = new_id[days]
        keep = (mapped >= 0).all(axis=1)
        return mapped[keep].astype(np.int32), users[keep], int((~keep).sum())

    train, train_users, dropped_train = remap(dataset.train_days, dataset.train_users)
    test, test_users, dropped_test = remap(dataset.test_days, dataset.test_users)
    if not len(train) or not len(test):
        raise DataError(f"--bbox {','.join(f'{v:g}' for v in bbox)}: no training or no test day lies inside it")
    present, train_users = np.unique(train_users, return_inverse=True)       # users keep consecutive ids
    meta = dict(dataset.meta)
    meta["cell_deg"] = cell_deg
    if "source_user_ids" in meta:
        meta["source_user_ids"] = [meta["source_user_ids"][i] for i in present]
    meta.setdefault("dropped", {})["days_through_cells_outside_bbox"] = dropped_train + dropped_test
    known = {u: i for i, u in enumerate(present)}
    test_users = np.array([known.get(int(u), -1) for u in test_users], dtype=np.int32)
    out = Dataset(cells=key_centres(universe, cell_deg), train_days=train, train_users=train_users.astype(np.int32),
                  test_days=test, test_users=test_users, meta=meta, where=dataset.where)
    return out, {**counts, "users_dropped": counts.get("users_dropped", 0) + len(np.unique(dataset.train_users))
                 - len(present)}


def _from_fixes(fmt: str, path: Path, *, utc_offset, cell_deg, slot_minutes, min_observed_slots, bbox,
                test_fraction, max_fixes_per_day=None, thin_seed=0, universe=None) -> tuple[Dataset, dict]:
    fixes: Fixes = read_gps_csv(path) if fmt == "gps-csv" else read_geolife_plt(path)
    n_read = len(fixes)
    outside = 0
    if bbox is not None:
        inside = in_bbox(fixes.lat, fixes.lon, bbox)
        outside = int(n_read - inside.sum())
        fixes = fixes.select(inside)
        log.info("%d of %d fixes are inside the bounding box", len(fixes), n_read)
    thinned = 0
    if max_fixes_per_day is not None:
        keep = thin_fixes(fixes.user, fixes.time, max_fixes_per_day, utc_offset=utc_offset,
                          rng=np.random.default_rng(thin_seed))
        thinned = int(len(fixes) - keep.sum())
        fixes = fixes.select(keep)
    g = fixes_to_days(fixes.user, fixes.time, fixes.lat, fixes.lon, cell_deg=cell_deg, slot_minutes=slot_minutes,
                      utc_offset=utc_offset, min_observed_slots=min_observed_slots, universe=universe)
    if len(g.days) == 0:
        raise DataError(f"{path}: no days left after filtering: {n_read:,} fixes read, {outside:,} outside "
                        f"--bbox, {g.days_dropped_sparse:,} of {g.days_seen:,} days with fewer than "
                        f"{min_observed_slots} observed slots (--min-observed-slots)")
    is_test = split_last_days(g.user, test_fraction)
    if not is_test.any():
        raise DataError(f"{path}: no test days: every user has too few days for --test-fraction {test_fraction} "
                        f"(a user's last day is held out only when the user has at least 2 days)")
    present, user = np.unique(g.user, return_inverse=True)  # every present user has a training day
    source_ids = [v.item() for v in fixes.user_ids[present]]
    options = {"utc_offset": utc_offset, "cell_deg": cell_deg, "slot_minutes": slot_minutes,
               "min_observed_slots": min_observed_slots, "bbox": list(bbox) if bbox else None,
               "test_fraction": test_fraction, "max_fixes_per_day": max_fixes_per_day,
               "thin_seed": thin_seed if max_fixes_per_day is not None else None}
    counts = {"fixes_read": n_read, "fixes_outside_bbox": outside, "fixes_thinned": thinned,
              "days_seen": g.days_seen,
              "days_dropped_sparse": g.days_dropped_sparse, "min_observed_slots": min_observed_slots,
              "users_dropped": len(fixes.user_ids) - len(present)}
    meta = {"source": {"format": fmt, "input": str(path.resolve())}, "options": options,
            "slot_minutes": slot_minutes, "cell_deg": cell_deg, "utc_offset": utc_offset,
            "source_user_ids": source_ids,
            "test_split": f"each user's last round({test_fraction} x days) days, at most all but one",
            "dropped": {"fixes_outside_bbox": outside,
                        "days_with_too_few_observed_slots": g.days_dropped_sparse,
                        "users_without_days": counts["users_dropped"]},
            "days_seen": g.days_seen, "fixes_read": n_read}
    dataset = Dataset(cells=g.cells, train_days=g.days[~is_test].astype(np.int32),
                      train_users=user[~is_test].astype(np.int32), test_days=g.days[is_test].astype(np.int32),
                      test_users=user[is_test].astype(np.int32), meta=meta, where=str(path))
    return dataset, counts
