"""Does ONNX Runtime's discriminator training give the same parameters in every process? A probe of the one
known source of run-to-run differences in a seeded `--no-privacy` run (issue 17, sessions 9 and 10; BENCHMARKS.md).

The case in ``benchmarks/ort_training_replay/`` is real: device 10 of `make run`'s training before round 17 —
its training artifacts, its checkpoint (optimizer state included) and the 20 minibatches it trained on that
round. Each child process opens the session as a device does (`pategail.sdk.bundle.open_training_session`), takes
the 20 AdamW steps and prints the loss and a digest of the parameters after every step.

The cause (session 10): ONNX Runtime builds the optimizer model's parameter and gradient sequences in an order
that changes from process to process (constant with ``--no-aslr`` for this case, though not for every model:
see benchmarks/ort_sequence_order.py), and the
optimizer model bundles had until then, with ONNX Runtime's ``InplaceClipGradNorm`` (``--ort-clip``: the case's
original file, ``discriminator_optimizer_model.ort-clip.onnx``), adds the per-tensor squares in that order. Step 10
is the first whose gradient norm exceeds max_norm 1.0, so the clip acts, and its coefficient rounds three ways
depending on the order: two outcomes on this machine (onnxruntime-training 1.19.2; about one process in three on
the rarer one). Today's optimizer model (``pategail.export.artifacts.OrderFreeClipGradNorm``) sorts the sums
first: the same outcome in every process.

Run: .venv/bin/python benchmarks/ort_training_replay.py [--processes 8] [--no-aslr] [--ort-clip]
"""
import argparse
import collections
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASE = Path(__file__).resolve().parent / "ort_training_replay"
CHILD = """
import hashlib, json, sys, types
from pathlib import Path
import numpy as np
from pategail.sdk.bundle import open_training_session
d = Path(sys.argv[1])
art = lambda name: types.SimpleNamespace(path=d / name)
bundle = types.SimpleNamespace(
    checkpoint=d / "discriminator.ckpt",
    learning_rate=json.loads((d / "settings.json").read_text())["learning_rate"],
    discriminator={"training": art("discriminator_training_model.onnx"), "eval": art("discriminator_eval_model.onnx"),
                   "optimizer": art("discriminator_optimizer_model.onnx")})
session = open_training_session(bundle)
batches = np.load(d / "batches.npz")
steps = []
for pairs, labels in zip(batches["pairs"], batches["labels"]):
    loss = session.train_step(pairs, labels)
    steps.append((loss, hashlib.sha256(session.get_flat_parameters().tobytes()).hexdigest()[:12]))
print(json.dumps(steps))
"""

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--processes", type=int, default=8, help="child processes (each one run of the 20 steps)")
parser.add_argument("--no-aslr", action="store_true", help="run the children with address-space randomisation "
                    "off (Linux: setarch -R)")
parser.add_argument("--ort-clip", action="store_true", help="train with the case's original optimizer model "
                    "(ONNX Runtime's InplaceClipGradNorm, as bundles had before session 10)")
args = parser.parse_args()

prefix = ["setarch", platform.machine(), "-R"] if args.no_aslr else []


def run_children(case: Path) -> list[tuple]:
    """Each child's (loss, parameter digest) after every step."""
    runs = []
    for _ in range(args.processes):
        done = subprocess.run(prefix + [sys.executable, "-c", CHILD, str(case)], capture_output=True, text=True,
                              check=True)
        runs.append(tuple(tuple(step) for step in json.loads(done.stdout)))
    return runs


if args.ort_clip:
    with tempfile.TemporaryDirectory(prefix="ort-replay-") as tmp:
        case = Path(shutil.copytree(CASE, Path(tmp) / "case"))
        (case / "discriminator_optimizer_model.ort-clip.onnx").replace(case / "discriminator_optimizer_model.onnx")
        runs = run_children(case)
else:
    runs = run_children(CASE)
outcomes = collections.Counter(run[-1][1] for run in runs)
print(f"{args.processes} processes{' (no ASLR)' if args.no_aslr else ''}"
      f"{' (ONNX Runtime clip)' if args.ort_clip else ''}: final parameters "
      + ", ".join(f"{digest} × {n}" for digest, n in outcomes.most_common()))
if len(outcomes) > 1:
    first = min(i for i in range(len(runs[0])) if len({run[i][1] for run in runs}) > 1)
    losses = {run[first][0] for run in runs}
    print(f"first step whose parameters differ: {first} (of {len(runs[0])}); its loss "
          f"{'differs too' if len(losses) > 1 else 'is the same in every process'}")
