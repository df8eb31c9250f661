"""The signed frames between a device and the service: what each side checks before it acts."""
from __future__ import annotations

import pytest

from pategail.sdk.net import auth
from pategail.sdk.net.frames import (ANY_ID, Enrolled, Enrolment, Order, directory_from_bytes, directory_to_bytes)
from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.config import DevicePublicKeys, KeyDirectory
from pategail.sdk.secagg.crypto import DeviceIdentity
from pategail.sdk.secagg.errors import MessageRejected


@pytest.fixture
def parties():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    coordinator = Ed25519PrivateKey.generate()
    device = DeviceIdentity.generate()
    return coordinator, crypto.public_bytes(coordinator), device


def test_an_order_is_checked_for_origin_addressee_and_integrity(parties):
    coordinator, public, _ = parties
    order = Order(7, 123456789, "request", (b"PGDV frame",))
    data = order.to_bytes(coordinator.sign)
    assert Order.from_bytes(data, public, 7) == order
    with pytest.raises(MessageRejected, match="for device 7"):
        Order.from_bytes(data, public, 8)                         # another device's order
    forged = bytearray(data)
    forged[20] ^= 1
    with pytest.raises(MessageRejected, match="signature"):
        Order.from_bytes(bytes(forged), public, 7)                # changed in transit
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    other = Ed25519PrivateKey.generate()
    with pytest.raises(MessageRejected, match="signature"):
        Order.from_bytes(order.to_bytes(other.sign), public, 7)   # signed by someone else
    with pytest.raises(MessageRejected):
        Order.from_bytes(data[:-1], public, 7)


def test_enrolment_proves_possession_and_the_answer_is_pinned(parties):
    coordinator, public, device = parties
    keys = DevicePublicKeys(device.signing_public, device.envelope_public)
    data = Enrolment(keys, ANY_ID).to_bytes(device.sign)
    assert Enrolment.from_bytes(data) == Enrolment(keys, ANY_ID)
    thief = DeviceIdentity.generate()
    with pytest.raises(MessageRejected, match="not signed by the key"):
        Enrolment.from_bytes(Enrolment(keys, 3).to_bytes(thief.sign))   # enrolling someone else's key
    answer = Enrolled(4, public, "ab" * 32).to_bytes(coordinator.sign)
    assert Enrolled.from_bytes(answer, None).device_id == 4
    assert Enrolled.from_bytes(answer, public).bundle_sha256 == "ab" * 32
    with pytest.raises(MessageRejected, match="pinned"):
        Enrolled.from_bytes(answer, b"\x01" * 32)


def test_the_directory_is_signed_by_the_coordinator_it_names(parties):
    coordinator, public, device = parties
    directory = KeyDirectory(public, {3: DevicePublicKeys(device.signing_public, device.envelope_public)})
    data = directory_to_bytes(directory, coordinator.sign)
    assert directory_from_bytes(data, public) == directory
    with pytest.raises(MessageRejected):
        directory_from_bytes(data, b"\x02" * 32)


def test_a_request_signature_covers_method_path_device_nonce_and_body(parties):
    _, _, device = parties
    headers = auth.request_headers(device.sign, "POST", "/v1/reply", 5, 99, b"body")
    sig = bytes.fromhex(headers[auth.HEADER_SIGNATURE])
    assert crypto.verify(device.signing_public, sig, auth.signed_bytes("POST", "/v1/reply", 5, 99, b"body"))
    for changed in [("GET", "/v1/reply", 5, 99, b"body"), ("POST", "/v1/poll", 5, 99, b"body"),
                    ("POST", "/v1/reply", 6, 99, b"body"), ("POST", "/v1/reply", 5, 100, b"body"),
                    ("POST", "/v1/reply", 5, 99, b"bodY")]:
        assert not crypto.verify(device.signing_public, sig, auth.signed_bytes(*changed))
    clock = auth.NonceClock()
    nonces = [clock.next() for _ in range(1000)]
    assert nonces == sorted(set(nonces))
