"""A device run by the Android demo's Java core in its own process, reached over a pipe.

The Java core (``android-demo/core``) is the protocol as a phone runs it. :class:`JavaDevice` starts it as a
process (``org.pategail.core.tools.StdioDevice``) and talks to it with the SDK's own frames — device
messages (``PGDV``) and secure-aggregation messages (``PGSA``) — wrapped in a small envelope:

    request  = op u8 | length u32 | payload        reply = status u8 | length u32 | payload

Status 0 is a reply frame; 1–4 are the Java client's refusals, raised here as the SDK's exception types
(MessageRejected, ProtocolError, RefusedUnmask, SecAggAbort), so ``run_secure_round`` treats them exactly as
it treats a Python device's; 5 is a failure inside the Java device (:class:`JavaDeviceError`). A process that
has died — killed, crashed, or its pipe closed — is a dropout (:class:`DeviceGone`, a SecAggError).

It exposes the five steps of a secure-aggregation endpoint (``masked_input`` takes no scores: the Java
device uploads its own pending vector), so it takes part in ``run_secure_round(..., values=None)`` next to
Python SDK devices (``Device.secagg_endpoint``).
"""
from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

from pategail.server.errors import PategailError
from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.sdk.secagg.errors import MessageRejected, ProtocolError, RefusedUnmask, SecAggAbort, SecAggError

log = logging.getLogger(__name__)

MAIN_CLASS = "org.pategail.core.tools.StdioDevice"
(OP_PUBLIC_KEYS, OP_DIRECTORY, OP_INSTALL_BUNDLE, OP_ADD_DAYS, OP_DEVICE_MESSAGE) = range(1, 6)
OP_START_ROUND, OP_SHARE_KEYS, OP_MASKED_INPUT, OP_CONSISTENCY, OP_UNMASK, OP_MASKED_SCORES, OP_CPU_NANOS = \
    range(10, 17)
_REFUSALS = {1: MessageRejected, 2: ProtocolError, 3: RefusedUnmask, 4: SecAggAbort}
CORE = Path(__file__).resolve().parents[2] / "android-demo" / "core"
JARS = {"BouncyCastle (libbcprov-java)": Path("/usr/share/java/bcprov.jar"),
        "org.json (libandroid-json-org-java)": Path("/usr/share/java/json-android.jar")}
"""The core's two dependencies, as Debian installs them (on Android: bcprov from Maven, org.json built in)."""
JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")


def java_missing(with_junit: bool = False) -> str | None:
    """Why the Java core cannot be built and run here (one line), or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH (apt-get install openjdk-17-jdk-headless)"
    for name, jar in {**JARS, **({"JUnit 5 (junit5)": JUNIT} if with_junit else {})}.items():
        if not jar.is_file():
            return f"{jar} missing: install {name}"
    return None


def compile_core(out: str | os.PathLike, *, with_tests: bool = False) -> str:
    """javac the core (and its JUnit tests) for Java 11 into ``out``; returns the classpath that runs it."""
    out = Path(out)
    sources = sorted(str(p) for p in (CORE / "src" / "main").rglob("*.java"))
    if with_tests:
        sources += sorted(str(p) for p in (CORE / "src" / "test").rglob("*.java"))
    jars = [*JARS.values(), *([JUNIT] if with_tests else [])]
    done = subprocess.run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp",
                           ":".join(map(str, jars)), "-d", str(out), *sources], capture_output=True, text=True)
    if done.returncode != 0:
        raise JavaDeviceError(f"javac failed: {(done.stdout + done.stderr).strip()[-2000:]}")
    return ":".join([str(out), *(str(j) for j in JARS.values())])


class JavaDeviceError(PategailError):
    """The Java device failed in a way no protocol step allows (a bug, or a replay that does not match)."""


class DeviceGone(SecAggError):
    """The Java device's process is no longer there: from the protocol's view, a dropout."""


class JavaDevice:
    """One Java device process. ``classpath`` holds the compiled core and its two jars (BouncyCastle, org.json);
    ``root`` is its private directory; ``replay`` the reference run its trainer replays (JSON, see
    ``ReplayTrainer``); ``seed`` its minibatch generator's seed; ``jvm_options`` go to ``java`` before the class
    path; ``policy_trainer``: the device trains the policy in DP-FedAvg rounds (``ProcessPolicyTrainer``: ONNX
    Runtime in a :mod:`pategail.jvm_policy_trainer` process of this Python, its batches logged in
    ``policy_trainer_log`` when given); without it the device refuses those rounds. Its log goes to
    ``root/device.log``."""

    def __init__(self, classpath: str, root: str | os.PathLike, device_id: int, replay: str | os.PathLike, *,
                 seed: int = 0, java: str = "java", jvm_options: tuple[str, ...] = (), policy_trainer: bool = False,
                 policy_trainer_log: str | os.PathLike | None = None):
        self.device_id = int(device_id)
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._log = open(self.root / "device.log", "ab")
        trainer_options: list[str] = []
        if policy_trainer:
            trainer_options = ["--policy-trainer", sys.executable]
            if policy_trainer_log is not None:
                trainer_options += ["--policy-trainer-log", str(policy_trainer_log)]
        self._proc = subprocess.Popen(
            [java, *jvm_options, "-cp", classpath, MAIN_CLASS, "--root", str(self.root), "--id", str(self.device_id),
             "--replay", str(replay), "--seed", str(seed), *trainer_options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)

    # -- transport -----------------------------------------------------------------------------------------
    def _last_log_line(self) -> str:
        try:
            lines = (self.root / "device.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f"; its log ends: {lines[-1]}" if lines else ""

    def _call(self, op: int, payload: bytes = b"") -> bytes:
        assert self._proc.stdin is not None and self._proc.stdout is not None     # started with pipes
        if self._proc.poll() is not None:
            raise DeviceGone(f"device {self.device_id}: process exited ({self._proc.returncode})"
                             f"{self._last_log_line()}")
        try:
            self._proc.stdin.write(struct.pack(">BI", op, len(payload)) + payload)
            self._proc.stdin.flush()
            head = self._proc.stdout.read(5)
            if len(head) < 5:
                self._proc.wait(timeout=5)
                raise DeviceGone(f"device {self.device_id}: process closed its output{self._last_log_line()}")
            status, n = struct.unpack(">BI", head)
            body = self._proc.stdout.read(n)
        except (BrokenPipeError, ConnectionResetError, ValueError, subprocess.TimeoutExpired):
            raise DeviceGone(f"device {self.device_id}: process gone") from None
        if len(body) < n:
            raise DeviceGone(f"device {self.device_id}: process closed its output mid-reply")
        if status == 0:
            return body
        text = body.decode("utf-8", errors="replace")
        if status in _REFUSALS:
            raise _REFUSALS[status](text)
        raise JavaDeviceError(f"Java device {self.device_id}: {text}")

    def kill(self) -> None:
        """Stop the process at once (a phone switched off mid-round)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def close(self) -> None:
        """Let the process end (closing its input), or kill it if it does not within 10 s."""
        assert self._proc.stdin is not None and self._proc.stdout is not None     # started with pipes
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                self.kill()
        for stream in (self._proc.stdout, self._proc.stdin):
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass
        self._log.close()

    def __enter__(self) -> "JavaDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cpu_seconds(self) -> float:
        """CPU time the Java process's serving thread has used so far (for benchmarks)."""
        return struct.unpack(">Q", self._call(OP_CPU_NANOS))[0] / 1e9

    # -- the app's side ------------------------------------------------------------------------------------
    @property
    def public_keys(self) -> DevicePublicKeys:
        """The device's long-term public keys (what the coordinator enrols)."""
        raw = self._call(OP_PUBLIC_KEYS)
        return DevicePublicKeys(raw[:32], raw[32:])

    def set_directory(self, signed_directory: bytes) -> None:
        """Give the device its coordinator's public-key directory (at enrolment), as the coordinator signs it
        (``pategail.sdk.net.frames.directory_to_bytes``): the device pins the key of the first one and refuses
        any directory that key did not sign (MessageRejected)."""
        self._call(OP_DIRECTORY, bytes(signed_directory))

    def install_bundle(self, path: str | os.PathLike) -> str:
        """Verify and install the bundle at ``path``; returns its SHA-256."""
        return self._call(OP_INSTALL_BUNDLE, str(Path(path).resolve()).encode("utf-8")).decode("ascii")

    def add_days(self, days: np.ndarray) -> int:
        """Store the owner's days (int (n, 48)) on the device; returns how many it holds."""
        days = np.ascontiguousarray(days, dtype="<i4")
        return struct.unpack(">I", self._call(OP_ADD_DAYS, days.tobytes()))[0]

    def handle(self, request: bytes) -> bytes:
        """A coordinator message in, the device's Ack or ErrorReply out (as ``Device.handle``)."""
        return self._call(OP_DEVICE_MESSAGE, bytes(request))

    # -- secure aggregation (the endpoint run_secure_round drives) -----------------------------------------
    def start_round(self, config: bytes, envelope: bytes) -> bytes:
        return self._call(OP_START_ROUND, struct.pack(">I", len(config)) + config
                          + struct.pack(">I", len(envelope)) + envelope)

    def share_keys(self, key_broadcast: bytes) -> bytes:
        return self._call(OP_SHARE_KEYS, key_broadcast)

    def masked_input(self, share_delivery: bytes, scores: np.ndarray | None = None) -> bytes:
        """The masked upload of the device's pending vector; or, given ``scores`` (M,), of those scores — the
        Python ``SecAggClient``'s form, which ``run_secure_round`` uses when it is passed values (benchmarks)."""
        if scores is None:
            return self._call(OP_MASKED_INPUT, share_delivery)
        scores = np.ascontiguousarray(scores, dtype=">f8")
        return self._call(OP_MASKED_SCORES, struct.pack(">I", len(share_delivery)) + share_delivery
                          + struct.pack(">I", scores.size) + scores.tobytes())

    def consistency_check(self, survivor_set: bytes) -> bytes:
        return self._call(OP_CONSISTENCY, survivor_set)

    def unmask(self, ack_set: bytes) -> bytes:
        return self._call(OP_UNMASK, ack_set)
