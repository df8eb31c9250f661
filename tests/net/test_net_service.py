"""The service under hostile and broken requests: each is refused with its 4xx, and the service's state — the
enrolled devices, the waiting orders, the nonce a device must exceed — is exactly as before; then a device
fetches an order, answers it, and a late answer is refused."""
from __future__ import annotations

import http.client
import json
import threading

import pytest

from pategail.sdk.messages import Ack, from_bytes
from pategail.sdk.net import auth
from pategail.sdk.net.frames import ANY_ID, Enrolled, Enrolment, Order
from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.sdk.secagg.crypto import DeviceIdentity

from .conftest import TINY


def _start_service(run, dataset, limits):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.server.config import TrainConfig
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service
    from pategail.training import ensure_initial_bundle

    config = TrainConfig.from_dict({**TINY, "rounds": 1}, where="test")
    bundle = ensure_initial_bundle(config, dataset, 0, run)
    key = Ed25519PrivateKey.generate()
    service = Service(Roster(run), Hub(key.sign), key, bundle, RunStatus(), limits)
    return service, service.start("127.0.0.1", 0)


@pytest.fixture(scope="module")
def service(tmp_path_factory, dataset):
    from pategail.server.net.service import ServiceLimits

    service, port = _start_service(tmp_path_factory.mktemp("service-run"), dataset,
                                   ServiceLimits(max_body=64 << 10, rate=50.0, burst=100, poll_wait_s=1.0))
    yield service, port
    service.stop()


class Client:
    def __init__(self, port: int, identity: DeviceIdentity | None = None):
        self.port = port
        self.identity = identity or DeviceIdentity.generate()
        self.device_id = None
        self.nonces = auth.NonceClock()

    def raw(self, method, path, body=b"", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def signed_headers(self, method, path, body=b"", nonce=None):
        return auth.request_headers(self.identity.sign, method, path, self.device_id,
                                    nonce or self.nonces.next(), body)

    def signed(self, method, path, body=b"", query="", extra=None):
        return self.raw(method, path + query, body, {**self.signed_headers(method, path, body), **(extra or {})})

    def enrol(self, coordinator=None):
        keys = DevicePublicKeys(self.identity.signing_public, self.identity.envelope_public)
        status, body = self.raw("POST", "/v1/enrol", Enrolment(keys, ANY_ID).to_bytes(self.identity.sign))
        assert status == 200, body
        enrolled = Enrolled.from_bytes(body, coordinator)
        self.device_id = enrolled.device_id
        return enrolled


def _state(service):
    svc, _ = service
    return (dict(svc.roster.devices), svc.hub.waiting(), dict(svc._nonces), svc.status.snapshot())


def test_hostile_and_broken_requests_are_refused_and_change_nothing(service):
    svc, port = service
    device = Client(port)
    enrolled = device.enrol()
    assert device.enrol(enrolled.coordinator).device_id == enrolled.device_id      # enrolling again: same id
    assert device.signed("GET", "/v1/poll", query="?wait=0")[0] == 204

    headers = device.signed_headers("GET", "/v1/poll")
    assert device.raw("GET", "/v1/poll?wait=0", headers=headers)[0] == 204
    before = _state(service)
    refused = {
        "replayed": device.raw("GET", "/v1/poll?wait=0", headers=headers),
        "unsigned": device.raw("GET", "/v1/poll?wait=0"),
        "wrong signature": device.raw("GET", "/v1/poll?wait=0", headers={
            **device.signed_headers("GET", "/v1/poll"), auth.HEADER_SIGNATURE: "00" * 64}),
        "signed by another key": device.raw("GET", "/v1/poll?wait=0", headers=auth.request_headers(
            DeviceIdentity.generate().sign, "GET", "/v1/poll", device.device_id, device.nonces.next(), b"")),
        "signed for another path": device.raw("GET", "/v1/directory", headers=device.signed_headers("GET", "/v1/poll")),
        "unknown device": device.raw("GET", "/v1/poll?wait=0", headers={
            **device.signed_headers("GET", "/v1/poll"), auth.HEADER_DEVICE: "4000"}),
        "stale nonce": device.raw("GET", "/v1/poll?wait=0", headers=device.signed_headers(
            "GET", "/v1/poll", nonce=device.nonces.next() - int(2 * auth.FRESHNESS_S * 1e9))),
        "oversized": device.signed("POST", "/v1/reply", b"PGSA" + bytes(70 << 10), extra={"X-Pategail-Seq": "1"}),
        "garbage reply": device.signed("POST", "/v1/reply", b"\x00garbage\xff" * 10, extra={"X-Pategail-Seq": "1"}),
        "truncated device reply": device.signed("POST", "/v1/reply", Ack(1, "round_request", 3).to_bytes()[:-2],
                                                extra={"X-Pategail-Seq": "1"}),
        "reply without seq": device.signed("POST", "/v1/reply", b""),
        "reply to no order": device.signed("POST", "/v1/reply", b"", extra={"X-Pategail-Seq": "12345"}),
        "garbage enrolment": device.raw("POST", "/v1/enrol", b"\x01\x02garbage"),
        "no such bundle file": device.raw("GET", "/v1/bundle/..%2Fcoordinator.key"),
    }
    codes = {k: v[0] for k, v in refused.items()}
    assert codes == {"replayed": 401, "unsigned": 401, "wrong signature": 401, "signed by another key": 401,
                     "signed for another path": 401, "unknown device": 401, "stale nonce": 401, "oversized": 413,
                     "garbage reply": 400, "truncated device reply": 400, "reply without seq": 400,
                     "reply to no order": 409, "garbage enrolment": 400, "no such bundle file": 404}, refused
    after = _state(service)
    # only the nonce high-water mark of the valid (refused-later) requests may move; nothing else did
    assert after[0] == before[0] and after[1] == before[1] and after[3] == before[3]
    assert device.signed("GET", "/v1/poll", query="?wait=0")[0] == 204      # and the service keeps serving
    status = json.loads(device.raw("GET", "/status")[1])
    assert status["devices_enrolled"] == len(before[0]) and status["requests_refused"] >= len(refused)


def test_an_order_goes_out_signed_and_its_answer_comes_back_once(service):
    svc, port = service
    device = Client(port)
    enrolled = device.enrol()
    ack = Ack(3, "round_request", 282).to_bytes()
    result = {}
    exchange = threading.Thread(target=lambda: result.update(
        svc.hub.exchange("request", {device.device_id: (b"the request",)}, deadline_s=20)))
    exchange.start()
    status, body = device.signed("GET", "/v1/poll", query="?wait=10")
    assert status == 200
    order = Order.from_bytes(body, enrolled.coordinator, device.device_id)
    assert (order.work, order.parts) == ("request", (b"the request",))
    assert device.signed("POST", "/v1/reply", ack, extra={"X-Pategail-Seq": str(order.seq)})[0] == 204
    exchange.join(timeout=20)
    assert result == {device.device_id: ack} and isinstance(from_bytes(result[device.device_id]), Ack)
    # answering the same order again: refused, nothing filed
    assert device.signed("POST", "/v1/reply", ack, extra={"X-Pategail-Seq": str(order.seq)})[0] == 409

    # a device that does not answer in time is left out, and its late answer is refused
    late = svc.hub.exchange("request", {device.device_id: (b"second",)}, deadline_s=0.5)
    assert late == {}
    assert device.signed("GET", "/v1/poll", query="?wait=0")[0] == 204      # the withdrawn order is gone


def test_a_device_over_its_request_rate_gets_429(service, tmp_path):
    from pategail.server.net.limits import TokenBucket
    from pategail.server.net.service import Service, ServiceLimits
    bucket = TokenBucket(rate=1.0, burst=3)
    assert [bucket.take() for _ in range(5)] == [True, True, True, False, False]
    svc, _ = service
    slow = Service(svc.roster, svc.hub, _key(svc), svc.bundle_dir, svc.status,
                   ServiceLimits(rate=0.2, burst=5, poll_wait_s=1.0))
    port = slow.start("127.0.0.1", 0)
    try:
        device = Client(port)
        device.enrol()
        codes = [device.signed("GET", "/v1/poll", query="?wait=0")[0] for _ in range(10)]
    finally:
        slow.stop()
    assert codes[:5] == [204] * 5 and codes[-3:] == [429] * 3      # the burst, then refused


def _key(svc):
    return svc._signing_key


def test_only_the_newest_poll_of_a_device_takes_its_orders(service):
    """A device killed while polling and restarted polls again before the service notices the dead
    connection: the order must go to the new poll, not to the old one."""
    import asyncio

    svc, _ = service
    hub = svc.hub

    async def scenario():
        old = asyncio.ensure_future(hub.next_order(777, 5.0))
        await asyncio.sleep(0.05)
        new = asyncio.ensure_future(hub.next_order(777, 5.0))
        await asyncio.sleep(0.05)
        assert old.done() and old.result() is None            # retired at once
        exchange = asyncio.get_running_loop().run_in_executor(
            None, lambda: hub.exchange("request", {777: (b"work",)}, 0.5))
        order = await new
        await exchange
        return order

    order = asyncio.run(scenario())
    assert order is not None and Order.from_bytes(order, svc.coordinator_public, 777).parts == (b"work",)


def test_a_stopping_service_cuts_a_waiting_poll_after_its_grace(tmp_path, dataset):
    """Stopped with a device's long poll in flight (an error stop: no one told the devices the run is over),
    the service closes that connection after ``stop_grace_s`` instead of holding the device, and itself, for
    the rest of the poll's 20 s."""
    import time

    from pategail.server.net.service import ServiceLimits

    svc, port = _start_service(tmp_path / "run", dataset, ServiceLimits(poll_wait_s=20.0, stop_grace_s=0.5))
    device = Client(port)
    device.enrol()
    ended = {}

    def poll():
        t0 = time.monotonic()
        try:
            ended["answer"] = device.signed("GET", "/v1/poll", query="?wait=20")[0]
        except (ConnectionError, http.client.HTTPException) as err:
            ended["answer"] = type(err).__name__
        ended["after_s"] = time.monotonic() - t0

    waiting = threading.Thread(target=poll)
    waiting.start()
    deadline = time.monotonic() + 10
    while device.device_id not in svc.hub._waiters and time.monotonic() < deadline:      # the poll waits
        time.sleep(0.02)
    t0 = time.monotonic()
    svc.stop()
    stopped_s = time.monotonic() - t0
    waiting.join(timeout=20)
    assert stopped_s < 5 and ended["after_s"] < 6, (stopped_s, ended)
    assert ended["answer"] != 204                        # cut, not answered as an ordinary empty poll
