"""The `pategail` command line. Each command lives next to the code it drives and registers itself here.

User mistakes (:class:`~pategail.errors.PategailError`) are printed as one line and exit with status 2 —
3 when a secure aggregation failed its integrity check (``IntegrityError``: resume to retry), 4 when the
privacy budget would be exceeded (``BudgetExhausted``); anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import logging
import sys


def build_parser() -> argparse.ArgumentParser:
    from pategail import __version__
    from pategail.baselines import cli as baselines_cli
    from pategail.data import cli as data_cli
    from pategail.export import cli as export_cli
    from pategail.metrics import cli as metrics_cli
    from pategail import train_cli
    from pategail.sdk import cli as sdk_cli

    parser = argparse.ArgumentParser(
        prog="pategail", description="Privacy-preserving mobility generation (PateGail): prepare data sets, fit "
        "baselines, train a generator with federated PateGail over emulated devices, export model bundles, "
        "generate and evaluate synthetic days. `pategail COMMAND --help` for each command.")
    parser.add_argument("--version", action="version", version=f"pategail {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (data_cli, metrics_cli, baselines_cli, export_cli, train_cli, sdk_cli):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from pategail.errors import PategailError

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        return int(args.func(args) or 0)
    except PategailError as e:
        print(f"pategail: error: {e}", file=sys.stderr)
        return getattr(e, "exit_status", 2)
    except KeyboardInterrupt:
        print("pategail: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
