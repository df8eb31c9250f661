"""``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``) as a fresh interpreter would run it, in a child forked
from a server that imported the heavy libraries once (``Child`` in forked.py). Run by ``runpy.run_path`` with
the globals ARGV (the command line after ``python``), ROOT (the working directory), OUT and ERR (files that take
the child's stdout and stderr; the same path: one file), APPEND (add to them), SESSION (start a new session) and
SINGLE_THREAD (one math thread)."""
import atexit
import io
import logging
import os
import runpy
import sys

if SESSION:                                    # noqa: F821 (given by the caller)
    os.setsid()
flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if APPEND else os.O_TRUNC)     # noqa: F821
for fd, path in ((1, OUT), (2, ERR)):          # noqa: F821
    if fd == 2 and path == OUT:                # noqa: F821
        os.dup2(1, 2)
        continue
    handle = os.open(path, flags, 0o644)
    os.dup2(handle, fd)
    os.close(handle)
# buffered as a fresh interpreter's are on files: stdout by blocks (unbuffered under PYTHONUNBUFFERED), stderr by
# lines
unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=0 if unbuffered else -1, closefd=False), encoding="utf-8",
                              write_through=unbuffered)
sys.stderr = io.TextIOWrapper(open(2, "wb", buffering=0, closefd=False), encoding="utf-8",
                              errors="backslashreplace", line_buffering=True)
# a preloaded library may have configured logging on import (ONNX Runtime's tools do): start as a fresh
# interpreter does, so that the command's own logging set-up takes effect
logging.getLogger().handlers.clear()
logging.getLogger().setLevel(logging.WARNING)
os.chdir(ROOT)                                 # noqa: F821
if SINGLE_THREAD:                              # noqa: F821
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):    # for the script's children too
        os.environ[var] = "1"
    if "torch" in sys.modules:                 # as OMP_NUM_THREADS=1 gives a fresh process
        sys.modules["torch"].set_num_threads(1)
try:
    if ARGV[0] == "-m":                        # noqa: F821
        sys.argv = list(ARGV[1:])              # noqa: F821
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(ARGV)                  # noqa: F821
        sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
        runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    atexit._run_exitfuncs()                    # multiprocessing ends the child with os._exit, which skips them
    sys.stdout.flush()
    sys.stderr.flush()
