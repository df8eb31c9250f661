"""`pategail device`: one device as a process, taking part in a served run (`pategail serve`) over HTTP(S).

Its store (``--store``) is the app's private storage: identity, days, bundle, discriminator, ledger and
network state; a device restarted on the same store resumes. Its days come from ``--days FILE`` (a CSV in
the synthetic form: agent,day,slot,cell,lat,lon — the owner's own days), read once, at the first start; the
full install's command line adds ``--data DIR --user U`` (one user of a prepared data set), which the SDK
alone cannot read. Its enrolment is
admitted by ``--token`` (single-use, from the operator) or by its key being on the service's allow-list
(``--show-key`` prints it).
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pategail.sdk.errors import SdkError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             user_days: Callable[[Path, int], np.ndarray] | None = None) -> None:
    """Add the ``device`` command. ``user_days(data_dir, user)`` returns one user's days of a prepared data set:
    given, the command also takes ``--data DIR --user U``."""
    p = sub.add_parser("device", help="run one device of a served run (polls the service over HTTP(S))",
                       description=__doc__.splitlines()[0])
    p.add_argument("--server", default=None, metavar="URL", help="the service, http(s)://HOST:PORT (required)")
    p.add_argument("--store", required=True, type=Path, metavar="DIR", help="the device's storage directory")
    days = p.add_mutually_exclusive_group()
    days.add_argument("--days", type=Path, default=None, metavar="FILE",
                      help="the owner's days, a CSV in the synthetic form (agent,day,slot,cell,lat,lon)")
    if user_days is not None:
        days.add_argument("--data", type=Path, default=None, metavar="DIR", help="a prepared data set (with --user)")
        p.add_argument("--user", type=int, default=None, metavar="U", help="the data set's user whose days it holds")
    p.add_argument("--device-id", type=int, default=None, metavar="I", help="ask to enrol as this id (default: any)")
    p.add_argument("--seed", type=int, default=0, help="seed of the device's minibatch draws (with its id and round)")
    p.add_argument("--coordinator-key", default=None, metavar="HEX",
                   help="pin the coordinator's Ed25519 public key (default: trust the first one seen)")
    p.add_argument("--cafile", type=Path, default=None, metavar="PEM",
                   help="CA certificates to verify an https service with (default: the system's)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help="the enrolment token the operator gave this device (single-use; not needed once enrolled)")
    p.add_argument("--show-key", action="store_true",
                   help="print the device's signing key (for the service's --allow-keys) and exit")
    p.add_argument("--give-up", type=float, default=900.0, metavar="S",
                   help="seconds without an answer from the service before the device stops (default 900)")
    p.set_defaults(func=run_device, user_days=user_days)


def days_loader(args: argparse.Namespace) -> Callable[[], np.ndarray] | None:
    """A function returning the device's days from --days or --data/--user (None when neither is given)."""
    data, user = getattr(args, "data", None), getattr(args, "user", None)
    if data is not None:
        if user is None:
            raise SdkError("--data needs --user")
        return lambda: args.user_days(data, user)
    if user is not None:
        raise SdkError("--user goes with --data")
    if args.days is not None:
        from pategail.sdk.synthetic import read_synthetic_csv
        return lambda: read_synthetic_csv(args.days)
    return None


def run_device(args: argparse.Namespace) -> int:
    from pategail.sdk.net.client import DeviceClient, RetryPolicy
    from pategail.sdk.net.connection import check_store
    from pategail.sdk.net.frames import ANY_ID

    if args.show_key:
        from pategail.sdk.identity import IDENTITY_FILE, load_or_create_identity
        check_store(args.store)
        print(load_or_create_identity(args.store / IDENTITY_FILE).signing_public.hex())
        return 0
    if args.server is None:
        raise SdkError("--server URL is required")
    key = None
    if args.coordinator_key is not None:
        try:
            key = bytes.fromhex(args.coordinator_key)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise SdkError("--coordinator-key: 64 hex digits (a raw Ed25519 public key)")
    if args.device_id is not None and not 0 <= args.device_id < ANY_ID:
        raise SdkError(f"--device-id {args.device_id}: out of range")
    client = DeviceClient(args.server, args.store, days=days_loader(args),
                          requested_id=ANY_ID if args.device_id is None else args.device_id, seed=args.seed,
                          coordinator_key=key, cafile=None if args.cafile is None else str(args.cafile),
                          token=args.token, retry=RetryPolicy(give_up_s=args.give_up))
    client.run()
    print(f"device {client.device_id}: the run is over; {client.orders_handled} orders answered")
    return 0
