"""Admission and liveness: a stranger's keys cannot enrol without a token the operator issued (or a key on the
allow-list), a token enrols one device only, and a device that enrolled but does not answer holds no seat —
enrolment closes with devices that answered the liveness check, never with phantoms."""
from __future__ import annotations

import http.client
import threading

import numpy as np
import pytest

from pategail.sdk.net.frames import ANY_ID, Enrolled, Enrolment, Pong
from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.sdk.secagg.crypto import DeviceIdentity

from .conftest import TINY


def _service(run, dataset, admission, poll_wait_s=0.5):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.server.config import TrainConfig
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service, ServiceLimits
    from pategail.training import ensure_initial_bundle

    bundle = ensure_initial_bundle(TrainConfig.from_dict({**TINY, "rounds": 1}, where="test"), dataset, 0, run)
    key = Ed25519PrivateKey.generate()
    service = Service(Roster(run, admission), Hub(key.sign), key, bundle, RunStatus(),
                      ServiceLimits(poll_wait_s=poll_wait_s))
    return service, service.start("127.0.0.1", 0)


def _enrol(port, identity=None, token=None, requested=ANY_ID):
    identity = identity or DeviceIdentity.generate()
    keys = DevicePublicKeys(identity.signing_public, identity.envelope_public)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"X-Pategail-Enrol-Token": token} if token else {}
        conn.request("POST", "/v1/enrol", Enrolment(keys, requested).to_bytes(identity.sign), headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@pytest.fixture
def tokens(tmp_path):
    from pategail.server.net.admission import issue_tokens
    path = tmp_path / "tokens.txt"
    return path, issue_tokens(path, 3)


def test_squatters_without_a_token_cannot_enrol_and_a_token_enrols_one_device(tmp_path, dataset, tokens):
    from pategail.server.net.admission import Admission

    path, issued = tokens
    assert len(set(issued)) == 3 and oct(path.stat().st_mode & 0o777) == "0o600"
    service, port = _service(tmp_path / "run", dataset, Admission(tokens_file=path))
    try:
        squatters = [_enrol(port) for _ in range(10)] + [_enrol(port, token="guessed") for _ in range(3)]
        assert [s for s, _ in squatters] == [403] * 13
        assert b"needs a token" in squatters[0][1] and b"not a valid enrolment token" in squatters[-1][1]
        assert len(service.roster) == 0

        phone = DeviceIdentity.generate()
        status, body = _enrol(port, phone, issued[0])
        assert status == 200
        device_id = Enrolled.from_bytes(body, service.coordinator_public).device_id
        # the same token for another key: refused; the phone itself, restarted, needs no token again
        assert _enrol(port, token=issued[0]) == (403, b"this enrolment token was used by another device")
        status, body = _enrol(port, phone)
        assert status == 200 and Enrolled.from_bytes(body, None).device_id == device_id
        # tokens the operator appends are taken without a restart
        with path.open("a") as f:
            f.write("# added later\nlate-token-1\n")
        assert _enrol(port, token="late-token-1")[0] == 200
        assert len(service.roster) == 2
    finally:
        service.stop()
    # a token spent stays spent after a restart of the service (the roster keeps its hash)
    from pategail.server.net.roster import Roster
    assert len(Roster(tmp_path / "run", Admission(tokens_file=path)).tokens_spent) == 2


def test_an_allow_list_admits_only_its_keys(tmp_path, dataset):
    from pategail.server.errors import PategailError
    from pategail.server.net.admission import Admission, read_allowed_keys

    phone = DeviceIdentity.generate()
    path = tmp_path / "keys.txt"
    path.write_text(f"# the app's devices\n{phone.signing_public.hex()}  phone of user 7\n")
    service, port = _service(tmp_path / "run", dataset, Admission(allowed_keys=read_allowed_keys(path)))
    try:
        assert _enrol(port)[0] == 403
        assert _enrol(port, phone)[0] == 200
    finally:
        service.stop()
    path.write_text("abcd\n")
    with pytest.raises(PategailError, match="keys.txt:1: not a device key"):
        read_allowed_keys(path)


def _real_device(url, store, days, stop, token=None):
    from pategail.sdk.net.client import DeviceClient, RetryPolicy

    client = DeviceClient(url, store, days=lambda: days, token=token, poll_wait_s=0.3,
                          retry=RetryPolicy(first_s=0.05, cap_s=0.2, give_up_s=30), rng=np.random.default_rng(0))
    thread = threading.Thread(target=client.run, args=(stop,), daemon=True)
    thread.start()
    return client, thread


def test_phantoms_hold_no_seat_the_run_starts_with_devices_that_answer(tmp_path, dataset):
    """min_devices = 2: one real device and one phantom (enrolled, never answers) are not enough; the phantom
    is set aside, a second real device takes the seat, and enrolment closes with the two real ones."""
    from pategail.server.net.admission import Admission
    from pategail.server.net.liveness import close_enrolment

    service, port = _service(tmp_path / "run", dataset, Admission.open_to_all())
    url = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    lines, result = [], {}
    try:
        phantom = Enrolled.from_bytes(_enrol(port)[1], None).device_id
        real1, t1 = _real_device(url, tmp_path / "d1", dataset.user_days(0), stop)
        closing = threading.Thread(target=lambda: result.update(
            close_enrolment(service.roster, service.hub, 2, 1.5, lines.append, poll_s=0.05)), daemon=True)
        closing.start()
        end = threading.Event()
        for _ in range(200):                              # the phantom is found silent
            if any("did not answer" in line for line in lines):
                break
            end.wait(0.05)
        assert service.roster.seated() == [real1.device_id] and not service.roster.frozen
        real2, t2 = _real_device(url, tmp_path / "d2", dataset.user_days(1), stop)
        closing.join(timeout=30)
        assert sorted(result) == sorted([real1.device_id, real2.device_id]) and phantom not in result
        assert service.roster.frozen and service.roster.keys(phantom) is None
        assert any(f"did not answer within 1.5 s and hold no seat: {phantom}" in line for line in lines)
        assert lines[-1] == "training starts with 2 devices; enrolment is closed"
        assert _enrol(port)[0] == 403                      # fixed now
    finally:
        stop.set()
        service.stop()


def test_a_pong_must_be_the_devices_own_answer_to_that_order(tmp_path, dataset):
    from pategail.sdk.net import auth
    from pategail.server.net.admission import Admission

    service, port = _service(tmp_path / "run", dataset, Admission.open_to_all())
    phone = DeviceIdentity.generate()
    device_id = Enrolled.from_bytes(_enrol(port, phone)[1], None).device_id
    nonces = auth.NonceClock()

    def reply(body, seq):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {**auth.request_headers(phone.sign, "POST", "/v1/reply", device_id, nonces.next(), body),
                   "X-Pategail-Seq": str(seq)}
        conn.request("POST", "/v1/reply", body, headers)
        status = conn.getresponse().status
        conn.close()
        return status

    try:
        assert reply(Pong(device_id, 5).to_bytes(DeviceIdentity.generate().sign), 5) == 400     # not its key
        assert reply(Pong(device_id, 4).to_bytes(phone.sign), 5) == 400                         # another order
        assert reply(Pong(device_id, 5).to_bytes(phone.sign), 5) == 409                         # well-formed
    finally:
        service.stop()


def test_a_store_from_another_run_is_told_so_before_enrolling(tmp_path, dataset):
    from pategail.sdk.net.client import DeviceClient, ServiceError
    from pategail.server.net.admission import Admission

    first, port1 = _service(tmp_path / "run1", dataset, Admission.open_to_all())
    try:
        DeviceClient(f"http://127.0.0.1:{port1}", tmp_path / "device", requested_id=0).enrol()
    finally:
        first.stop()
    second, port2 = _service(tmp_path / "run2", dataset, Admission.open_to_all())
    try:
        _enrol(port2, requested=0)                       # someone else is device 0 there
        client = DeviceClient(f"http://127.0.0.1:{port2}", tmp_path / "device")
        with pytest.raises(ServiceError, match=r"belongs to another run \(coordinator key "
                                               rf"{first.coordinator_public.hex()[:16]}…, this service's is "
                                               rf"{second.coordinator_public.hex()[:16]}…\): give the device a new "
                                               "--store"):
            client.enrol()
        assert len(second.roster) == 1
    finally:
        second.stop()


def test_a_malformed_order_gets_an_empty_reply_and_the_device_keeps_polling(tmp_path, dataset):
    """Orders signed by the coordinator but malformed — a request with two messages, secure-aggregation steps
    with no frames, garbage ones or too many: the device answers each with an empty reply (it takes no part in
    that step) and still answers the next order."""
    from pategail.sdk.net.frames import WORK_PING
    from pategail.sdk.secagg.config import KeyDirectory
    from pategail.server.net.admission import Admission

    service, port = _service(tmp_path / "run", dataset, Admission.open_to_all())
    stop = threading.Event()
    try:
        client, thread = _real_device(f"http://127.0.0.1:{port}", tmp_path / "d", dataset.user_days(0), stop)
        for _ in range(200):
            if client.device is not None and client.device_id is not None:
                break
            threading.Event().wait(0.05)
        d = client.device_id
        service.fix_directory(KeyDirectory(service.coordinator_public, {d: service.roster.keys(d)}))
        for work, parts in [("request", (b"one", b"two")), ("advertise", ()), ("share", (b"\x00garbage",)),
                            ("unmask", (b"x", b"y", b"z"))]:
            assert service.hub.exchange(work, {d: parts}, 10.0) == {}, work        # answered, empty
            assert thread.is_alive(), work
        assert service.hub.activity_of(d).answered == 4 and service.hub.activity_of(d).missed == 0
        pong = service.hub.exchange(WORK_PING, {d: ()}, 10.0)[d]
        assert Pong.from_bytes(pong, client.identity.signing_public).device_id == d
    finally:
        stop.set()
        service.stop()


def test_issued_tokens_never_read_as_options(tmp_path):
    """A token is given on the device's command line (`pategail device --token T`): one beginning with "-" would
    be taken for an option; the issued ones are hexadecimal, 128 bits, and distinct."""
    from pategail.cli import build_parser
    from pategail.server.net.admission import issue_tokens

    tokens = issue_tokens(tmp_path / "tokens.txt", 500)
    assert len(set(tokens)) == 500 and all(len(t) == 32 and int(t, 16) >= 0 for t in tokens)
    args = build_parser().parse_args(["device", "--server", "http://127.0.0.1:9", "--store", "S",
                                      "--token", tokens[0]])
    assert args.token == tokens[0]
