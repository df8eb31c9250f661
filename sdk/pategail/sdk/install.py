"""The model bundle on the device: verified, copied into the device directory, opened again at each start.

``bundle/`` in the device directory is the verified copy the device runs; a bundle is refused (BundleError,
nothing changed) when its hashes, versions or runtime do not check out, when it is not the one expected, when
it has no cell table (a models-only bundle), when its cell table is smaller than the stored days need, or when
it is on a cell table released from a public map other than the one the stored days are on.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from pategail.sdk.bundle import Bundle, load_bundle
from pategail.sdk.errors import BundleError
from pategail.sdk.files import replacing_directory

BUNDLE_DIR = "bundle"


def install_bundle(root: Path, bundle_dir: str | os.PathLike[str], expected_sha256: str | None,
                   max_cell: int, day_cells: np.ndarray | None = None, released: bool = False) -> Bundle:
    """Verify the bundle at ``bundle_dir`` (``expected_sha256`` if given; cell ids up to ``max_cell`` must
    exist) and copy it into ``root/bundle`` whole or not at all; returns the installed copy. ``day_cells``:
    the (lat, lon) of the cells the stored days are on (the installed bundle's public map, or its table), when
    the device holds days under a bundle; ``released``: the installed bundle's table was released from a
    public map. A bundle on a released table, or one replacing such a bundle, must keep the days on those very
    cells (a table released from another map, or a released table without its map, would read them wrong)."""
    bundle = load_bundle(bundle_dir)
    if expected_sha256 is not None and bundle.sha256 != expected_sha256:
        raise BundleError(f"{bundle_dir}: bundle SHA-256 {bundle.sha256} differs from the expected "
                          f"{expected_sha256}")
    if bundle.environment is None:
        raise BundleError(f"{bundle_dir}: a models-only bundle (no cell table); devices cannot run it")
    env = bundle.environment
    if day_cells is not None and (released or env.universe is not None):
        if not np.array_equal(env.cells if env.universe is None else env.universe, day_cells):
            what = "cell table was released from a public map other than" if env.universe is not None else \
                "cells are not the public map of the released table that holds"
            raise BundleError(f"{bundle_dir}: the bundle's {what} the stored days; refused (they would be read "
                              "wrong)")
    if max_cell >= env.n_day_cells:
        raise BundleError(f"{bundle_dir}: the bundle has {env.n_day_cells} cells, fewer than "
                          "the cell ids of the stored days")
    target = root / BUNDLE_DIR
    if Path(bundle_dir).resolve() != target.resolve():
        with replacing_directory(target) as tmp:
            shutil.copytree(bundle.root, tmp, dirs_exist_ok=True)
            load_bundle(tmp)                        # the copy is what the device will run: check it too
    return open_installed(root)


def open_installed(root: Path) -> Bundle:
    """The bundle installed in ``root`` (BundleError when it is unusable)."""
    bundle = load_bundle(root / BUNDLE_DIR)
    if bundle.environment is None:
        raise BundleError(f"{bundle.root}: a models-only bundle (no cell table)")
    return bundle
