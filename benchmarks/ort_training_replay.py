"""Does ONNX Runtime's discriminator training give the same parameters in every process? A probe of the one
known source of run-to-run differences in a seeded `--no-privacy` run (issue 17, session 9; BENCHMARKS.md).

The case in ``benchmarks/ort_training_replay/`` is real: device 10 of `make run`'s training before round 17 —
its training artifacts, its checkpoint (optimizer state included) and the 20 minibatches it trained on that
round. Each child process opens the session as a device does (`pategail.sdk.bundle.open_training_session`), takes
the 20 AdamW steps and prints the loss and a digest of the parameters after every step. Measured on this
machine (onnxruntime-training 1.19.2): two outcomes (6 of 24 processes on the rarer one), the parameters first
differing after step 10 by at most 3e-8; the same outcome in every process with address-space randomisation off
(``--no-aslr``: ``setarch -R``), and in every process when the optimizer model's gradient-norm clip (ONNX
Runtime's ``InplaceClipGradNorm``, max_norm 1.0) never acts (``--max-norm 1e9``: a copy of the case with that
attribute changed) — so the clip's total norm is what rounds with the address layout. In a whole run such a
difference sits below the fixed-point resolution of the released rewards until, some rounds later, it tips one
sampled action (`make run`'s training: 3 runs of 15 left the others' path at round 32 and ended with another
table).

Run: .venv/bin/python benchmarks/ort_training_replay.py [--processes 8] [--no-aslr] [--max-norm X]
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
parser.add_argument("--max-norm", type=float, help="run a copy of the case whose optimizer clips the gradient "
                    "norm at this value instead of 1.0 (1e9: never)")
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


if args.max_norm is None:
    runs = run_children(CASE)
else:
    import onnx

    with tempfile.TemporaryDirectory(prefix="ort-replay-") as tmp:
        case = Path(shutil.copytree(CASE, Path(tmp) / "case"))
        model = onnx.load(case / "discriminator_optimizer_model.onnx")
        clip = next(n for n in model.graph.node if n.op_type == "InplaceClipGradNorm")
        next(a for a in clip.attribute if a.name == "max_norm").f = args.max_norm
        onnx.save(model, case / "discriminator_optimizer_model.onnx")
        runs = run_children(case)
outcomes = collections.Counter(run[-1][1] for run in runs)
print(f"{args.processes} processes{' (no ASLR)' if args.no_aslr else ''}"
      f"{f' (max_norm {args.max_norm:g})' if args.max_norm is not None else ''}: final parameters "
      + ", ".join(f"{digest} × {n}" for digest, n in outcomes.most_common()))
if len(outcomes) > 1:
    first = min(i for i in range(len(runs[0])) if len({run[i][1] for run in runs}) > 1)
    losses = {run[first][0] for run in runs}
    print(f"first step whose parameters differ: {first} (of {len(runs[0])}); its loss "
          f"{'differs too' if len(losses) > 1 else 'is the same in every process'}")
