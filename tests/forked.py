"""Python child processes for tests that run the command line as a user does (`python -m pategail ...`, a
benchmark script), forked from a server that imported the heavy libraries once per test worker: importing
torch, ONNX Runtime and the package costs each fresh interpreter seconds of CPU, which a test would otherwise
pay for every device, service or script it starts. A child is still its own process (its own pid, memory, file
descriptors, exit status, and, if asked, its own session to be killed with its descendants)."""
from __future__ import annotations

import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = Path(__file__).with_name("launch.py")
PRELOAD = ["numpy", "torch", "onnxruntime", "onnx", "aiohttp", "cryptography", "pategail.server.coordinator",
           "pategail.emulator", "pategail.data.dataset", "pategail.metrics.evaluate", "pategail.population.fleet",
           "pategail.cli"]
"""The modules the server imports before it forks a child."""


class Child:
    """``python ARGV`` (a script and its arguments, or ``-m MODULE ...``) run in a child of the fork server, its
    stdout and stderr written to files, with the part of ``subprocess.Popen``'s interface the tests use
    (``args``, ``pid``, ``poll``, ``wait``, ``returncode``, ``kill``)."""

    def __init__(self, argv: list, cwd: Path = ROOT, stdout: Path | None = None, stderr: Path | None = None,
                 append: bool = False, session: bool = False, single_thread: bool = False):
        """``stderr`` None: with stdout. ``append``: add to the files (a restarted process's log). ``session``:
        a new session, so that :meth:`kill_group` kills it with every process it started. ``single_thread``: one
        math thread (OMP_NUM_THREADS=1 in its environment, torch's threads 1), as a benchmark is measured."""
        self.args = [sys.executable, *map(str, argv)]
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        self._process = context.Process(target=runpy.run_path, args=(str(LAUNCH),), kwargs={"run_name": "launch",
                                        "init_globals": {"ARGV": self.args[1:], "ROOT": str(cwd),
                                                         "OUT": str(stdout or os.devnull),
                                                         "ERR": str(stderr or stdout or os.devnull),
                                                         "APPEND": append, "SESSION": session,
                                                         "SINGLE_THREAD": single_thread}})
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status (−N if a signal N ended it), None while it runs."""
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def kill(self) -> None:
        """SIGKILL to the child alone (nothing if it has ended)."""
        if self._process.exitcode is None:
            self._process.kill()

    def interrupt(self, grace: float) -> None:
        """SIGINT (Ctrl-C) to the child, then up to ``grace`` seconds for it to end, so that a script's own
        clean-up (processes it started in sessions of their own) runs."""
        if self._process.exitcode is None:
            os.kill(self.pid, signal.SIGINT)
            self._process.join(grace)

    def kill_group(self) -> None:
        """SIGKILL to the child, then to its session's process group (a ``session`` child and what it started:
        the group outlives its leader while a member lives); waits for the child."""
        self.kill()
        self._process.join()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
