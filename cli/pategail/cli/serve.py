"""`pategail serve`: the coordinator as an HTTP service — federated PateGail over devices that reach it
through the network (`pategail device`, `pategail emulate`, a phone app).

Devices enrol with their public keys — admitted by a single-use enrolment token the operator hands out
(issued into ``RUN/enrol-tokens.txt``, or ``--enrol-tokens FILE``), or by an allow-list of device keys — and
poll for signed orders (a phone accepts no inbound connection); once ``--min-devices`` have enrolled and
answered a liveness check, training starts and the run's devices are fixed. Every round is the
same Algorithm 1 as `pategail train`, in the same run directory (checkpoint, journal, report, bundle), so a
service stopped at any point continues with ``--resume``, spending no release twice.
"""
from __future__ import annotations

import logging
import os
import ssl
import time
from pathlib import Path

from pategail.server.errors import PategailError

log = logging.getLogger(__name__)
KEY_FILE = "coordinator.key"
"""The coordinator's Ed25519 key in the run directory (mode 0600): devices pin it, so a resumed service
must sign with the same one."""
OPERATOR_TOKEN_FILE = "operator.token"
"""The bearer token of the operator's routes (/devices, /metrics) in the run directory (mode 0600)."""
LINGER_S = 3.0
LOG_MAX_BYTES = 64 << 20
"""train.log of a served run rotates at this size (4 older logs kept): a service under attack logs refusals."""


def register(sub) -> None:
    from pategail.cli.train import add_run_arguments

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
    p.add_argument("--max-connections-per-address", type=int, default=256, metavar="N",
                   help="connections one remote address may hold (default 256; behind a reverse proxy, every "
                        "connection comes from the proxy)")
    admission = p.add_mutually_exclusive_group()
    admission.add_argument("--enrol-tokens", type=Path, default=None, metavar="FILE",
                           help="single-use enrolment tokens, one a line (re-read when it changes); default: "
                                "--min-devices tokens issued into RUN/enrol-tokens.txt")
    admission.add_argument("--allow-keys", type=Path, default=None, metavar="FILE",
                           help="admit only these device signing keys, 64 hex digits a line "
                                "(pategail device --show-key)")
    admission.add_argument("--open-enrolment", action="store_true",
                           help="admit any device (only for a service no stranger can reach)")
    p.add_argument("--resume-if-any", action="store_true",
                   help="resume the run in RUN if there is one, else start it (a service manager's restarts)")
    p.add_argument("--liveness-deadline", type=float, default=30.0, metavar="S",
                   help="seconds an enrolled device has to answer the check before enrolment closes; one that "
                        "does not holds no seat (default 30)")
    p.set_defaults(func=run_serve)

    d = sub.add_parser("devices", help="list a served run's devices (id, key, last seen, orders answered, dropouts)",
                       description="List the devices of a served run: from its running service (GET /devices, "
                                   "with the operator's token), or from its roster when the service is not running.")
    d.add_argument("--run", required=True, type=Path, metavar="RUN", help="the served run's directory")
    d.add_argument("--cafile", type=Path, default=None, metavar="PEM", help="CA certificates for an https service")
    d.add_argument("--json", action="store_true", help="print the service's JSON answer")
    d.set_defaults(func=run_devices)


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


def check_arguments(args) -> None:
    """Everything that can be checked before any work (export, run directory): one-line errors."""
    if args.min_devices < 1:
        raise PategailError(f"--min-devices must be at least 1, got {args.min_devices}")
    if args.round_deadline <= 0 or args.liveness_deadline <= 0:
        raise PategailError("--round-deadline and --liveness-deadline must be positive")
    if args.max_body < 1024 or args.rate <= 0:
        raise PategailError("--max-body must be at least 1024 and --rate positive")
    if args.max_connections_per_address < 1:
        raise PategailError("--max-connections-per-address must be at least 1")
    if not 0 <= args.port <= 65535:
        raise PategailError(f"--port {args.port}: a port is 0 to 65535 (0: any free port)")
    if args.threads < 1:
        raise PategailError(f"--threads {args.threads}: must be at least 1")
    for parent in [args.out, *args.out.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise PategailError(f"--out {args.out}: {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise PategailError(f"--out {args.out}: {parent} is not writable")
            break
    for option, path in (("--enrol-tokens", args.enrol_tokens), ("--allow-keys", args.allow_keys)):
        if path is not None and not path.is_file():
            raise PategailError(f"{option} {path}: no such file")


def _admission(args, run: Path):
    from pategail.server.net.admission import TOKENS_FILE, Admission, issue_tokens, read_allowed_keys

    if args.open_enrolment:
        return Admission.open_to_all(), None
    if args.allow_keys is not None:
        return Admission(allowed_keys=read_allowed_keys(args.allow_keys)), None
    if args.enrol_tokens is not None:
        return Admission(tokens_file=args.enrol_tokens), None
    path = run / TOKENS_FILE
    issued = None
    if not path.is_file():
        issue_tokens(path, args.min_devices)
        issued = path
    return Admission(tokens_file=path), issued


def run_serve(args) -> int:
    check_arguments(args)
    if args.resume_if_any and (args.out / "run.json").is_file():
        args.resume = True
    from pategail.server.net.address import listening_socket
    context = _ssl_context(args)
    sock = listening_socket(args.host, args.port)             # before any work: a busy port fails at once

    import torch

    from pategail.data.dataset import load_dataset
    from pategail.sdk.secagg.config import KeyDirectory
    from pategail.server.net.fleet import NetworkFleet
    from pategail.server.net.hub import Hub
    from pategail.server.net.address import service_url
    from pategail.server.net.liveness import close_enrolment
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service, ServiceLimits
    from pategail.cli.train import build_config
    from pategail.training import (check_cell_table, check_run_marker, ensure_initial_bundle, public_map_bundle,
                                   release_cells, run_coordinator, run_log)

    config = build_config(args)
    if config.secagg.aggregator != "coordinator":
        raise PategailError("a served run aggregates at the coordinator: set aggregator to \"coordinator\"")
    downstream_config = None
    if not args.no_downstream:
        from pategail.evaluation.options import config_from_args
        downstream_config = config_from_args(args, args.seed)
    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.data)
    config = config.for_devices(args.min_devices, dataset.n_cells)    # a served run plans for its minimum of devices
    check_cell_table(config, dataset, args.data, args.data_derived_cells)
    run = args.out
    check_run_marker(run, {"config": config.to_dict(), "seed": args.seed, "data": str(args.data.resolve()),
                           "fleet": "network"}, args.resume)
    with run_log(run / "train.log", quiet_terminal=not (args.verbose or args.no_progress),
                  max_bytes=LOG_MAX_BYTES) as console_level:
        def say(line: str) -> None:
            """A line for the operator: in train.log, and on the terminal whatever its level (above the
            progress bar, if any)."""
            log.info(line)
            if console_level > logging.INFO:
                from tqdm import tqdm
                tqdm.write(f"pategail serve: {line}")

        admission, issued = _admission(args, run)
        if not config.privacy.released_cells:
            initial_bundle = ensure_initial_bundle(config, dataset, args.seed, run)
        elif (run / "bundle-initial" / "manifest.json").is_file():    # resumed after the release: its table
            initial_bundle = run / "bundle-initial"
        else:                                 # the devices enrol on the public map; the release comes first
            initial_bundle = public_map_bundle(config, dataset, args.seed, run)
        key = load_or_create_key(run / KEY_FILE)
        operator_token = _operator_token(run / OPERATOR_TOKEN_FILE)

        def missed(work, device_ids, deadline_s):
            say(f"{work}: device(s) {', '.join(map(str, device_ids[:20]))}{' …' if len(device_ids) > 20 else ''} "
                f"did not answer within {deadline_s:g} s (dropouts of this step)")

        roster, hub, status = Roster(run, admission), Hub(key.sign, on_missed=missed), RunStatus()
        status.update(rounds=config.rounds, target_epsilon=config.privacy.epsilon if config.private else None)
        if args.resume:
            status.update(phase="resuming", round=None)        # until the checkpoint is read
        service = Service(roster, hub, key, initial_bundle, status,
                          ServiceLimits(max_body=args.max_body, rate=args.rate, burst=max(2, int(2 * args.rate)),
                                        max_connections_per_address=args.max_connections_per_address),
                          operator_token=operator_token)
        port = service.start(args.host, args.port, context, sock=sock)
        url = service_url(args.host, port, args.tls_cert if context else None)
        (run / "service.url").write_text(url + "\n")
        print(f"pategail serve: listening on {url} (run {run}); coordinator key {service.coordinator_public.hex()}; "
              f"operator's token in {run / OPERATOR_TOKEN_FILE}", flush=True)
        if not roster.frozen:
            say(f"admission: {admission.describe()}"
                + (" (issued now: hand one to each device, pategail device --token)" if issued else ""))
        try:
            if roster.frozen:
                devices = roster.freeze()
                say(f"the run's {len(devices)} devices are fixed (resumed)")
            else:
                devices = close_enrolment(roster, hub, args.min_devices, args.liveness_deadline, say,
                                          on_count=lambda n: status.update(devices_enrolled=n))
            awaiting_initial_states = [True]            # until the coordinator says otherwise (resumed)

            def on_release(n_survivors):
                status.update(participants=n_survivors)
                first = awaiting_initial_states[0]
                awaiting_initial_states[0] = False
                if first or n_survivors < len(devices):
                    say(f"secure aggregation: {n_survivors} of {len(devices)} devices took part"
                        + (" (the initial states)" if first else ""))
                if first and config.uses_action_prior:
                    say("fitting the warm start on the released rule model before round 1 (no device work)")

            fleet = NetworkFleet(devices, hub, args.round_deadline, on_release=on_release,
                                 publish_bundle=service.publish_bundle)
            status.update(phase="starting", devices=len(devices))

            def on_progress(coordinator):
                if status.snapshot()["phase"] != "training":
                    awaiting_initial_states[0] = (coordinator.initial_states is None
                                                  and 0 not in coordinator.releases.journal())
                    # resumed: the journal's releases count from the start, as training will count them
                    coordinator.releases.rebuild_accountant()
                releases = coordinator.releases.journal()
                last = releases[max(releases)] if releases else None
                status.update(phase="training", round=coordinator.round,
                              participants=None if last is None else last.n_survivors,
                              epsilon=coordinator.accountant.epsilon_under(coordinator.releases.factors)
                              if config.private else 0.0)

            service.fix_directory(KeyDirectory(service.coordinator_public, devices))
            if config.privacy.released_cells:     # the run's first release; then everything is on its table
                status.update(phase="releasing the cell table")
                dataset = release_cells(config, dataset, run, fleet, args.seed, signing_key=key)
            code = run_coordinator(config, dataset, run, fleet, seed=args.seed, resume=args.resume,
                                   progress=not args.no_progress, downstream_config=downstream_config,
                                   console_level=console_level, signing_key=key, on_progress=on_progress)
            status.update(phase="finished")
            hub.close()
            time.sleep(LINGER_S)           # for polling devices to learn that the run is over (410)
        finally:
            # stopped by an error: the devices are not told the run is over — they keep retrying, for a --resume
            service.stop()
    return code


def _operator_token(path: Path) -> str:
    """The operator's bearer token, made once (mode 0600) in ``path``."""
    import secrets

    from pategail.sdk.files import write_atomic
    if path.is_file():
        return path.read_text(encoding="ascii").strip()
    token = secrets.token_urlsafe(24)
    write_atomic(path, (token + "\n").encode("ascii"), 0o600)
    return token


def run_devices(args) -> int:
    """`pategail devices`: the service's list, or the roster's when the service does not answer."""
    import datetime
    import hashlib
    import json
    import urllib.error
    import urllib.request

    url_file, token_file = args.run / "service.url", args.run / OPERATOR_TOKEN_FILE
    if not url_file.is_file():
        raise PategailError(f"{args.run}: not a served run (no service.url)")
    url = url_file.read_text().strip()
    rows, source = None, url
    if token_file.is_file():
        context = ssl.create_default_context(cafile=str(args.cafile)) if url.startswith("https") else None
        request = urllib.request.Request(url + "/devices", headers={
            "Authorization": f"Bearer {token_file.read_text().strip()}"})
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as r:
                answer = json.loads(r.read())
            rows = answer["devices"]
        except urllib.error.HTTPError as err:
            raise PategailError(f"{url}/devices: {err.code} {err.read()[:200].decode('utf-8', 'replace')}") \
                from None
        except (OSError, ValueError):
            rows = None
    if rows is None:
        from pategail.server.net.roster import Roster
        roster = Roster(args.run)
        source = f"{args.run / 'roster.json'} (the service does not answer: no activity figures)"
        rows = [{"id": d, "key_fingerprint": hashlib.sha256(k.signing).hexdigest()[:16], "last_seen": None,
                 "orders_answered": None, "dropouts": None} for d, k in sorted(roster.devices.items())]
    if args.json:
        print(json.dumps({"devices": rows}, indent=1))
        return 0
    print(f"{len(rows)} devices, from {source}")
    print(f"{'id':>6}  {'key':16}  {'last seen':>19}  {'answered':>8}  {'dropouts':>8}")
    for row in rows:
        seen = "-" if row["last_seen"] is None else (
            datetime.datetime.fromtimestamp(row["last_seen"], datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"))
        answered = "-" if row["orders_answered"] is None else row["orders_answered"]
        dropouts = "-" if row["dropouts"] is None else row["dropouts"]
        print(f"{row['id']:>6}  {row['key_fingerprint']:16}  {seen:>19}  {answered:>8}  {dropouts:>8}")
    return 0
