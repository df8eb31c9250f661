"""The operator's view of a service: the devices (id, key fingerprint, last seen, orders answered, dropouts)
as an endpoint and a command, and the service's figures in the Prometheus text format — both behind the
operator's token."""
from __future__ import annotations

import hashlib
import http.client
import json
import re
import threading

import pytest

from pategail.cli import main
from pategail.sdk.messages import Ack
from pategail.sdk.net import auth
from pategail.sdk.net.frames import ANY_ID, Enrolled, Enrolment, Order
from pategail.sdk.secagg.config import DevicePublicKeys
from pategail.sdk.secagg.crypto import DeviceIdentity

from .conftest import TINY

TOKEN = "operator-secret"
# one sample line of the text exposition format: name, optional labels, a number
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? '
                    r'(-?[0-9.e+-]+|NaN|[+-]Inf)$')


@pytest.fixture
def run_with_two_devices(tmp_path, dataset):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.server.config import TrainConfig
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service, ServiceLimits

    from pategail.training import ensure_initial_bundle

    run = tmp_path / "run"
    bundle = ensure_initial_bundle(TrainConfig.from_dict({**TINY, "rounds": 1}, where="test"), dataset, 0, run)
    key = Ed25519PrivateKey.generate()
    missed = []
    hub = Hub(key.sign, on_missed=lambda work, ids, deadline: missed.append((work, ids, deadline)))
    status = RunStatus()
    status.update(phase="training", round=2, rounds=3, devices=2, participants=2, epsilon=1.25, target_epsilon=8.0)
    service = Service(Roster(run), hub, key, bundle, status, ServiceLimits(poll_wait_s=1.0), operator_token=TOKEN)
    port = service.start("127.0.0.1", 0)
    ids = []
    identities = [DeviceIdentity.generate(), DeviceIdentity.generate()]
    for identity in identities:
        keys = DevicePublicKeys(identity.signing_public, identity.envelope_public)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/enrol", Enrolment(keys, ANY_ID).to_bytes(identity.sign))
        ids.append(Enrolled.from_bytes(conn.getresponse().read(), None).device_id)
    (run / "service.url").write_text(f"http://127.0.0.1:{port}\n")
    (run / "operator.token").write_text(TOKEN + "\n")
    yield run, service, port, ids, identities, missed
    service.stop()


def _get(port, path, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    r = conn.getresponse()
    return r.status, r.getheader("Content-Type"), r.read()


def test_devices_and_metrics_count_answers_and_dropouts(run_with_two_devices):
    run, service, port, (a, b), (ida, _), missed = run_with_two_devices
    result = {}
    exchange = threading.Thread(target=lambda: result.update(
        service.hub.exchange("request", {a: (b"work",), b: (b"work",)}, deadline_s=1.5)))
    exchange.start()
    nonces = auth.NonceClock()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/v1/poll?wait=5", headers=auth.request_headers(ida.sign, "GET", "/v1/poll", a,
                                                                          nonces.next(), b""))
    order = Order.from_bytes(conn.getresponse().read(), service.coordinator_public, a)
    ack = Ack(1, "round_request", 3).to_bytes()
    conn.request("POST", "/v1/reply", ack, headers={
        **auth.request_headers(ida.sign, "POST", "/v1/reply", a, nonces.next(), ack), "X-Pategail-Seq": str(order.seq)})
    assert conn.getresponse().status == 204
    exchange.join(timeout=10)
    assert list(result) == [a] and missed == [("request", [b], 1.5)]

    assert _get(port, "/devices")[0] == 401 and _get(port, "/metrics", "wrong")[0] == 401
    status, _, body = _get(port, "/devices", TOKEN)
    rows = {row["id"]: row for row in json.loads(body)["devices"]}
    assert status == 200 and sorted(rows) == [a, b]
    assert (rows[a]["orders_answered"], rows[a]["dropouts"]) == (1, 0)
    assert (rows[b]["orders_answered"], rows[b]["dropouts"]) == (0, 1)
    assert rows[a]["key_fingerprint"] == hashlib.sha256(ida.signing_public).hexdigest()[:16]
    assert rows[a]["last_seen"] >= rows[b]["last_seen"] > 0           # a polled after both enrolled

    status, content_type, body = _get(port, "/metrics", TOKEN)
    text = body.decode()
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    for line in text.splitlines():
        assert line.startswith(("# HELP ", "# TYPE ")) or SAMPLE.match(line), line
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert values["pategail_round"] == "2" and values["pategail_epsilon_spent"] == "1.25"
    assert values["pategail_dropouts_total"] == "1" and values["pategail_orders_answered_total"] == "1"
    assert values["pategail_devices_enrolled"] == "2"
    assert int(values['pategail_request_duration_seconds_count{route="/v1/enrol"}']) == 2
    assert "# TYPE pategail_request_duration_seconds summary" in text


def test_the_devices_command_lists_them(run_with_two_devices, capsys):
    run, service, port, (a, b), _, _ = run_with_two_devices
    assert main(["devices", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"2 devices, from http://127.0.0.1:{port}" in out
    assert re.search(rf"^\s+{a}\s+[0-9a-f]{{16}}\s+\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\s+0\s+0$", out, re.M), out
    service.stop()                                       # no service: the roster's list, without activity
    assert main(["devices", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert "roster.json (the service does not answer" in out and re.search(rf"^\s+{b}\s+[0-9a-f]{{16}}\s+-", out, re.M)
