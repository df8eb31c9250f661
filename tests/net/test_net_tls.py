"""Across machines the service speaks TLS: a device verifying the service's certificate with --cafile enrols,
installs the run's bundle (hashes checked) and polls over https; one without the CA refuses to talk."""
from __future__ import annotations

import datetime
import ssl

import pytest

from .conftest import TINY


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pategail test coordinator")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_a_device_talks_to_the_service_over_tls(tmp_path, dataset):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.sdk.net.client import DeviceClient, RetryPolicy, ServiceError
    from pategail.server.config import TrainConfig
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service
    from pategail.train_cli import ensure_initial_bundle

    cert, key_pem = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key_pem)
    run = tmp_path / "run"
    bundle = ensure_initial_bundle(TrainConfig.from_dict({**TINY, "rounds": 1}, where="test"), dataset, 0, run)
    key = Ed25519PrivateKey.generate()
    service = Service(Roster(run), Hub(key.sign), key, bundle, RunStatus())
    port = service.start("127.0.0.1", 0, context)
    user = int(dataset.users[0])
    try:
        client = DeviceClient(f"https://127.0.0.1:{port}", tmp_path / "device", cafile=str(cert),
                              days=lambda: dataset.user_days(user), poll_wait_s=0.2)
        device = client.prepare()
        assert device.bundle.sha256 == service.bundle_sha256
        assert client.coordinator == service.coordinator_public
        assert client._call("GET", "/v1/poll", query="?wait=0")[0] == 204
        stranger = DeviceClient(f"https://127.0.0.1:{port}", tmp_path / "stranger",
                                retry=RetryPolicy(first_s=0.01, cap_s=0.02, give_up_s=0.5))
        with pytest.raises(ServiceError, match="certificate is not trusted"):
            stranger.enrol()                               # the system's CAs do not vouch for this service
        assert len(service.roster) == 1
    finally:
        service.stop()
