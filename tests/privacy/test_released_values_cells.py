"""Nothing a private run releases depends on a place outside its cell table. The table is public (every square
of a public box) or privately released (the squares whose noisy count cleared the threshold); a device's
contribution — the environment vector, its visited vector, its scored days — is computed from its days on
that table alone. Each test here compares what devices release from two data sets that differ only outside
the table: any difference fails it."""
from __future__ import annotations

import numpy as np

from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from pategail.sdk.cell_universe import release_mapping, remap_days, visited_vector
from pategail.sdk.environment_vector import environment_vector
from pategail.sdk.features import infer_home
from pategail.sdk.regions import REGION_CELLS
from tests.data.test_data_prepare_csv import FIXES, at, write_csv

BBOX = (39.9, 116.4, 39.96, 116.45)
OUTSIDE = [(39.85, 116.42), (39.93, 116.47), (40.5, 116.0)]     # south, east and far north of the box


def _released_vectors(data, cells):
    """What every device of ``data`` would put into the environment release and the cell release."""
    out = []
    for user in data.users:
        days = data.user_days(int(user))
        out.append(environment_vector(days, infer_home(days), cells, 1.55, 20, REGION_CELLS))
        out.append(visited_vector(days, len(cells), 4))
    return out


def test_fixes_outside_the_public_box_change_nothing_a_device_releases(tmp_path):
    extra = list(FIXES)
    for k, place in enumerate(OUTSIDE):           # an existing user between its fixes, and a user only outside
        extra += [("u7", at(0, 5 + k), place), ("u7", at(2, 12 + k), place), ("u8", at(0, 3 + k), place),
                  ("u8", at(1, 3 + k), place)]
    data = {}
    for name, fixes in (("base", FIXES), ("outside", extra)):
        prepare_dataset("gps-csv", write_csv(tmp_path / f"{name}.csv", fixes), tmp_path / name, bbox=BBOX,
                        test_fraction=0.3, public_cells=True, min_observed_slots=1)
        data[name] = load_dataset(tmp_path / name)
    base, outside = data["base"], data["outside"]
    np.testing.assert_array_equal(base.cells, outside.cells)
    np.testing.assert_array_equal(base.users, outside.users)
    for a, b in zip(_released_vectors(base, base.cells), _released_vectors(outside, outside.cells)):
        np.testing.assert_array_equal(a, b)


def test_days_through_unreleased_squares_reach_the_release_only_through_the_released_table():
    rng = np.random.default_rng(11)
    lat, lon = np.meshgrid(39.9 + 0.01 * np.arange(12), 116.3 + 0.01 * np.arange(12), indexing="ij")
    universe = np.column_stack([lat.ravel(), lon.ravel()])
    released = np.sort(rng.choice(len(universe), 30, replace=False))
    mapping = release_mapping(universe, released)
    unreleased = np.setdiff1d(np.arange(len(universe)), released)
    table = universe[released]
    for _ in range(20):
        days = rng.choice(len(universe), size=(6, 48))
        # the same days, with every slot in an unreleased square swapped for another unreleased square that
        # has the same nearest released square (or left alone when it has no such twin)
        twin = days.copy()
        for i, j in zip(*np.nonzero(np.isin(days, unreleased))):
            same = unreleased[(mapping[unreleased] == mapping[days[i, j]]) & (unreleased != days[i, j])]
            if len(same):
                twin[i, j] = rng.choice(same)
        assert (twin != days).any()
        a, b = remap_days(days, mapping), remap_days(twin, mapping)
        assert a.max() < len(released) and np.isin(a, np.arange(len(released))).all()
        for x, y in zip(_released_vectors_of(a, table), _released_vectors_of(b, table)):
            np.testing.assert_array_equal(x, y)


def _released_vectors_of(days, cells):
    return [environment_vector(days, infer_home(days), cells, 1.55, 20, REGION_CELLS),
            visited_vector(days, len(cells), 4)]
