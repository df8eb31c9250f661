"""`pategail generate` for two variants A and B in ABBA order on one pinned core, so that a load that drifts
during the runs weighs on both alike. Same untrained bundle as benchmarks/generate_throughput.py.

By default A builds the whole neighbour table at start-up and B computes its rows as they are read (today's
code). ``--heads A,B``, ``--layers A,B`` and ``--width A,B`` compare untrained policies of A and B attention
heads, transformer blocks or token widths (d_model); the other settings are TrainConfig's. ``--stages A,B``
compares the decoder's cache stages (rows added per stage; 47 = one 47-row buffer) on one bundle: the untrained
one, or a trained bundle given with ``--bundle``.

Run: python benchmarks/generate_cli_abba.py --data runs/pategail-geolife [--cpu 0]
     [--heads 4,1 | --layers 2,1 | --width 64,32 | --stages 47,12 [--bundle RUN/bundle]] [--json OUT]
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import generate_throughput as g  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--data", type=Path, required=True)
p.add_argument("--cpu", type=int, default=0)
p.add_argument("--small", default="1000:ABBAABBA", help="days:order of the small runs")
p.add_argument("--big", default="100000:ABBA", help="days:order of the large runs ('' skips them)")
shape = p.add_mutually_exclusive_group()
shape.add_argument("--heads", help="A,B: compare policies of A and B attention heads instead")
shape.add_argument("--layers", help="A,B: compare policies of A and B transformer blocks instead")
shape.add_argument("--width", help="A,B: compare policies of token width (d_model) A and B instead")
shape.add_argument("--stages", help="A,B: compare the decoder's cache stages of A and B rows instead")
p.add_argument("--bundle", type=Path, help="with --stages: this (trained) bundle instead of an untrained one")
p.add_argument("--json", type=Path)
args = p.parse_args()
if args.bundle and not args.stages:
    p.error("--bundle goes with --stages (the other comparisons export untrained policies of two shapes)")
for opt in ("heads", "layers", "width", "stages"):
    spec = getattr(args, opt)
    if spec and not (len(spec.split(",")) == 2 and all(v.strip().isdigit() and int(v) > 0 for v in spec.split(","))):
        p.error(f"--{opt} takes two positive whole numbers A,B, got {spec!r}")
if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {args.cpu})
out = []
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    shaped = args.heads or args.layers or args.width
    stages = dict(zip("AB", (int(n) for n in args.stages.split(",")))) if args.stages else {}
    if stages:
        bundle = args.bundle or g.untrained_bundles(args.data, tmp)[0]
        bundles = {"A": bundle, "B": bundle}
        names = {v: f"{v}: stages of {n} rows" for v, n in stages.items()}
    elif shaped:
        what, spec = next((w, s) for w, s in (("heads", args.heads), ("layers", args.layers),
                                              ("width", args.width)) if s)
        sizes = dict(zip("AB", (int(h) for h in spec.split(","))))
        bundles = {v: g.untrained_bundles(args.data, tmp / v, **{what: n})[0] for v, n in sizes.items()}
        names = {v: f"{v}: {n} {what}" for v, n in sizes.items()}
    else:
        bundle, _ = g.untrained_bundles(args.data, tmp)
        bundles = {"A": bundle, "B": bundle}
        names = {"A": "A: whole table at start-up", "B": "B: rows as read"}
    for spec in (args.small, args.big):
        if not spec:
            continue
        days, order = spec.split(":")
        for v in order:
            r = g.cli(bundles[v], int(days), tmp / "days.csv", args.cpu,
                      eager_geometry=v == "A" and not (shaped or stages), stage=stages.get(v))
            r["variant"] = names[v]
            out.append(r)
            print(f"{r['variant']:27s} {r['days']:>7,} days  CPU {r['cpu_s']:.2f} s  {r['days'] / r['cpu_s']:,.0f} "
                  f"days per CPU s  wall {r['wall_s']:.1f} s  peak RSS {r['peak_rss_mb']:.0f} MB  load {r['load']}",
                  flush=True)
if args.json:
    args.json.write_text(json.dumps(out, indent=1) + "\n")
