"""`pategail device`: the SDK's device command, with ``--data DIR --user U`` (one user of a prepared data set)
as a source of the device's days besides the SDK's ``--days FILE``."""
from __future__ import annotations


def register(sub) -> None:
    from pategail.data.dataset import load_user_days
    from pategail.sdk.net import cli as device_cli

    device_cli.register(sub, user_days=load_user_days)
