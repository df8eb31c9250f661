"""`pategail emulate`: many SDK devices against a running service (`pategail serve`), over real sockets.

N devices, one user of a prepared data set each (the same users and ids `pategail train --devices N` would
use), spread over P operating-system processes with one thread per device; each is the device of
`pategail device`, with its store in ``--store``/device-I. The desktop emulator of many phones, now over the
network. Device I enrols with line I of ``--tokens`` (the service's ``RUN/enrol-tokens.txt``, or the operator's
file), unless the service admits every device.
"""
from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pategail.server.errors import PategailError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


def register(sub) -> None:
    p = sub.add_parser("emulate", help="run many devices in a few processes against a running service",
                       description=__doc__.splitlines()[0])
    p.add_argument("--server", required=True, metavar="URL", help="the service, http(s)://HOST:PORT")
    p.add_argument("--data", required=True, type=Path, metavar="DIR", help="prepared data set (one user per device)")
    p.add_argument("--devices", type=int, default=None, metavar="N", help="devices (default: every user)")
    p.add_argument("--processes", type=int, default=1, metavar="P", help="processes to spread them over (default 1)")
    p.add_argument("--store", type=Path, default=Path("pategail-devices"), metavar="DIR",
                   help="where the devices keep their stores (DIR/device-I; default ./pategail-devices)")
    p.add_argument("--seed", type=int, default=0, help="seed of the choice of users and of the devices' draws")
    p.add_argument("--share-users", action="store_true",
                   help="load tests: allow more devices than users, device I holding user I mod U's days")
    p.add_argument("--cafile", type=Path, default=None, metavar="PEM", help="CA certificates for an https service")
    p.add_argument("--tokens", type=Path, default=None, metavar="FILE",
                   help="enrolment tokens, one a line: device I enrols with line I (the service's "
                        "RUN/enrol-tokens.txt)")
    p.add_argument("--coordinator-key", default=None, metavar="HEX",
                   help="pin the coordinator's Ed25519 public key (default: trust the first one seen)")
    p.add_argument("--give-up", type=float, default=900.0, metavar="S",
                   help="seconds without an answer from the service before a device stops (default 900)")
    p.set_defaults(func=run_emulate)


def run_emulate(args) -> int:
    import multiprocessing

    from pategail.data.dataset import load_dataset
    from pategail.emulator import choose_users

    from pategail.sdk.net.connection import check_server_url, check_store, tls_context

    if args.processes < 1:
        raise PategailError(f"--processes must be at least 1, got {args.processes}")
    https, _, _ = check_server_url(args.server)
    tls_context(None if args.cafile is None else str(args.cafile), https)      # names a missing or bad file
    key = _coordinator_key(args.coordinator_key)
    check_store(args.store)
    all_users = load_dataset(args.data).users
    n_devices = len(all_users) if args.devices is None else args.devices
    users: list[Any] | np.ndarray
    if args.share_users and n_devices > len(all_users):
        chosen = choose_users(all_users, None, args.seed)
        users = [chosen[i % len(chosen)] for i in range(n_devices)]
    else:
        users = choose_users(all_users, args.devices, args.seed)
    if args.processes > len(users):
        raise PategailError(f"--processes {args.processes}: more processes than the {len(users)} devices")
    tokens: Sequence[str | None] = [None] * len(users)
    if args.tokens is not None:
        tokens = _read_tokens(args.tokens)
        if len(tokens) < len(users):
            raise PategailError(f"--tokens {args.tokens}: {len(tokens)} token(s) for {len(users)} devices")
    plan = [(i, int(u), tokens[i]) for i, u in enumerate(users)]
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_worker, name=f"pategail-devices-{k}",
                               args=(plan[k::args.processes], args.server, str(args.data), str(args.store), args.seed,
                                     None if args.cafile is None else str(args.cafile), key, args.give_up,
                                     logging.getLogger().level))
               for k in range(args.processes)]
    for w in workers:
        w.start()
    log.info("%d devices in %d processes against %s", len(plan), len(workers), args.server)
    try:
        for w in workers:
            w.join()
    finally:
        for w in workers:                                     # interrupted: take the devices down with us
            if w.is_alive():
                w.terminate()
                w.join()
    failed = [w.name for w in workers if w.exitcode != 0]
    if failed:
        raise PategailError(f"{len(failed)} of {len(workers)} device processes failed ({', '.join(failed)}); "
                            "see their log lines above")
    print(f"{len(plan)} devices took part until the run was over")
    return 0


def _coordinator_key(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise PategailError("--coordinator-key: 64 hex digits (a raw Ed25519 public key)")
    return key


def _read_tokens(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise PategailError(f"--tokens {path}: cannot read ({getattr(err, 'strerror', None) or err})") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _worker(devices, server: str, data: str, store: str, seed: int, cafile: str | None, key: bytes | None,
            give_up: float, level: int) -> None:
    """One process of devices: a thread per device, each a :class:`~pategail.sdk.net.client.DeviceClient`."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    from pategail.data.dataset import load_dataset
    from pategail.sdk.net.client import DeviceClient, RetryPolicy

    dataset = load_dataset(data)
    errors: list[str] = []

    def one(device_id: int, user: int, token: str | None) -> None:
        try:
            client = DeviceClient(server, Path(store) / f"device-{device_id:05d}",
                                  days=lambda: dataset.user_days(user), requested_id=device_id, seed=seed,
                                  cafile=cafile, coordinator_key=key, token=token,
                                  retry=RetryPolicy(give_up_s=give_up))
            client.run()
        except Exception as err:                  # noqa: BLE001 — one device's failure is reported, not fatal
            log.error("device %d stopped: %s", device_id, err)
            errors.append(f"{device_id}: {err}")

    threads = [threading.Thread(target=one, args=d, name=f"device-{d[0]}", daemon=True) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(1 if errors else 0)
