"""Limits of a service strangers can reach, applied before authentication: a stalled connection — headers
that never end, a body that never arrives (slowloris) — is cut; one address cannot hold more than its
connections nor keep being refused; refusal logs, latency statistics and the run's log stay bounded."""
from __future__ import annotations

import http.client
import logging
import socket
import time

import pytest

from .conftest import TINY


@pytest.fixture
def serve(tmp_path, dataset):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.server.config import TrainConfig
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service
    from pategail.training import ensure_initial_bundle

    bundle = ensure_initial_bundle(TrainConfig.from_dict({**TINY, "rounds": 1}, where="test"), dataset, 0,
                                   tmp_path / "run")
    started = []

    def start(limits):
        key = Ed25519PrivateKey.generate()
        service = Service(Roster(tmp_path / "run"), Hub(key.sign), key, bundle, RunStatus(), limits)
        started.append(service)
        return service, service.start("127.0.0.1", 0)
    yield start
    for service in started:
        service.stop()


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the service sent before closing ``sock``, or None when it is still open after ``seconds``."""
    sock.settimeout(0.1)
    data, end = b"", time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            continue
        except ConnectionError:
            return data
        if not chunk:
            return data
        data += chunk
    return None


def test_stalled_connections_are_cut(serve):
    from pategail.server.net.service import ServiceLimits

    service, port = serve(ServiceLimits(idle_timeout_s=1.0, body_timeout_s=1.0))
    stalls = {"nothing": b"", "headers that never end": b"POST /v1/enrol HTTP/1.1\r\nHost: x\r\n",
              "a body that never arrives": b"POST /v1/enrol HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
                                           b"0123456789"}
    socks = {}
    for what, data in stalls.items():
        for i in range(5):
            s = socks[what, i] = socket.create_connection(("127.0.0.1", port))
            s.sendall(data)
    t0 = time.monotonic()
    try:
        for (what, _), s in socks.items():
            got = _closed_within(s, 6.0)
            assert got is not None, f"{what}: still open after {time.monotonic() - t0:.1f} s"
            if what == "a body that never arrives":
                assert got.startswith(b"HTTP/1.1 408"), got
        assert time.monotonic() - t0 < 6.0
    finally:
        for s in socks.values():
            s.close()
    # and the service still serves
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/status")
    assert conn.getresponse().status == 200


def test_one_address_holds_at_most_its_connections(serve):
    from pategail.server.net.service import ServiceLimits

    service, port = serve(ServiceLimits(max_connections_per_address=5, idle_timeout_s=30))
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    try:
        time.sleep(0.3)
        closed = [_closed_within(s, 0.5) is not None for s in socks]
        assert closed == [False] * 5 + [True] * 3
        assert service.guard.connections_refused == 3
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)                                       # their slots are given back
    assert service.guard.connections.get("127.0.0.1", 0) == 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/status")
    assert conn.getresponse().status == 200


def test_an_address_refused_too_often_is_answered_429_before_any_work(serve, caplog):
    from pategail.server.net.service import ServiceLimits

    service, port = serve(ServiceLimits(refusal_rate=0.01, refusal_burst=5))

    def post_garbage():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/enrol", b"garbage")
        return conn.getresponse().status

    with caplog.at_level(logging.INFO, logger="pategail.server.net.service"):
        codes = [post_garbage() for _ in range(8)]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/status")
        assert conn.getresponse().status == 429             # even a request that would have been served
    assert codes == [400] * 5 + [429] * 3


def test_refusal_logs_and_statistics_stay_bounded(caplog, tmp_path):
    from pategail.server.net.limits import LogLimiter
    from pategail.server.net.status import Traffic
    from pategail.training import run_log

    logger = logging.getLogger("test.limits")
    limiter = LogLimiter(logger, burst=10, window_s=0.3)
    with caplog.at_level(logging.INFO, logger="test.limits"):
        for i in range(1000):
            limiter.info("refused %d", i)
        time.sleep(0.35)
        limiter.info("refused again")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 12 and lines[10].startswith("990 more refused request(s)") and lines[11] == "refused again"

    traffic = Traffic()
    for i in range(3 * Traffic.KEEP):
        traffic.record("/v1/poll", 100, 100, 1e-3 * (i % 7))
    assert len(traffic.latency_s["/v1/poll"]) == Traffic.KEEP
    assert traffic.summary()["latency_ms"]["/v1/poll"]["n"] == 3 * Traffic.KEEP

    with run_log(tmp_path / "train.log", quiet_terminal=True, max_bytes=2000):
        for i in range(200):
            logging.getLogger("pategail.test").info("line %d of a long log", i)
    sizes = sorted(p.name for p in tmp_path.glob("train.log*"))
    assert sizes == ["train.log", "train.log.1", "train.log.2", "train.log.3", "train.log.4"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.glob("train.log*"))
