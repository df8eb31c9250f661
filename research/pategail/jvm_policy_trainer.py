"""ONNX Runtime's training API for a Java device on the JVM (``org.pategail.core.tools.ProcessPolicyTrainer``):
the Java core's policy trainer hands its session calls — open a bundle's policy training models on a checkpoint
file, SGD steps on batches it built, save the checkpoint — to this process, which runs them in the Python SDK's
:class:`~pategail.sdk.fedavg_round.PolicyTrainer`. On a phone, onnxruntime-training-android does the same in
process; on the JVM its training API does not exist.

Usage: ``python -m pategail.jvm_policy_trainer [--log DIR]`` (``--log``: every step's batch and learning rate as
``DIR/step-NNNNN.npz``, for tests that replay the Java device's round). The wire format is the Java class's.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path
from typing import BinaryIO

import numpy as np

OP_OPEN, OP_STEP, OP_SAVE, OP_CLOSE = 1, 2, 3, 4
SLOTS, DECISIONS, STATE_FEATURES, ACTIONS = 48, 47, 11, 4


def _read(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise EOFError("the Java device closed the pipe mid-request")
    return data


def _string(stream: BinaryIO) -> str:
    (n,) = struct.unpack(">I", _read(stream, 4))
    return _read(stream, n).decode("utf-8")


def read_batch(stream: BinaryIO) -> tuple[float, tuple[np.ndarray, ...]]:
    """A STEP request's learning rate and batch (cells, features, mask, targets) as the SDK's trainer takes it."""
    lr, b = struct.unpack(">fI", _read(stream, 8))
    cells = np.frombuffer(_read(stream, 8 * b * SLOTS), ">i8").astype(np.int64).reshape(b, SLOTS)
    features = np.frombuffer(_read(stream, 4 * b * SLOTS * STATE_FEATURES), ">f4").astype(np.float32)
    mask = np.frombuffer(_read(stream, b * DECISIONS * ACTIONS), np.uint8).astype(bool)
    targets = np.frombuffer(_read(stream, 4 * b * DECISIONS * ACTIONS), ">f4").astype(np.float32)
    return lr, (cells, features.reshape(b, SLOTS, STATE_FEATURES), mask.reshape(b, DECISIONS, ACTIONS),
                targets.reshape(b, DECISIONS, ACTIONS))


def serve(stdin: BinaryIO, stdout: BinaryIO, log: Path | None = None) -> None:
    """Answer requests until the Java device closes the pipe."""
    from pategail.sdk.bundle import load_bundle
    from pategail.sdk.fedavg_round import PolicyTrainer

    trainer: PolicyTrainer | None = None
    steps = 0
    while True:
        head = stdin.read(1)
        if not head:
            return
        op, body, status = head[0], b"", 0
        try:
            if op == OP_OPEN:
                bundle, checkpoint = _string(stdin), _string(stdin)
                trainer = PolicyTrainer(load_bundle(Path(bundle)), checkpoint=checkpoint)
            elif op == OP_STEP:
                lr, batch = read_batch(stdin)
                if trainer is None:
                    raise RuntimeError("no session is open")
                body = struct.pack(">f", trainer.train_step(batch, lr))
                if log is not None:
                    cells, features, mask, targets = batch
                    np.savez(log / f"step-{steps:05d}.npz", learning_rate=np.float32(lr), cells=cells,
                             features=features, mask=mask, targets=targets)
                steps += 1
            elif op == OP_SAVE:
                path = _string(stdin)
                if trainer is None:
                    raise RuntimeError("no session is open")
                trainer.save_checkpoint(path)
            elif op == OP_CLOSE:
                trainer = None
            else:
                raise RuntimeError(f"unknown request {op}")
        except EOFError:
            return
        except Exception as err:                     # the Java device gets the reason as an IOException
            status, body = 1, f"{type(err).__name__}: {err}".encode("utf-8")
        stdout.write(struct.pack(">BI", status, len(body)) + body)
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pategail.jvm_policy_trainer", description=__doc__.split("\n")[0])
    parser.add_argument("--log", type=Path, help="write every step's batch here")
    args = parser.parse_args(argv)
    if args.log is not None:
        args.log.mkdir(parents=True, exist_ok=True)
    # the protocol keeps the original stdout to itself; anything else printed (a library's banner) goes to stderr
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, protocol, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
