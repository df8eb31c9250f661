"""The `pategail` command line: one module per command (this package; the device's own commands ``generate``
and ``device`` come from the SDK), each parsing its options and calling the library.

User mistakes (``pategail.server.errors.USER_ERRORS``: the command line's :class:`~pategail.server.errors.PategailError` and
the SDK's :class:`~pategail.sdk.errors.SdkError`) are printed as one line and exit with status 2 — 3 when a
secure aggregation failed its integrity check (``IntegrityError``: resume to retry), 4 when the privacy budget
would be exceeded (``BudgetExhausted``); anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import version
    from pategail.cli import baselines as baselines_cli
    from pategail.cli import data as data_cli
    from pategail.cli import device as device_cli
    from pategail.cli import emulate as emulate_cli
    from pategail.cli import export as export_cli
    from pategail.cli import metrics as metrics_cli
    from pategail.cli import privacy as privacy_cli
    from pategail.cli import serve as serve_cli
    from pategail.cli import train as train_cli
    from pategail.sdk import cli as sdk_cli

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
    from pategail.server.errors import USER_ERRORS
    from pategail.sdk.cli import run

    return run(build_parser(), argv, USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
