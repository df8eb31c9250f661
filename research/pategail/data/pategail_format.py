"""The PateGail paper's preprocessed folder (format ``pategail``), read safely.

The folder (the paper's preprocessed GeoLife release is one):

- ``gps``           ``lat lon`` per line: the centre of cell i on line i + 1.
- ``real.data``     training days, one per line, 48 cell ids separated by spaces.
- ``real_data.npy`` the same days split by user: a **pickled** dict {user: int array (days × 48)}, saved by
                    ``np.save`` as a 0-d object array. Concatenated in key order it must equal ``real.data``.
- ``test.data``     held-out days (no user ids): kept as the test split, with user -1.

A pickle can run code when it is loaded, so ``real_data.npy`` is read only when the caller says so
(``--allow-pickle``), and even then with :class:`RestrictedUnpickler`, which can build a dict of numpy
integer arrays and nothing else.
"""
from __future__ import annotations

import io
import logging
import pickle
from pathlib import Path

import numpy as np
from numpy._core import multiarray
from numpy.lib import format as npy_format

from pategail.sdk.features import SLOTS
from pategail.data.fixes import read_text
from pategail.server.errors import DataError

log = logging.getLogger(__name__)


class ForbiddenGlobal(pickle.UnpicklingError):
    """The pickle asked for a function or class that a dict of numpy arrays does not need."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays (and the dicts, lists, numbers and strings holding them) and refuses every
    other global, so a crafted file cannot call ``os.system`` or anything else."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): multiarray._reconstruct,  # numpy < 2 pickles
        ("numpy._core.multiarray", "_reconstruct"): multiarray._reconstruct,
        ("numpy.core.multiarray", "scalar"): multiarray.scalar,  # numpy integer dict keys
        ("numpy._core.multiarray", "scalar"): multiarray.scalar,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }

    def find_class(self, module: str, name: str):
        try:
            return self._ALLOWED[module, name]
        except KeyError:
            message = f"refusing to load '{module}.{name}': only numpy arrays are allowed"
            raise ForbiddenGlobal(message) from None


def load_user_days(path: Path, *, allow_pickle: bool = False) -> dict[int, np.ndarray]:
    """Read ``real_data.npy``: {user: int64 array (days × 48)}, keys sorted."""
    if not allow_pickle:
        raise DataError(f"{path}: the per-user days are a Python pickle, which can run code when loaded; "
                        f"pass --allow-pickle if you trust this file (it is then read with a restricted "
                        f"unpickler that only builds numpy arrays)")
    try:
        with open(path, "rb") as f:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = npy_format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = npy_format.read_array_header_2_0(f)
            else:
                raise DataError(f"{path}: unsupported .npy version {version}")
            payload = f.read()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except ValueError as e:  # bad magic or header
        raise DataError(f"{path}: not a .npy file ({e})") from None
    if dtype != np.dtype(object) or shape != ():
        raise DataError(f"{path}: expected a pickled dict (a 0-d object array), got dtype {dtype} shape {shape}")
    try:
        obj = RestrictedUnpickler(io.BytesIO(payload)).load()
    except ForbiddenGlobal as e:
        raise DataError(f"{path}: {e}") from None
    except Exception as e:  # truncated or corrupt pickle: EOFError, ValueError, struct.error, ...
        raise DataError(f"{path}: truncated or corrupt pickle ({type(e).__name__}: {e})") from None
    if isinstance(obj, np.ndarray) and obj.dtype == object and obj.shape == ():
        obj = obj.item()
    if not isinstance(obj, dict):
        raise DataError(f"{path}: expected a dict {{user: days}}, got {type(obj).__name__}")
    out = {}
    for key in obj:
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            raise DataError(f"{path}: user {key!r}: user ids must be integers")
    for key in sorted(obj):
        days = obj[key]
        if not (isinstance(days, np.ndarray) and np.issubdtype(days.dtype, np.integer)
                and days.ndim == 2 and days.shape[1] == SLOTS):
            what = f"{days.dtype} array of shape {days.shape}" if isinstance(days, np.ndarray) else type(days).__name__
            raise DataError(f"{path}: user {key}: expected an integer array (days × {SLOTS}), got {what}")
        out[int(key)] = days.astype(np.int64)
    return out


def read_day_lines(path: Path) -> np.ndarray:
    """A ``real.data`` / ``test.data`` file: int64 (n, 48), one day per line."""
    lines = [s for s in read_text(path).splitlines()]
    while lines and not lines[-1].strip():
        lines.pop()
    rows = [s.split() for s in lines]
    for i, r in enumerate(rows):
        if len(r) != SLOTS:
            raise DataError(f"{path}: row {i + 1}: expected {SLOTS} cell ids, got {len(r)}")
    if not rows:
        raise DataError(f"{path}: no days")
    try:
        return np.array(rows, dtype=np.int64)
    except ValueError:
        for i, r in enumerate(rows):
            for j, v in enumerate(r):
                try:
                    int(v)
                except ValueError:
                    raise DataError(f"{path}: row {i + 1}: field {j + 1}: not a cell id: {v!r}") from None
        raise


def read_cells(path: Path) -> np.ndarray:
    """The ``gps`` file: float64 (n, 2) of (lat, lon)."""
    rows = [s.split() for s in read_text(path).splitlines()]
    while rows and not rows[-1]:
        rows.pop()
    if not rows:
        raise DataError(f"{path}: no cells")
    out = np.empty((len(rows), 2))
    for i, r in enumerate(rows):
        try:
            if len(r) != 2:
                raise ValueError
            out[i] = float(r[0]), float(r[1])
        except ValueError:
            raise DataError(f"{path}: row {i + 1}: expected 'lat lon', got {' '.join(r)!r}") from None
        if not (np.all(np.isfinite(out[i])) and abs(out[i, 0]) <= 90 and abs(out[i, 1]) <= 180):
            raise DataError(f"{path}: row {i + 1}: coordinate is not a finite lat/lon in range: {' '.join(r)!r}")
    return out


def _check_ids(days: np.ndarray, n_cells: int, path: Path) -> None:
    bad = (days < 0) | (days >= n_cells)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise DataError(f"{path}: row {i + 1}: field {j + 1}: cell id {days[i, j]} is not a line of gps "
                        f"(0..{n_cells - 1})")


def read_pategail_folder(folder: str | Path, *, allow_pickle: bool = False):
    """Read the paper's folder. Returns (cells, {user: training days}, test days), all checked:
    cell ids in range, per-user days concatenated in key order equal to ``real.data``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory (expected the paper's folder with gps, real.data, "
                        f"real_data.npy, test.data)")
    log.info("reading the PateGail folder %s", folder)
    cells = read_cells(folder / "gps")
    train = read_day_lines(folder / "real.data")
    test = read_day_lines(folder / "test.data")
    _check_ids(train, len(cells), folder / "real.data")
    _check_ids(test, len(cells), folder / "test.data")
    by_user = load_user_days(folder / "real_data.npy", allow_pickle=allow_pickle)
    joined = np.concatenate(list(by_user.values())) if by_user else np.empty((0, SLOTS), np.int64)
    if joined.shape != train.shape or not np.array_equal(joined, train):
        detail = (f"{len(joined)} days vs {len(train)}" if joined.shape != train.shape
                  else f"first difference at real.data row {int(np.argmax((joined != train).any(axis=1))) + 1}")
        raise DataError(f"{folder / 'real_data.npy'}: the per-user days concatenated in key order differ from "
                        f"real.data ({detail})")
    return cells, by_user, test
