"""`pategail serve`: the coordinator as an HTTP service — federated PateGail over devices that reach it
through the network (`pategail device`, `pategail emulate`, a phone app).

Devices enrol with their public keys and poll for signed orders (a phone accepts no inbound connection);
training starts once ``--min-devices`` have enrolled, and the run's devices are then fixed. Every round is the
same Algorithm 1 as `pategail train`, in the same run directory (checkpoint, journal, report, bundle), so a
service stopped at any point continues with ``--resume``, spending no release twice.
"""
from __future__ import annotations

import logging
import ssl
import time
from pathlib import Path

from pategail.errors import PategailError

log = logging.getLogger(__name__)
KEY_FILE = "coordinator.key"
"""The coordinator's Ed25519 key in the run directory (mode 0600): devices pin it, so a resumed service
must sign with the same one."""
LINGER_S = 3.0


def register(sub) -> None:
    from pategail.train_cli import add_run_arguments

    p = sub.add_parser("serve", help="train a generator with federated PateGail over devices on the network",
                       description=__doc__.splitlines()[0])
    add_run_arguments(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: all)")
    p.add_argument("--port", type=int, default=8443, help="port (default 8443; 0: any free port)")
    p.add_argument("--tls-cert", type=Path, default=None, metavar="PEM", help="TLS certificate chain (with --tls-key)")
    p.add_argument("--tls-key", type=Path, default=None, metavar="PEM", help="TLS private key")
    p.add_argument("--min-devices", type=int, default=2, metavar="N",
                   help="devices to wait for before training starts (default 2); they are the run's devices")
    p.add_argument("--round-deadline", type=float, default=300.0, metavar="S",
                   help="seconds a device has to answer one request or secure-aggregation step (default 300); "
                        "one that does not is a dropout")
    p.add_argument("--max-body", type=int, default=16 << 20, metavar="BYTES",
                   help="largest request body accepted (default 16 MiB)")
    p.add_argument("--rate", type=float, default=20.0, metavar="R", help="requests a second per device (default 20)")
    p.set_defaults(func=run_serve)


def load_or_create_key(path: Path):
    """The coordinator's Ed25519 signing key, made once and kept (0600) in ``path``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.sdk.files import write_atomic

    if path.is_file():
        raw = path.read_bytes()
        if len(raw) != 32:
            raise PategailError(f"{path}: not a coordinator key (expected 32 bytes)")
        return Ed25519PrivateKey.from_private_bytes(raw)
    key = Ed25519PrivateKey.generate()
    write_atomic(path, key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                         serialization.NoEncryption()), 0o600)
    return key


def _ssl_context(args) -> ssl.SSLContext | None:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise PategailError("--tls-cert and --tls-key go together")
    if args.tls_cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as err:
        raise PategailError(f"{args.tls_cert} / {args.tls_key}: cannot load the TLS certificate and key ({err})") \
            from None
    return context


def run_serve(args) -> int:
    import torch

    from pategail.data.dataset import load_dataset
    from pategail.sdk.secagg.config import KeyDirectory
    from pategail.server.net.fleet import NetworkFleet
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service, ServiceLimits
    from pategail.train_cli import (_config, _run_log, check_cell_table, check_run_marker, ensure_initial_bundle,
                                    run_coordinator)

    config = _config(args)
    if config.aggregator != "coordinator":
        raise PategailError("a served run aggregates at the coordinator: set aggregator to \"coordinator\"")
    if args.min_devices < 1:
        raise PategailError(f"--min-devices must be at least 1, got {args.min_devices}")
    config = config.for_devices(args.min_devices)     # a served run plans for its minimum of devices
    if args.round_deadline <= 0:
        raise PategailError(f"--round-deadline must be positive, got {args.round_deadline}")
    if args.max_body < 1024 or args.rate <= 0:
        raise PategailError("--max-body must be at least 1024 and --rate positive")
    context = _ssl_context(args)
    downstream_config = None
    if not args.no_downstream:
        from pategail.evaluation.options import config_from_args
        downstream_config = config_from_args(args, args.seed)
    if args.threads < 1:
        raise PategailError(f"--threads {args.threads}: must be at least 1")
    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.data)
    check_cell_table(config, dataset, args)
    run = args.out
    check_run_marker(run, {"config": config.to_dict(), "seed": args.seed, "data": str(args.data.resolve()),
                           "fleet": "network"}, args.resume)
    with _run_log(run / "train.log", quiet_terminal=not (args.verbose or args.no_progress)) as console_level:
        initial_bundle = ensure_initial_bundle(config, dataset, args.seed, run)
        key = load_or_create_key(run / KEY_FILE)
        roster, hub, status = Roster(run), Hub(key.sign), RunStatus()
        status.update(rounds=config.rounds, target_epsilon=config.target_epsilon if config.private else None)
        service = Service(roster, hub, key, initial_bundle, status,
                          ServiceLimits(max_body=args.max_body, rate=args.rate, burst=max(2, int(2 * args.rate))))
        try:
            port = service.start(args.host, args.port, context)
        except OSError as err:
            raise PategailError(f"cannot listen on {args.host}:{args.port} ({err.strerror or err})") from None
        url = f"{'https' if context else 'http'}://{args.host}:{port}"
        (run / "service.url").write_text(url + "\n")
        print(f"pategail serve: listening on {url} (run {run}); coordinator key {service.coordinator_public.hex()}",
              flush=True)
        try:
            devices = _wait_for_devices(roster, args.min_devices, status)
            fleet = NetworkFleet(devices, hub, args.round_deadline)
            status.update(phase="training", devices=len(devices))

            def on_progress(coordinator):
                releases = coordinator.releases.journal()
                last = releases[max(releases)] if releases else None
                status.update(round=coordinator.round, participants=None if last is None else last.n_survivors,
                              epsilon=coordinator.accountant.epsilon_under(coordinator.releases.factors)
                              if config.private else 0.0)

            service.fix_directory(KeyDirectory(service.coordinator_public, devices))
            code = run_coordinator(args, config, dataset, run, fleet, downstream_config, console_level,
                                   signing_key=key, on_progress=on_progress)
            status.update(phase="finished")
            hub.close()
            time.sleep(LINGER_S)           # for polling devices to learn that the run is over (410)
        finally:
            # stopped by an error: the devices are not told the run is over — they keep retrying, for a --resume
            service.stop()
    return code


def _wait_for_devices(roster, min_devices: int, status) -> dict:
    """The run's devices: those already fixed (a resumed service), or the first ``min_devices`` or more that
    enrol (enrolment then closes)."""
    if roster.frozen:
        log.info("the run's %d devices are fixed (resumed)", len(roster))
        return roster.freeze()
    last = -1
    while len(roster) < min_devices:
        if len(roster) != last:
            last = len(roster)
            log.info("waiting for devices: %d of %d enrolled", last, min_devices)
        status.update(devices_enrolled=last)
        time.sleep(0.2)
    devices = roster.freeze()
    log.info("training starts with %d devices; enrolment is closed", len(devices))
    return devices
