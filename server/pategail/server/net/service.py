"""The coordinator's HTTP service (aiohttp): what devices reach, on an event loop of its own thread.

Routes (bodies are the binary frames of :mod:`pategail.sdk.net.frames`, :mod:`pategail.sdk.messages` and
:mod:`pategail.sdk.secagg.messages`):

- ``POST /v1/enrol``        an Enrolment (its token, if any, in ``X-Pategail-Enrol-Token``) → the
                            coordinator-signed Enrolled (403 for a device the admission rule refuses, and once
                            the run's devices are fixed, for keys it does not know);
- ``GET  /v1/coordinator``  the coordinator's Ed25519 public key (32 bytes; what a device checks its pin against);
- ``GET  /v1/bundle/NAME``  the run's bundle, file by file (public; the device checks the hashes): the initial
                            one, or the one published since (:meth:`Service.publish_bundle`: the bundle on a
                            privately released cell table);
- ``GET  /v1/directory``    the signed public-key directory (503 until training starts);
- ``GET  /v1/poll``         the device's next signed order (200), nothing for now (204) or the run is over (410);
- ``POST /v1/reply``        the device's reply to order ``X-Pategail-Seq`` (204; 409 for an order not awaiting one;
                            a liveness order's reply is a Pong signed by the device);
- ``GET  /status``          the run's phase, round, devices, last release's participants and ε spent (JSON);
- ``GET  /devices``         the enrolled devices: id, key fingerprint, last seen, orders answered and missed
                            (JSON; the operator's token as ``Authorization: Bearer``);
- ``GET  /metrics``         the service's figures in the Prometheus text format (the operator's token too).

Every ``/v1`` request but enrolment and the bundle is signed by the device (:mod:`pategail.sdk.net.auth`):
unknown device, bad signature, stale or replayed nonce → 401. Bodies over ``max_body`` → 413; more than
``rate`` requests a second from one device (bursts of ``burst``) → 429; a body that is not a frame → 400. A
refused request changes nothing.

Before any of that, per remote address (:mod:`~pategail.server.net.limits`): a connection must send a
request's headers within ``idle_timeout_s`` of opening or of its previous response, and a body within
``body_timeout_s`` (408), so a connection that stalls — slowloris — is cut; an address holds at most
``max_connections_per_address`` connections, and one whose requests were refused more than its budget is
answered 429 at once. Refusals are logged at most 20 lines a minute; the statistics keep bounded samples.
"""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from pategail.sdk.messages import MAGIC as DEVICE_MAGIC, Ack, ErrorReply, MessageError, from_bytes
from pategail.sdk.net import auth
from pategail.sdk.net.frames import MAGIC as NET_MAGIC, Enrolled, Enrolment, Pong, directory_to_bytes
from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.errors import MessageRejected
from pategail.sdk.secagg.wire import MAGIC as SECAGG_MAGIC

from .admission import HEADER_TOKEN
from .hub import Hub
from .limits import AddressGuard, LogLimiter, TokenBucket
from .roster import EnrolmentRefused, Roster
from .status import RunStatus, Traffic

log = logging.getLogger(__name__)
WAITED_S = web.RequestKey("waited_s", float)
"""Seconds a request spent waiting for work (a long poll): not counted as latency."""
HEADER_SEQ = "X-Pategail-Seq"


@dataclass(frozen=True)
class ServiceLimits:
    """What one device may send."""

    max_body: int = 16 << 20
    """Bytes of one request body (a masked upload of M queries is 16·M + ~100 bytes)."""
    rate: float = 20.0
    """Requests a second per device, sustained."""
    burst: int = 40
    """Requests one device may make at once."""
    poll_wait_s: float = 20.0
    """How long a poll waits for an order before answering 204."""
    idle_timeout_s: float = 60.0
    """Seconds a connection may go without sending a request's headers (after opening, or after its last
    response) before it is closed: an idle or stalled connection costs a descriptor."""
    body_timeout_s: float = 30.0
    """Seconds a request's body may take to arrive (408 then): a masked upload is ~64 KB at M = 4096."""
    max_connections_per_address: int = 256
    """Connections one remote address may hold open (a device holds one; many phones may share a NAT)."""
    refusal_rate: float = 2.0
    """Refused requests an address may make a second, sustained, before it is answered 429 at once."""
    refusal_burst: int = 100
    """Refused requests an address may make at once."""
    stop_grace_s: float = 1.0
    """Seconds the requests in flight when the service stops get to finish before their connections are closed:
    a long poll would otherwise hold a device (and the stopping thread) for up to ``poll_wait_s``."""


def _header_bytes(headers) -> int:
    return sum(len(k) + len(v) + 4 for k, v in headers.items())


class Service:
    """The HTTP service of one run: ``roster`` (enrolment), ``hub`` (orders and replies), the coordinator's
    ``signing_key``, the initial ``bundle_dir`` and the ``status`` board."""

    bundle_sha256: str
    """SHA-256 of the bundle the service serves (and names in every Enrolled)."""

    def __init__(self, roster: Roster, hub: Hub, signing_key, bundle_dir: Path, status: RunStatus,
                 limits: ServiceLimits = ServiceLimits(), operator_token: str | None = None):
        self.roster, self.hub, self.status, self.limits = roster, hub, status, limits
        self._operator_token = operator_token
        self._signing_key = signing_key
        self._sign = signing_key.sign
        self.coordinator_public = crypto.public_bytes(signing_key)
        self.publish_bundle(bundle_dir)
        self._nonces: dict[int, int] = {}
        self._buckets: dict[int, TokenBucket] = {}
        self._directory: bytes | None = None
        self.rejected = 0
        self.guard = AddressGuard(limits.max_connections_per_address, limits.refusal_rate, limits.refusal_burst)
        self._refusal_log = LogLimiter(log)
        self.traffic = Traffic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def publish_bundle(self, bundle_dir: Path) -> str:
        """Serve the bundle at ``bundle_dir`` from now on (checked first) and name it in every Enrolled; returns
        its SHA-256. Requests in flight get the old bundle's files or the new one's, never a mix of names."""
        from pategail.sdk.bundle import load_bundle
        bundle = load_bundle(bundle_dir)
        self._bundle = (Path(bundle_dir), frozenset({"manifest.json", *bundle.manifest["files"]}))
        self.bundle_sha256 = bundle.sha256
        return bundle.sha256

    @property
    def bundle_dir(self) -> Path:
        """The directory of the bundle the service serves."""
        return self._bundle[0]

    # -- the application -----------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.limits.max_body,
                              middlewares=[self._measure, self._count_refusals, self._address_budget])
        app.add_routes([web.post("/v1/enrol", self.enrol), web.get("/v1/bundle/{name}", self.bundle_file),
                        web.get("/v1/coordinator", self.coordinator),
                        web.get("/v1/directory", self.directory), web.get("/v1/poll", self.poll),
                        web.post("/v1/reply", self.reply), web.get("/status", self.get_status),
                        web.get("/devices", self.get_devices), web.get("/metrics", self.get_metrics)])
        return app

    @web.middleware
    async def _measure(self, request, handler):
        t0 = time.perf_counter()
        request[WAITED_S] = 0.0
        status, out = 500, 0
        try:
            response = await handler(request)
            status = response.status
            out = (response.content_length or 0) + _header_bytes(response.headers)
            return response
        except web.HTTPException as err:
            status = err.status
            out = len(err.text or "") + _header_bytes(err.headers)
            raise
        finally:
            line_in = len(request.method) + len(request.path_qs) + 11
            body_in = request.content_length or 0
            seconds = time.perf_counter() - t0 - request[WAITED_S]
            self.traffic.record(request.path if status < 400 or status == 410 else "refused",
                                line_in + _header_bytes(request.headers) + body_in, out + 17, seconds)

    @web.middleware
    async def _count_refusals(self, request, handler):
        try:
            response = await handler(request)
        except web.HTTPException as err:
            if 400 <= err.status < 500 and err.status != 410:       # 410: the run is over, not a refusal
                self.rejected += 1
                self.guard.refused(request.remote or "")
                self._refusal_log.info("%s %s from %s refused: %d %s", request.method, request.path[:80],
                                       request.remote, err.status, (err.text or "")[:120])
            raise
        return response

    @web.middleware
    async def _address_budget(self, request, handler):
        if self.guard.blocked(request.remote or ""):
            raise web.HTTPTooManyRequests(text="too many refused requests from this address",
                                          headers={"Retry-After": "5"})
        return await handler(request)

    async def _read_body(self, request: web.Request) -> bytes:
        """The request's body, or 408 when it does not arrive within ``body_timeout_s`` (413 over max_body)."""
        try:
            # a timeout scope, not wait_for: a body already received is read without a trip through the loop
            async with asyncio.timeout(self.limits.body_timeout_s):
                return await request.read()
        except ConnectionResetError:      # the client left mid-body: a refusal, not a server error (no traceback)
            raise web.HTTPBadRequest(text="the connection closed before the body arrived") from None
        except asyncio.TimeoutError:
            raise web.HTTPRequestTimeout(text=f"the body did not arrive within {self.limits.body_timeout_s:g} s",
                                         headers={"Connection": "close"}) from None

    def _guard_connections(self, server) -> None:
        """Count every connection of aiohttp's ``server`` by remote address; close one over the limit at once."""
        made, lost, peers = server.connection_made, server.connection_lost, {}

        def connection_made(handler, transport):
            made(handler, transport)
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if peer else ""
            peers[handler] = address
            if not self.guard.open(address):
                self._refusal_log.info("connection from %s refused: %d open already", address,
                                       self.limits.max_connections_per_address)
                transport.close()

        def connection_lost(handler, exc=None):
            address = peers.pop(handler, None)
            if address is not None:
                self.guard.close(address)
            lost(handler, exc)

        server.connection_made, server.connection_lost = connection_made, connection_lost

    async def _authenticated(self, request: web.Request) -> tuple[int, bytes]:
        """(device id, body) of a signed request; 401 / 413 / 429 otherwise. Nothing is changed before the
        signature checked out except the nonce high-water mark, which only a valid signature moves."""
        try:
            device_id = int(request.headers[auth.HEADER_DEVICE])
            nonce = int(request.headers[auth.HEADER_NONCE])
            signature = bytes.fromhex(request.headers[auth.HEADER_SIGNATURE])
        except (KeyError, ValueError):
            raise web.HTTPUnauthorized(text="unsigned request") from None
        keys = self.roster.keys(device_id)
        if keys is None:
            raise web.HTTPUnauthorized(text="unknown device")
        body = await self._read_body(request)              # over max_body: 413 from aiohttp
        if abs(nonce / 1e9 - time.time()) > auth.FRESHNESS_S:
            raise web.HTTPUnauthorized(text="stale nonce (is the device's clock right?)")
        if nonce <= self._nonces.get(device_id, 0):
            raise web.HTTPUnauthorized(text="replayed request")
        signed = auth.signed_bytes(request.method, request.path, device_id, nonce, body)
        if not crypto.verify(keys.signing, signature, signed):
            raise web.HTTPUnauthorized(text="bad signature")
        self._nonces[device_id] = nonce
        self.roster.heard_from(device_id)
        bucket = self._buckets.setdefault(device_id, TokenBucket(self.limits.rate, self.limits.burst))
        if not bucket.take():
            raise web.HTTPTooManyRequests(text="too many requests")
        return device_id, body

    async def enrol(self, request: web.Request) -> web.Response:
        try:
            enrolment = Enrolment.from_bytes(await self._read_body(request))
        except MessageRejected as err:
            raise web.HTTPBadRequest(text=f"not an enrolment: {err}") from None
        try:
            # the roster writes and syncs roster.json: off the event loop, so that polls and replies go on
            device_id = await asyncio.get_running_loop().run_in_executor(
                None, self.roster.enrol, enrolment, request.headers.get(HEADER_TOKEN))
        except EnrolmentRefused as err:
            raise web.HTTPForbidden(text=str(err)) from None
        self.status.update(devices_enrolled=len(self.roster))
        reply = Enrolled(device_id, self.coordinator_public, self.bundle_sha256).to_bytes(self._sign)
        return web.Response(body=reply, content_type="application/octet-stream")

    async def coordinator(self, request: web.Request) -> web.Response:
        return web.Response(body=self.coordinator_public, content_type="application/octet-stream")

    async def bundle_file(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        root, files = self._bundle
        if name not in files:
            raise web.HTTPNotFound(text="no such bundle file")
        return web.FileResponse(root / name)

    async def directory(self, request: web.Request) -> web.Response:
        await self._authenticated(request)
        if self._directory is None:
            raise web.HTTPServiceUnavailable(text="enrolment is open: the directory is fixed when training starts",
                                             headers={"Retry-After": "2"})
        return web.Response(body=self._directory, content_type="application/octet-stream")

    def fix_directory(self, directory) -> None:
        """The run's public-key directory, signed once (training starts)."""
        self._directory = directory_to_bytes(directory, self._sign)

    async def poll(self, request: web.Request) -> web.Response:
        device_id, _ = await self._authenticated(request)
        if self.status.finished:
            raise web.HTTPGone(text="the run is over")
        try:
            wait = min(float(request.query.get("wait", self.limits.poll_wait_s)), self.limits.poll_wait_s)
        except ValueError:
            raise web.HTTPBadRequest(text="wait: not a number") from None
        t0 = time.perf_counter()
        order = await self.hub.next_order(device_id, max(0.0, wait))
        request[WAITED_S] = time.perf_counter() - t0          # waiting for work is not latency
        if order is None:
            if self.status.finished:
                raise web.HTTPGone(text="the run is over")
            return web.Response(status=204)
        return web.Response(body=order, content_type="application/octet-stream")

    async def reply(self, request: web.Request) -> web.Response:
        device_id, body = await self._authenticated(request)
        try:
            seq = int(request.headers[HEADER_SEQ])
        except (KeyError, ValueError):
            raise web.HTTPBadRequest(text=f"no {HEADER_SEQ} header") from None
        keys = self.roster.keys(device_id)
        assert keys is not None                             # _authenticated: an enrolled device
        _check_reply(body, keys.signing, device_id, seq)
        if not self.hub.reply(device_id, seq, body):
            raise web.HTTPConflict(text="no order awaits this reply (answered already, or past its deadline)")
        return web.Response(status=204)

    async def get_status(self, request: web.Request) -> web.Response:
        status = self.status.snapshot()
        status.update(devices_enrolled=len(self.roster), orders_waiting=self.hub.waiting(),
                      requests_refused=self.rejected, traffic=self.traffic.summary())
        return web.Response(text=json.dumps(status), content_type="application/json")

    def _operator(self, request: web.Request) -> None:
        """401 unless the request carries the operator's token (no token set: the operator's routes are open)."""
        import hmac
        if self._operator_token is None:
            return
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self._operator_token}".encode()):
            raise web.HTTPUnauthorized(text="the operator's routes need Authorization: Bearer <RUN/operator.token>",
                                       headers={"WWW-Authenticate": "Bearer"})

    def devices(self) -> list[dict]:
        """The enrolled devices as the operator sees them."""
        import hashlib
        rows = []
        for device_id in sorted(self.roster.devices):
            keys = self.roster.keys(device_id)
            if keys is None:
                continue
            activity = self.hub.activity_of(device_id)
            seen = self.roster.last_seen.get(device_id)
            rows.append({"id": device_id, "key_fingerprint": hashlib.sha256(keys.signing).hexdigest()[:16],
                         "last_seen": None if seen is None else round(seen, 3),
                         "orders_answered": activity.answered, "dropouts": activity.missed})
        return rows

    async def get_devices(self, request: web.Request) -> web.Response:
        self._operator(request)
        return web.Response(text=json.dumps({"devices": self.devices(), "now": round(time.time(), 3)}),
                            content_type="application/json")

    async def get_metrics(self, request: web.Request) -> web.Response:
        from .metrics import CONTENT_TYPE, exposition, service_metrics
        self._operator(request)
        status = self.status.snapshot()
        status.setdefault("devices_enrolled", len(self.roster))
        text = exposition(service_metrics(status, self.traffic, dict(self.hub.activity),
                                          sum(self.guard.connections.values()), self.guard.connections_refused,
                                          self.rejected))
        return web.Response(body=text.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})

    # -- running it ----------------------------------------------------------------------------------------
    def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None,
              sock: socket.socket | None = None) -> int:
        """Serve on (host, port) — or on ``sock``, bound already (:func:`listening_socket`) — from a thread of
        its own; returns the bound port (``port`` 0: the OS picks)."""
        ready = threading.Event()
        bound: list = []

        def serve():
            loop = self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            # lingering: how long an unread body is drained after the response (aiohttp's default, 10 s, would
            # hold a slow body's connection that long past its 408)
            self._runner = web.AppRunner(self.app(), access_log=None, keepalive_timeout=self.limits.idle_timeout_s,
                                         lingering_time=min(2.0, self.limits.body_timeout_s),
                                         shutdown_timeout=self.limits.stop_grace_s)
            try:
                loop.run_until_complete(self._runner.setup())
                self._guard_connections(self._runner.server)
                if sock is not None:
                    site = web.SockSite(self._runner, sock, ssl_context=ssl_context, backlog=1024)
                else:
                    site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context, backlog=1024)
                loop.run_until_complete(site.start())
                bound.append(site._server.sockets[0].getsockname()[1])
            except BaseException as err:                       # noqa: BLE001 — reported to the caller
                bound.append(err)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            # the handlers cut after the grace are being cancelled: let them finish before the loop closes
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=serve, name="pategail-service", daemon=True)
        self._thread.start()
        ready.wait()
        if isinstance(bound[0], BaseException):
            raise bound[0]
        return bound[0]

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)


def _check_reply(body: bytes, device_signing: bytes, device_id: int, seq: int) -> None:
    """400 unless ``body`` is empty (the device gave up), a device-protocol reply, a secure-aggregation
    frame (the aggregator checks the rest) or the device's Pong to order ``seq``."""
    if not body:
        return
    if body[:4] == NET_MAGIC:
        try:
            pong = Pong.from_bytes(body, device_signing)
        except MessageRejected as err:
            raise web.HTTPBadRequest(text=f"not a pong: {err}") from None
        if (pong.device_id, pong.seq) != (device_id, seq):
            raise web.HTTPBadRequest(text="a pong to another order")
        return
    if body[:4] == DEVICE_MAGIC:
        try:
            from_bytes(body, expect=(Ack, ErrorReply))
        except MessageError as err:
            raise web.HTTPBadRequest(text=f"not a device reply: {err}") from None
    elif body[:4] != SECAGG_MAGIC:
        raise web.HTTPBadRequest(text="not a device reply nor a secure-aggregation frame")
