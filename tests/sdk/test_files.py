"""Crash-safe writes: whole or not at all, private files private."""
from __future__ import annotations

import stat

import pytest

from pategail.sdk.files import replacing, replacing_directory, write_atomic


def test_write_atomic_replaces_whole_and_sets_the_mode(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"old")
    write_atomic(path, b"new secret", 0o600)
    assert path.read_bytes() == b"new secret" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "days.npy"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with replacing(path) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["days.npy"]


def test_directory_swap_is_all_or_nothing(tmp_path):
    target = tmp_path / "bundle"
    target.mkdir()
    (target / "a").write_text("old")
    with pytest.raises(RuntimeError):
        with replacing_directory(target) as tmp:
            (tmp / "a").write_text("half")
            raise RuntimeError("killed")
    assert (target / "a").read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]
    with replacing_directory(target) as tmp:
        (tmp / "b").write_text("new")
    assert [p.name for p in target.iterdir()] == ["b"] and sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]
