"""Crash-safe writes: a file or a directory is replaced whole or not at all.

A phone app can be killed at any instruction, and the emulator's devices and the coordinator's run
directory must survive the same: everything the SDK, the coordinator and the data tools persist goes
through these helpers, so a reader sees either the old content or the new one, never half of it.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to a temporary sibling (created with ``mode``, so a private key is never readable by
    others, not even for a moment), fsync it and rename it over ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)                      # the umask may have narrowed it, or the file may have existed
    os.replace(tmp, path)


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """For writers that take a path (an ONNX Runtime checkpoint, ``numpy.save``): yields a temporary sibling
    to write; when the block ends without an exception it is fsynced and renamed over ``path``, otherwise
    removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def replacing_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yields an empty sibling directory to fill; when the block ends without an exception it takes the place
    of ``target`` (the old one, if any, is moved aside first and then deleted), otherwise it is deleted and
    ``target`` is untouched."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
