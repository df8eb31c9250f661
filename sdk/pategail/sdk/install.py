"""The model bundle on the device: verified, copied into the device directory, opened again at each start.

``bundle/`` in the device directory is the verified copy the device runs; a bundle is refused (BundleError,
nothing changed) when its hashes, versions or runtime do not check out, when it is not the one expected, when
it has no cell table (a models-only bundle), or when its cell table is smaller than the stored days need.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from pategail.sdk.bundle import Bundle, load_bundle
from pategail.sdk.errors import BundleError
from pategail.sdk.files import replacing_directory

BUNDLE_DIR = "bundle"


def install_bundle(root: Path, bundle_dir: str | os.PathLike[str], expected_sha256: str | None,
                   max_cell: int) -> Bundle:
    """Verify the bundle at ``bundle_dir`` (``expected_sha256`` if given; cell ids up to ``max_cell`` must
    exist) and copy it into ``root/bundle`` whole or not at all; returns the installed copy."""
    bundle = load_bundle(bundle_dir)
    if expected_sha256 is not None and bundle.sha256 != expected_sha256:
        raise BundleError(f"{bundle_dir}: bundle SHA-256 {bundle.sha256} differs from the expected "
                          f"{expected_sha256}")
    if bundle.environment is None:
        raise BundleError(f"{bundle_dir}: a models-only bundle (no cell table); devices cannot run it")
    if max_cell >= len(bundle.environment.cells):
        raise BundleError(f"{bundle_dir}: the bundle has {len(bundle.environment.cells)} cells, fewer than "
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
