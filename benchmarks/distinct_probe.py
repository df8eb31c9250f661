"""How strongly the trained personal discriminators of a `benchmarks/game.py` run react to "distinct cells so far".

For the first ``--devices`` devices of the run: each one's real (state, action) pairs with the "distinct" state
feature overwritten by k/48, k = 1..8, scored by the device's own D (through its input map, if its bundle
declares one); prints the mean D per k. Real days of city (a) never exceed 4 cells, so a discriminator that
punishes a 5th cell must score k = 5 clearly below k = 4. ``--action explore`` keeps only the real pairs whose
action is that one (real days of city (a) never explore at k = 4: D should punish it there).

Run: .venv/bin/python benchmarks/distinct_probe.py runs/a-off-s0 [--devices 30] [--action explore]
"""
import argparse
from pathlib import Path

import numpy as np

from pategail.sdk.device import Device
from pategail.sdk.features import ACTIONS, N_STATE_FEATURES, SLOTS, STATE_FEATURES

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("runs", nargs="+", type=Path)
parser.add_argument("--devices", type=int, default=30)
parser.add_argument("--action", choices=ACTIONS, default=None, help="only the real pairs of this action")
args = parser.parse_args()
column = STATE_FEATURES.index("distinct")
for run in args.runs:
    scores = {k: [] for k in range(1, 9)}
    for directory in sorted((run / "devices").iterdir())[:args.devices]:
        device = Device(directory, 0, rng=np.random.default_rng(0))
        pairs = device.positive_pairs()
        if args.action is not None:
            pairs = pairs[pairs[:, N_STATE_FEATURES + ACTIONS.index(args.action)] == 1]
            if not len(pairs):
                continue
        for k in scores:
            probe = pairs.copy()
            probe[:, column] = k / SLOTS
            scores[k].append(device.score(probe).mean())
    print(f"{run}: " + "  ".join(f"k={k}: {np.mean(v):.3f}" for k, v in scores.items()))
