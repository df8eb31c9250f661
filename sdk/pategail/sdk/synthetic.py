"""The synthetic data file that every generator in the project writes (baselines, devices, the coordinator).

CSV with the header ``agent,day,slot,cell,lat,lon`` and one row per slot: ``agent`` numbers the generated
agents from 0, ``day`` numbers each agent's days from 0, ``slot`` is 0..47 (half hours from local midnight),
``cell`` is a cell id of the data set the generator was trained on and ``lat``/``lon`` its centre in
degrees (so the file can be mapped without the data set). Rows are ordered by agent, day, slot.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType

import numpy as np

from pategail.sdk.errors import DataError
from pategail.sdk.features import SLOTS
from pategail.sdk.files import replacing

HEADER = "agent,day,slot,cell,lat,lon"


def _cell_text(cells: np.ndarray) -> list[str]:
    """"cell,lat,lon" of every cell, formatted once (the rows of a file repeat a few thousand cells)."""
    return [f"{c},{lat:.6f},{lon:.6f}" for c, (lat, lon) in enumerate(np.asarray(cells, dtype=np.float64).tolist())]


def _rows(days: np.ndarray, agents: np.ndarray, day_of_agent: np.ndarray, cell_text: list[str]) -> str:
    T = days.shape[1]
    prefix = [f"{a},{d}," for a, d in zip(agents.tolist(), day_of_agent.tolist())]
    return "".join(f"{p}{s},{cell_text[c]}\n" for p, row in zip(prefix, days.tolist()) for s, c in zip(range(T), row))


def write_synthetic_csv(path: str | os.PathLike[str], days: np.ndarray, cells: np.ndarray,
                        agents: np.ndarray | None = None) -> None:
    """Write generated days (n, T) of cell ids; ``agents`` (n,) gives each day's agent (default: one agent
    per day). Written to a temporary file and renamed, so a crash never leaves half a file."""
    days = np.asarray(days)
    n, T = days.shape
    agents = np.arange(n) if agents is None else np.asarray(agents)
    order = np.argsort(agents, kind="stable")
    days, agents = days[order], agents[order]
    day_of_agent = np.zeros(n, dtype=np.int64)
    for a in np.unique(agents):                      # 0, 1, 2... within each agent, in input order
        idx = np.flatnonzero(agents == a)
        day_of_agent[idx] = np.arange(len(idx))
    with SyntheticCsvWriter(path, cells) as out:
        out.write_rows(days, agents, day_of_agent)


class SyntheticCsvWriter:
    """Writes a synthetic data file batch by batch, so that 100,000 generated days never sit in memory as
    text at once. Use as a context manager: rows go to a temporary file that is renamed into place on a
    clean exit and removed on an error (``pategail.sdk.files.replacing``: a crash never leaves half a file
    under ``path``).

    :meth:`write` appends days of new agents (one day each, agents numbered on from the last batch).
    """

    def __init__(self, path: str | os.PathLike[str], cells: np.ndarray):
        self.path = Path(path)
        self._cell_text = _cell_text(cells)
        self.n_agents = 0

    def __enter__(self) -> "SyntheticCsvWriter":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._replacing = replacing(self.path)
        tmp = self._replacing.__enter__()
        try:
            self._file = open(tmp, "w", encoding="ascii", newline="\n")
            self._file.write(HEADER + "\n")
        except BaseException:
            self._replacing.__exit__(*sys.exc_info())
            raise
        return self

    def write(self, days: np.ndarray) -> None:
        """Append ``days`` (n, T), one new agent each."""
        days = np.asarray(days)
        agents = np.arange(self.n_agents, self.n_agents + len(days))
        self.write_rows(days, agents, np.zeros(len(days), dtype=np.int64))

    def write_rows(self, days: np.ndarray, agents: np.ndarray, day_of_agent: np.ndarray) -> None:
        """Append ``days`` (n, T) as days ``day_of_agent`` of ``agents`` (the caller keeps the file ordered)."""
        self._file.write(_rows(np.asarray(days), np.asarray(agents), np.asarray(day_of_agent), self._cell_text))
        self.n_agents = max(self.n_agents, int(np.max(agents, initial=-1)) + 1)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        self._file.close()
        return bool(self._replacing.__exit__(exc_type, exc, tb))


def read_synthetic_csv(path: str | os.PathLike[str], n_cells: int | None = None, slots: int = SLOTS) -> np.ndarray:
    """Read a synthetic data file back into int32 days (n, slots), validating every row."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file") from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise DataError(f"{path}: row 1: header must be '{HEADER}'")
    if len(lines) == 1:
        raise DataError(f"{path}: no rows")
    body = lines[1:]
    rows = np.empty((len(body), 4), dtype=np.int64)
    for i, line in enumerate(body):
        parts = line.split(",")
        try:
            if len(parts) != 6:
                raise ValueError
            rows[i] = int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])
            float(parts[4]), float(parts[5])
        except ValueError:
            raise DataError(f"{path}: row {i + 2}: expected 'agent,day,slot,cell,lat,lon', got {line!r}") from None
    if len(rows) % slots:
        raise DataError(f"{path}: {len(rows)} rows is not a whole number of {slots}-slot days (truncated?)")
    grid = rows.reshape(-1, slots, 4)
    slot_ok = (grid[:, :, 2] == np.arange(slots)).all(1)
    same_day = (grid[:, :, :2] == grid[:, :1, :2]).all((1, 2))
    bad = ~(slot_ok & same_day)
    if bad.any():
        row = int(np.argmax(bad)) * slots + 2
        raise DataError(f"{path}: row {row}: each day must list slots 0..{slots - 1} in order")
    days = grid[:, :, 3]
    if days.min() < 0 or (n_cells is not None and days.max() >= n_cells):
        i = int(np.argmax(((days < 0) | (days >= (n_cells or np.inf))).ravel()))
        raise DataError(f"{path}: row {i + 2}: cell {int(days.ravel()[i])} is not a cell id of the data set "
                        f"(0..{(n_cells or 0) - 1})")
    return days.astype(np.int32)
