"""`pategail generate`: synthetic days from a model bundle, with the same torch-free code a device runs.

The initial states (home, first cell) are drawn from the distribution the coordinator released into the
bundle (``initial_states.csv``: the noisy aggregate of the devices' contributions); a bundle without one is
refused with a one-line error. Days are made ``--batch`` at a time with the bundle's incremental policy
model (key/value cache) and streamed to the file, so memory does not grow with ``--days``.

:func:`main` is the ``pategail`` command of the SDK distribution alone (``pip install ./sdk``: only
``generate`` and ``device``); :func:`run` is how every ``pategail`` command line runs a command.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pategail.sdk.errors import BundleError, SdkError

log = logging.getLogger(__name__)
DEFAULT_BATCH = 1000
"""Days generated together: large enough that the per-slot overhead of the model call is shared, small
enough that the key/value cache (48 slots × 2 layers × 2 × 64 floats a day) stays in the processor's cache."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("generate", help="generate synthetic days with a model bundle's policy (ONNX Runtime)",
                       description="Generate synthetic days on this machine with the bundle's policy model and "
                                   "the EPR environment, exactly as a device does (no torch). Initial states "
                                   "come from the bundle's released initial-state distribution.")
    p.add_argument("--bundle", required=True, type=Path, metavar="DIR", help="model bundle directory")
    p.add_argument("--days", required=True, type=int, metavar="N", help="number of days to generate")
    p.add_argument("--out", required=True, type=Path, metavar="FILE",
                   help="synthetic CSV to write (agent,day,slot,cell,lat,lon; one agent per day)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the initial states, the policy's action draws and the environment")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, metavar="B",
                   help=f"days generated together and written at once (default {DEFAULT_BATCH}); the result "
                        "depends on it only through the order of random draws")
    p.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from pategail.sdk.bundle import load_bundle, open_generation_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days
    from pategail.sdk.synthetic import SyntheticCsvWriter

    if args.days < 1:
        raise SdkError(f"--days must be at least 1, got {args.days}")
    if args.batch < 1:
        raise SdkError(f"--batch must be at least 1, got {args.batch}")
    bundle = load_bundle(args.bundle)
    env = bundle.environment
    if env is None or env.initial_states is None:
        raise BundleError(f"{args.bundle}: the bundle has no released initial states (initial_states.csv); "
                          "it cannot seed generated days")
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    assert env.initial_weights is not None              # given with the initial states
    weights = env.initial_weights / env.initial_weights.sum()
    rows = env.initial_states[rng.choice(len(weights), size=args.days, p=weights)]
    geometry = CellGeometry.build(env.cells, env.candidates, lazy=True)       # rows as agents explore
    session = open_generation_session(bundle)
    with SyntheticCsvWriter(args.out, env.cells) as out:
        for start in range(0, args.days, args.batch):
            part = rows[start:start + args.batch]
            generated = generate_days(session, geometry, part[:, 0], part[:, 1], rng, alpha=env.alpha,
                                      explore_factors=env.explore_factors, places=env.places,
                                      max_cells=env.max_day_cells)
            out.write(generated.days)
            log.info("%d of %d days", min(start + args.batch, args.days), args.days)
    seconds = time.perf_counter() - t0
    print(f"{args.days} days written to {args.out} in {seconds:.1f} s ({args.days / seconds:,.0f} days/s)")
    return 0


def run(parser: argparse.ArgumentParser, argv: list[str] | None,
        user_errors: tuple[type[Exception], ...] = (SdkError,)) -> int:
    """Parse ``argv``, set up logging (``-q``: warnings only) and run the chosen command. ``user_errors`` are
    printed as one line with exit status 2 (or the error's ``exit_status``: 3 for a failed integrity check, 4 for
    an exhausted privacy budget); anything else is a bug and keeps its traceback."""
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        return int(args.func(args) or 0)
    except user_errors as e:
        print(f"pategail: error: {e}", file=sys.stderr)
        return getattr(e, "exit_status", 2)
    except KeyboardInterrupt:
        print("pategail: interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    """``pategail generate`` and ``pategail device`` with the SDK alone (the full command line is
    ``pategail.cli``)."""
    parser = argparse.ArgumentParser(prog="pategail", description="PateGail device SDK: generate synthetic days "
                                     "with a model bundle, exactly as a device does (no torch), or run one device "
                                     "of a served run.")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    from pategail.sdk.net import cli as device_cli
    device_cli.register(sub)
    return run(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
