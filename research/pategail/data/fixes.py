"""Readers of raw GPS fixes: ``gps-csv`` files and the official GeoLife ``.plt`` layout.

Both return :class:`Fixes` (one row per fix: user, unix time in UTC, lat, lon). Parsing is vectorised per
column (a line split in Python, then one numpy conversion per column); only when a conversion fails is the
column walked again in Python, to name the first bad row. Row numbers are 1-based file lines (the header
is line 1). Any problem is a one-line :class:`DataError` naming the file and the row or field.
"""
from __future__ import annotations

import gzip
import logging
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from pategail.server.errors import DataError

log = logging.getLogger(__name__)

CSV_COLUMNS = {"user_id": ("user_id", "uid"), "timestamp": ("timestamp", "ts"), "lat": ("lat",), "lon": ("lon",)}
"""The columns ``gps-csv`` needs and the header names accepted for each (case-insensitive); others are ignored."""
PLT_HEADER_LINES = 6
PLT_FIELDS = 7  # lat, lon, 0, altitude_ft, days since 1899-12-30, date, time (UTC)


@dataclass(frozen=True)
class Fixes:
    """GPS fixes of several users, as parallel arrays of length n.

    user: int64 (n,) — index into ``user_ids``. user_ids: (n_users,) — the source's user ids, sorted
    (int64 when every id is an integer, else str). time: float64 (n,) — unix seconds, UTC.
    lat, lon: float64 (n,) — WGS84 degrees, finite and in range. source: the file or folder read.
    """

    user: np.ndarray
    user_ids: np.ndarray
    time: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    source: str

    def __post_init__(self):
        n = len(self.user)
        if not all(len(a) == n for a in (self.time, self.lat, self.lon)):
            raise ValueError("Fixes: user, time, lat and lon must have the same length")

    def __len__(self) -> int:
        return len(self.user)

    def select(self, mask: np.ndarray) -> "Fixes":
        """The fixes where ``mask`` is true (user ids unchanged)."""
        return Fixes(self.user[mask], self.user_ids, self.time[mask], self.lat[mask], self.lon[mask], self.source)


def read_text(path: Path) -> str:
    """The text of a file, gunzipped when it starts with the gzip magic bytes (whatever its name)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise DataError(f"{path}: truncated or corrupt gzip file ({e})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        row = raw.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}: row {row}: not UTF-8 text") from None


def _split_rows(lines: list[str], first_line: int, n_fields: int, path: Path, what: str):
    """Split comma-separated lines; skip empty lines; check the field count. Returns (rows, line numbers)."""
    line_no = np.arange(first_line, first_line + len(lines))
    if "" in lines:  # empty lines (e.g. a blank line at the end) carry no fix
        keep = np.array([bool(s) for s in lines])
        lines, line_no = [s for s in lines if s], line_no[keep]
    rows = [s.split(",") for s in lines]
    counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    bad = np.flatnonzero(counts != n_fields)
    if len(bad):
        k = bad[0]
        raise DataError(f"{path}: row {line_no[k]}: expected {n_fields} comma-separated fields ({what}), "
                        f"got {counts[k]}")
    return rows, line_no


def _floats(values: list[str], path: Path, line_no: np.ndarray, field: str) -> np.ndarray:
    try:
        out = np.array(values, dtype=np.float64)
    except ValueError:
        for k, v in enumerate(values):
            try:
                float(v)
            except ValueError:
                raise DataError(f"{path}: row {line_no[k]}: field '{field}': not a number: {v!r}") from None
        raise  # numpy and Python disagree on what a number is: a bug, not a user error
    bad = ~np.isfinite(out)
    if bad.any():
        k = int(np.argmax(bad))
        raise DataError(f"{path}: row {line_no[k]}: field '{field}': {values[k]!r} is not a finite number")
    return out


def _check_coordinates(lat, lon, path: Path, line_no: np.ndarray, names=("lat", "lon")) -> None:
    for name, values, limit in ((names[0], lat, 90.0), (names[1], lon, 180.0)):
        bad = np.abs(values) > limit
        if bad.any():
            k = int(np.argmax(bad))
            raise DataError(f"{path}: row {line_no[k]}: field '{name}': {values[k]} is outside "
                            f"-{limit:g}..{limit:g} degrees")


def _iso_seconds(value: str) -> float:
    t = datetime.fromisoformat(value.strip())
    if t.tzinfo is None:  # a naive ISO time is read as UTC, like unix seconds
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def _timestamps(values: list[str], path: Path, line_no: np.ndarray, field: str) -> np.ndarray:
    """Unix seconds, or ISO 8601 ('2008-10-23T02:53:04Z', offsets honoured, naive = UTC); one kind per file."""
    try:
        float(values[0])
    except ValueError:
        try:
            return np.array([_iso_seconds(v) for v in values])
        except ValueError:
            for k, v in enumerate(values):
                try:
                    _iso_seconds(v)
                except ValueError:
                    kind = (f"the column holds ISO 8601 times, like row {line_no[0]}" if k
                            else "expected unix seconds or an ISO 8601 time")
                    raise DataError(f"{path}: row {line_no[k]}: field '{field}': unparsable timestamp {v!r} "
                                    f"({kind})") from None
            raise
    try:
        return _floats(values, path, line_no, field)
    except DataError as e:
        raise DataError(f"{e} (the column holds unix seconds, like row {line_no[0]})") from None


def _user_ids(values: list[str], path: Path, line_no: np.ndarray, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(user index per row, sorted unique ids): integer ids compare as integers ('007' is user 7)."""
    try:
        ids = np.array(values, dtype=np.int64)
    except (ValueError, OverflowError):
        ids = np.array([v.strip() for v in values])
        empty = ids == ""
        if empty.any():
            raise DataError(f"{path}: row {line_no[int(np.argmax(empty))]}: field '{field}': empty user id") from None
    uniq, inverse = np.unique(ids, return_inverse=True)
    return inverse.astype(np.int64), uniq


def read_gps_csv(path: str | Path) -> Fixes:
    """Read ``user_id,timestamp,lat,lon`` fixes (plain or gzipped CSV; extra columns ignored).

    Header names: ``user_id`` or ``uid``; ``timestamp`` or ``ts``; ``lat``; ``lon`` (any order, any case).
    Timestamps: unix seconds (UTC) or ISO 8601, one kind per file. Fields are not quoted.
    """
    path = Path(path)
    log.info("reading GPS fixes from %s", path)
    lines = read_text(path).splitlines()
    if not lines or not lines[0].strip():
        raise DataError(f"{path}: row 1: empty file; expected a header with columns "
                        f"{', '.join(a[0] for a in CSV_COLUMNS.values())}")
    header = [h.strip().lower() for h in lines[0].split(",")]
    col = {}
    for name, aliases in CSV_COLUMNS.items():
        found = [i for i, h in enumerate(header) if h in aliases]
        if not found:
            raise DataError(f"{path}: row 1: missing column '{name}' (accepted names: {' or '.join(aliases)}; "
                            f"the header has: {', '.join(header)})")
        if len(found) > 1:
            raise DataError(f"{path}: row 1: column '{name}' appears {len(found)} times "
                            f"({', '.join(header[i] for i in found)})")
        col[name] = found[0]
    rows, line_no = _split_rows(lines[1:], 2, len(header), path, "as many as the header")
    if not rows:
        raise DataError(f"{path}: no fixes (the file has only a header)")
    del lines

    def column(name):
        j = col[name]
        return [r[j] for r in rows]

    user, user_ids = _user_ids(column("user_id"), path, line_no, header[col["user_id"]])
    time = _timestamps(column("timestamp"), path, line_no, header[col["timestamp"]])
    lat = _floats(column("lat"), path, line_no, header[col["lat"]])
    lon = _floats(column("lon"), path, line_no, header[col["lon"]])
    _check_coordinates(lat, lon, path, line_no, (header[col["lat"]], header[col["lon"]]))
    log.info("read %d fixes of %d users", len(user), len(user_ids))
    return Fixes(user, user_ids, time, lat, lon, str(path))


def _read_plt(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, lat, lon) of one GeoLife ``.plt`` file; the time is read from its date and time fields (UTC)."""
    lines = read_text(path).splitlines()
    if len(lines) < PLT_HEADER_LINES:
        raise DataError(f"{path}: row {len(lines) + 1}: truncated header (a .plt file has "
                        f"{PLT_HEADER_LINES} header lines)")
    rows, line_no = _split_rows(lines[PLT_HEADER_LINES:], PLT_HEADER_LINES + 1, PLT_FIELDS, path,
                                "lat,lon,0,altitude,days,date,time")
    if not rows:
        return np.empty(0), np.empty(0), np.empty(0)
    lat = _floats([r[0] for r in rows], path, line_no, "lat")
    lon = _floats([r[1] for r in rows], path, line_no, "lon")
    _check_coordinates(lat, lon, path, line_no)
    stamps = [f"{r[5].strip()}T{r[6].strip()}" for r in rows]
    try:
        time = np.array(stamps, dtype="datetime64[s]")
    except ValueError:
        for k, v in enumerate(stamps):
            try:
                np.datetime64(v, "s")
            except ValueError:
                raise DataError(f"{path}: row {line_no[k]}: fields 'date','time': unparsable date and time "
                                f"{rows[k][5]!r} {rows[k][6]!r}") from None
        raise
    if np.isnat(time).any():
        k = int(np.argmax(np.isnat(time)))
        raise DataError(f"{path}: row {line_no[k]}: fields 'date','time': not a date and time: {stamps[k]!r}")
    return time.astype(np.int64).astype(np.float64), lat, lon


def read_geolife_plt(root: str | Path) -> Fixes:
    """Read the official GeoLife layout ``Data/NNN/Trajectory/*.plt`` (``root`` is the folder holding
    ``Data/``, or ``Data/`` itself); the user id is the ``NNN`` folder name."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: no such directory (expected the GeoLife folder holding Data/NNN/Trajectory)")
    data = root / "Data" if (root / "Data").is_dir() else root
    user_dirs = sorted(d for d in data.iterdir() if d.is_dir() and (d / "Trajectory").is_dir())
    if not user_dirs:
        raise DataError(f"{root}: no GeoLife user folders (expected Data/NNN/Trajectory/*.plt)")
    log.info("reading GeoLife .plt files of %d users under %s", len(user_dirs), data)
    names, parts = [], []
    for d in user_dirs:
        files = sorted((d / "Trajectory").glob("*.plt"))
        user_parts = [_read_plt(f) for f in files]
        if user_parts:
            names.append(d.name)
            parts.append(tuple(np.concatenate(a) for a in zip(*user_parts)))
    n = sum(len(p[0]) for p in parts)
    if n == 0:
        raise DataError(f"{root}: no fixes in any .plt file")
    # like gps-csv: integer ids ('000') sort as integers when all are integers, else as strings
    raw_ids = [int(s) for s in names] if all(s.isdigit() for s in names) else names
    order = sorted(range(len(names)), key=raw_ids.__getitem__)
    user_ids = np.array([raw_ids[i] for i in order])
    user = np.concatenate([np.full(len(parts[i][0]), k, np.int64) for k, i in enumerate(order)])
    time, lat, lon = (np.concatenate([parts[i][j] for i in order]) for j in range(3))
    log.info("read %d fixes of %d users", n, len(user_ids))
    return Fixes(user, user_ids, time, lat, lon, str(root))
