"""A device taking part in a served run over HTTP(S): enrol, install the run's bundle, then poll for signed
orders and answer them — the network loop a phone app runs (it accepts no inbound connection).

Everything the device sends is a frame of the protocol: its enrolment (public keys), its replies to
device-protocol requests (``Ack``/``ErrorReply``) and its secure-aggregation frames; never a day. Every
request is signed with the device's key (:mod:`pategail.sdk.net.auth`); every order is checked — signed by the
pinned coordinator key, addressed to this device, its sequence number above the last one seen — before it
touches the device. A failed or refused connection is retried with exponential backoff and full jitter; a
device restarted on the same store resumes: same identity and id, same bundle, discriminator and ledger.

Everything local — the service's address, the CA file, the store, the owner's days — is checked before the
device makes its identity or enrols, so a mistake costs the run no seat. A malformed order is answered with
an empty reply (the device takes no part in that step) and the device keeps polling.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pategail.sdk.device import Device
from pategail.sdk.errors import SdkError
from pategail.sdk.files import write_atomic
from pategail.sdk.identity import IDENTITY_FILE, load_or_create_identity
from pategail.sdk.messages import peek_round
from pategail.sdk.net import auth
from pategail.sdk.net.frames import (ANY_ID, WORK_BUNDLE, WORK_PING, WORK_REQUEST, Enrolled, Enrolment, Order,
                                     Pong, directory_from_bytes)
from pategail.sdk.secagg.config import DevicePublicKeys, KeyDirectory
from pategail.sdk.secagg.crypto import DeviceIdentity
from pategail.sdk.secagg.errors import MessageRejected
from pategail.sdk.store import TrajectoryStore

from .connection import ServiceError, Connection, TransientFailure, check_server_url, check_store, tls_context

log = logging.getLogger(__name__)
STATE_FILE = "network.json"
"""The device's network state in its store: server, id, pinned coordinator key, last order seen."""
HEADER_SEQ = "X-Pategail-Seq"
HEADER_TOKEN = "X-Pategail-Enrol-Token"
_TRANSIENT = {408, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: the k-th wait is uniform in [0, min(cap_s, first_s · 2^k)];
    a request is given up after ``give_up_s`` without an answer."""

    first_s: float = 0.5
    cap_s: float = 30.0
    give_up_s: float = 900.0


class _Stopped(Exception):
    """``DeviceClient.run``'s stop event was set while a request was waiting to be retried."""


class DeviceClient:
    """One device of a served run, its store in ``store``.

    ``days``: called once if the store holds no days yet (returns int (n, 48) cell ids). ``requested_id``:
    the id to enrol as (``ANY_ID``: any). ``seed``: the device's minibatch draws per round come from
    (seed, id, round), so a device answering a round twice draws the same. ``coordinator_key``: pin this key
    instead of trusting the first one seen. ``cafile``: the CA bundle to verify an https service with.
    ``token``: the enrolment token the operator gave this device. ``rng``: the retry jitter.

    The address, the CA file and the store are checked here, before anything is written; the device's
    identity is made at its first enrolment, after its days were found (:meth:`prepare`).
    """

    def __init__(self, server: str, store: str | Path, *, days: Callable[[], np.ndarray] | None = None,
                 requested_id: int = ANY_ID, seed: int = 0, coordinator_key: bytes | None = None,
                 cafile: str | None = None, token: str | None = None, retry: RetryPolicy = RetryPolicy(),
                 poll_wait_s: float = 20.0, rng: np.random.Generator | None = None):
        self.server = server.rstrip("/")
        https, _, _ = check_server_url(self.server)
        context = tls_context(cafile, https)
        self.store = Path(store)
        check_store(self.store)
        self.days, self.requested_id, self.seed, self.token = days, requested_id, seed, token
        self.retry, self.poll_wait_s = retry, poll_wait_s
        self.rng = rng if rng is not None else np.random.default_rng()
        self._identity: DeviceIdentity | None = None
        self.state = self._load_state()
        if coordinator_key is not None:
            pinned = self.state.get("coordinator")
            if pinned is not None and bytes.fromhex(pinned) != coordinator_key:
                raise ServiceError(f"{self.store}: this device belongs to the run of coordinator key "
                                   f"{pinned[:16]}…, not {coordinator_key.hex()[:16]}…: give it a new --store to "
                                   "join this run")
            self.state["coordinator"] = coordinator_key.hex()
        self._http = Connection(self.server, context, timeout_s=poll_wait_s + 30.0)
        self._nonces = auth.NonceClock()
        self._stop = threading.Event()              # run()'s stop event: ends retries too
        self._directory: KeyDirectory | None = None
        self.device: Device | None = None
        self.device_id: int | None = None
        self.orders_handled = 0

    # -- state ---------------------------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        path = self.store / STATE_FILE
        if not path.is_file():
            return {}
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(state, dict):
                raise ValueError("not an object")
            return state
        except ValueError as err:
            raise ServiceError(f"{path}: unreadable network state ({err}); delete it to enrol again") from None

    def _save_state(self) -> None:
        write_atomic(self.store / STATE_FILE, json.dumps(self.state).encode("utf-8"))

    @property
    def identity(self) -> DeviceIdentity:
        """The device's long-term keys, made (and kept in the store) at first use."""
        if self._identity is None:
            self._identity = load_or_create_identity(self.store / IDENTITY_FILE)
        return self._identity

    @property
    def coordinator(self) -> bytes | None:
        pinned = self.state.get("coordinator")
        return None if pinned is None else bytes.fromhex(pinned)

    # -- HTTP ----------------------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: bytes = b"", *, signed: bool = True,
              headers: dict[str, str] | None = None,
              query: str = "", ok: tuple[int, ...] = (200, 204)) -> tuple[int, bytes]:
        """One request, retried with backoff and jitter while the service is unreachable or busy; returns
        (status, body) for a status in ``ok`` or 409/410, raises ServiceError for any other."""
        first_failure, attempt = None, 0
        while True:
            h = dict(headers or {})
            if signed:
                assert self.device_id is not None                 # signed requests come after enrolment
                h.update(auth.request_headers(self.identity.sign, method, path, self.device_id,
                                              self._nonces.next(), body))
            try:
                status, data = self._http.request(method, path + query, body, h)
                if status in ok or status in (409, 410):
                    return status, data
                if status not in _TRANSIENT:
                    text = data[:200].decode("utf-8", "replace")
                    raise ServiceError(f"{self.server}{path}: the service refused the request ({status}: {text})")
                reason = f"HTTP {status}"
            except TransientFailure as err:
                reason = str(err)
            now = time.monotonic()
            first_failure = first_failure or now
            if now - first_failure > self.retry.give_up_s:
                raise ServiceError(f"{self.server}: no answer for {self.retry.give_up_s:g} s ({reason})")
            wait = float(self.rng.uniform(0, min(self.retry.cap_s, self.retry.first_s * 2 ** attempt)))
            attempt += 1
            log.info("device %s: %s %s failed (%s); retrying in %.1f s", self.device_id, method, path, reason, wait)
            if self._stop.wait(wait):                # asked to stop: no more retries
                raise _Stopped()

    # -- set-up --------------------------------------------------------------------------------------------
    def enrol(self) -> Enrolled:
        """Enrol (again: the service knows the keys and gives the same id back) and pin the coordinator."""
        if self.coordinator is not None:
            self._check_coordinator()
        keys = DevicePublicKeys(self.identity.signing_public, self.identity.envelope_public)
        requested = self.state.get("device_id", self.requested_id)
        _, body = self._call("POST", "/v1/enrol", Enrolment(keys, requested).to_bytes(self.identity.sign),
                             signed=False, ok=(200,), headers={HEADER_TOKEN: self.token} if self.token else None)
        try:
            enrolled = Enrolled.from_bytes(body, self.coordinator)
        except MessageRejected as err:
            raise ServiceError(f"{self.server}: refused the service's enrolment answer ({err})") from None
        if "device_id" in self.state and self.state["device_id"] != enrolled.device_id:
            raise ServiceError(f"{self.server} gave id {enrolled.device_id}, this device is {self.state['device_id']}")
        self.device_id = enrolled.device_id
        self.state.update(server=self.server, device_id=enrolled.device_id, coordinator=enrolled.coordinator.hex())
        self._save_state()
        return enrolled

    def _check_coordinator(self) -> None:
        """A store pinned to a coordinator: the service must be that one (a store reused from another run
        gets told so, before it enrols)."""
        assert self.coordinator is not None                       # called for a pinned store only
        status, body = self._call("GET", "/v1/coordinator", signed=False, ok=(200, 404))
        if status == 200 and len(body) == 32 and body != self.coordinator:
            raise ServiceError(f"{self.store} belongs to another run (coordinator key {self.coordinator.hex()[:16]}…"
                               f", this service's is {body.hex()[:16]}…): give the device a new --store to join "
                               "this run, or point it at its own run's service")

    def prepare(self) -> Device:
        """Give the store its days (first start; checked before anything else is written), enrol, open the
        device and install the run's bundle."""
        store = TrajectoryStore(self.store)
        if len(store) == 0:
            days = None if self.days is None else self.days()
            if days is None or not len(days):
                raise ServiceError(f"{self.store}: the device holds no days; give it its days (--days or "
                                   "--data/--user)")
            store.add_days(days)
        enrolled = self.enrol()
        device = self.device = Device(self.store, enrolled.device_id, rng=np.random.default_rng(
            [self.seed, enrolled.device_id, 0]))
        if device.bundle is None or device.bundle.sha256 != enrolled.bundle_sha256:
            self._install_bundle(device, enrolled.bundle_sha256)
        log.info("device %d ready: %d days, bundle %s", device.device_id, len(device.store.days()),
                 enrolled.bundle_sha256[:12])
        return device

    def _install_bundle(self, device: Device, sha256: str) -> None:
        download = self.store / ".bundle-download"
        download.mkdir(exist_ok=True)
        _, manifest = self._call("GET", "/v1/bundle/manifest.json", signed=False, ok=(200,))
        try:
            names = sorted(json.loads(manifest)["files"])
        except (ValueError, KeyError, TypeError):
            raise ServiceError(f"{self.server}: the bundle's manifest is unreadable") from None
        for name in names:
            if "/" in name or name.startswith("."):
                raise ServiceError(f"{self.server}: bundle file name {name!r} refused")
            _, data = self._call("GET", f"/v1/bundle/{name}", signed=False, ok=(200,))
            write_atomic(download / name, data)
        write_atomic(download / "manifest.json", manifest)
        device.install_bundle(download, expected_sha256=sha256)     # hashes checked: BundleError otherwise

    def _key_directory(self) -> KeyDirectory:
        if self._directory is None:
            _, body = self._call("GET", "/v1/directory", ok=(200,))
            assert self.coordinator is not None                   # pinned at enrolment
            try:
                self._directory = directory_from_bytes(body, self.coordinator)
            except MessageRejected as err:
                raise ServiceError(f"{self.server}: refused the key directory ({err})") from None
        return self._directory

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> None:
        """Prepare, then poll and answer orders until the run is over (the service answers 410) or ``stop``
        is set."""
        if self.device is None:
            self.prepare()
        self._stop = stop if stop is not None else threading.Event()
        try:
            while not self._stop.is_set():
                status, body = self._call("GET", "/v1/poll", query=f"?wait={self.poll_wait_s:g}")
                if status == 410:
                    log.info("device %d: the run is over (%d orders answered)", self.device_id, self.orders_handled)
                    return
                if status == 200:
                    self._answer(body)
        except _Stopped:
            log.info("device %d: stopped while waiting for the service", self.device_id)
        finally:
            self._http.close()

    def _carry_out(self, order: Order) -> bytes:
        assert self.device is not None and self.device_id is not None     # orders come after prepare()
        if order.work == WORK_PING:
            return Pong(self.device_id, order.seq).to_bytes(self.identity.sign)
        if order.work == WORK_BUNDLE:     # the run's bundle changed (a released cell table): take it
            if len(order.parts) != 1 or not re.fullmatch(rb"[0-9a-f]{64}", order.parts[0]):
                raise MessageRejected("a bundle order carries one SHA-256 in hex")
            sha256 = order.parts[0].decode("ascii")
            if self.device.bundle is None or self.device.bundle.sha256 != sha256:
                self._install_bundle(self.device, sha256)
            log.info("device %d: bundle %s installed", self.device_id, sha256[:12])
            return Pong(self.device_id, order.seq).to_bytes(self.identity.sign)     # signed: done
        if order.work == WORK_REQUEST:
            if len(order.parts) != 1:
                raise MessageRejected(f"a request order carries one message, not {len(order.parts)}")
            (message,) = order.parts
            self.device.rng = np.random.default_rng([self.seed, self.device_id, max(peek_round(message), 0)])
            return self.device.handle(message)
        return self.device.secagg_step(self._key_directory(), order.work, *order.parts)

    def _answer(self, data: bytes) -> None:
        assert self.coordinator is not None and self.device_id is not None    # orders come after prepare()
        try:
            order = Order.from_bytes(data, self.coordinator, self.device_id)
        except MessageRejected as err:
            log.warning("device %d: an order refused (%s)", self.device_id, err)
            return
        if order.seq <= self.state.get("last_seq", 0):
            log.warning("device %d: a replayed order refused (seq %d)", self.device_id, order.seq)
            return
        self.state["last_seq"] = order.seq
        self._save_state()
        try:
            reply = self._carry_out(order)
        except (SdkError, ValueError, TypeError) as err:     # the device stops this step: an empty reply says so
            log.info("device %d: %s order refused (%s: %s)", self.device_id, order.work, type(err).__name__, err)
            reply = b""
        status, _ = self._call("POST", "/v1/reply", reply, headers={HEADER_SEQ: str(order.seq)})
        if status == 409:
            log.info("device %d: the reply to %s came too late", self.device_id, order.work)
        self.orders_handled += 1
