"""The `pategail` command line. Each command lives next to the code it drives and registers itself here.

User mistakes (``pategail.errors.USER_ERRORS``: the command line's :class:`~pategail.errors.PategailError` and
the SDK's :class:`~pategail.sdk.errors.SdkError`) are printed as one line and exit with status 2 — 3 when a
secure aggregation failed its integrity check (``IntegrityError``: resume to retry), 4 when the privacy budget
would be exceeded (``BudgetExhausted``); anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import version
    from pategail.baselines import cli as baselines_cli
    from pategail.data import cli as data_cli
    from pategail.export import cli as export_cli
    from pategail.metrics import cli as metrics_cli
    from pategail import emulate_cli, privacy_cli, serve_cli, train_cli
    from pategail.sdk import cli as sdk_cli
    from pategail.sdk.net import cli as device_cli

    parser = argparse.ArgumentParser(
        prog="pategail", description="Privacy-preserving mobility generation (PateGail): prepare data sets, fit "
        "baselines, train a generator with federated PateGail over emulated devices, export model bundles, "
        "generate and evaluate synthetic days. `pategail COMMAND --help` for each command.")
    parser.add_argument("--version", action="version", version=f"pategail {version('pategail')}")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (data_cli, metrics_cli, baselines_cli, export_cli, train_cli, privacy_cli, serve_cli, device_cli,
                   emulate_cli, sdk_cli):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from pategail.errors import USER_ERRORS
    from pategail.sdk.cli import run

    return run(build_parser(), argv, USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
