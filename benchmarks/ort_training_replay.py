"""Does ONNX Runtime's discriminator training give the same parameters in every process? A probe of the one
known source of run-to-run differences in a seeded `--no-privacy` run (issue 17, session 9; BENCHMARKS.md).

The case in ``benchmarks/ort_training_replay/`` is real: device 10 of `make run`'s training before round 17 —
its training artifacts, its checkpoint (optimizer state included) and the 20 minibatches it trained on that
round. Each child process opens the session as a device does (`pategail.sdk.bundle.open_training_session`), takes
the 20 AdamW steps and prints the loss and a digest of the parameters after every step. Measured on this
machine (onnxruntime-training 1.19.2): two outcomes, about half the processes each, the parameters first
differing after step 10 by at most 3e-8; the same outcome in every process with address-space randomisation off
(``--no-aslr``: ``setarch -R``). In a whole run such a difference sits below the fixed-point resolution of the
released rewards until, some rounds later, it tips one sampled action (`make run`: about one run in four
leaves the others' path at round 32 and ends with another table).

Run: .venv/bin/python benchmarks/ort_training_replay.py [--processes 8] [--no-aslr]
"""
import argparse
import collections
import platform
import subprocess
import sys
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
args = parser.parse_args()

prefix = ["setarch", platform.machine(), "-R"] if args.no_aslr else []
runs = []
for _ in range(args.processes):
    done = subprocess.run(prefix + [sys.executable, "-c", CHILD, str(CASE)], capture_output=True, text=True,
                          check=True)
    runs.append(tuple(tuple(step) for step in __import__("json").loads(done.stdout)))
outcomes = collections.Counter(run[-1][1] for run in runs)
print(f"{args.processes} processes{' (no ASLR)' if args.no_aslr else ''}: final parameters "
      + ", ".join(f"{digest} × {n}" for digest, n in outcomes.most_common()))
if len(outcomes) > 1:
    first = min(i for i in range(len(runs[0])) if len({run[i][1] for run in runs}) > 1)
    losses = {run[first][0] for run in runs}
    print(f"first step whose parameters differ: {first} (of {len(runs[0])}); its loss "
          f"{'differs too' if len(losses) > 1 else 'is the same in every process'}")
