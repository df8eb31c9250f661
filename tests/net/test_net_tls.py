"""Across machines the service speaks TLS: a device verifying the service's certificate with --cafile enrols,
installs the run's bundle (hashes checked) and polls over https; one without the CA refuses to talk. The
service's URL names the certificate's host, and a device using the wrong scheme is told so at once."""
from __future__ import annotations

import datetime
import ssl

import pytest

from .conftest import TINY


def _self_signed(tmp_path, dns_names=()):
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
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]
                                                       + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
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
    from pategail.training import ensure_initial_bundle

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


def _serve(tmp_path, dataset, context=None):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.server.config import TrainConfig
    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service
    from pategail.training import ensure_initial_bundle

    run = tmp_path / "run"
    bundle = ensure_initial_bundle(TrainConfig.from_dict({**TINY, "rounds": 1}, where="test"), dataset, 0, run)
    key = Ed25519PrivateKey.generate()
    service = Service(Roster(run), Hub(key.sign), key, bundle, RunStatus())
    return service, service.start("127.0.0.1", 0, context)


@pytest.mark.parametrize("tls_service", [False, True])
def test_the_wrong_scheme_fails_at_once_with_what_to_use(tls_service, tmp_path, dataset):
    import time

    from pategail.sdk.net.client import DeviceClient, RetryPolicy, ServiceError

    context = None
    if tls_service:
        cert, key_pem = _self_signed(tmp_path)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key_pem)
    service, port = _serve(tmp_path, dataset, context)
    try:
        scheme = "http" if tls_service else "https"
        client = DeviceClient(f"{scheme}://127.0.0.1:{port}", tmp_path / "device",
                              retry=RetryPolicy(first_s=0.01, cap_s=0.02, give_up_s=60))
        t0 = time.monotonic()
        with pytest.raises(ServiceError, match="speaks TLS: use https://" if tls_service
                           else "does not speak TLS: use http://"):
            client.enrol()
        assert time.monotonic() - t0 < 10 and len(service.roster) == 0
    finally:
        service.stop()


def test_the_service_url_names_the_certificates_host(tmp_path, dataset):
    from pategail.sdk.net.client import DeviceClient
    from pategail.server.net.address import certificate_host, service_url

    cert, key_pem = _self_signed(tmp_path, dns_names=["localhost"])
    assert certificate_host(cert) == "localhost"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key_pem)
    service, port = _serve(tmp_path, dataset, context)
    try:
        url = service_url("0.0.0.0", port, cert)
        assert url == f"https://localhost:{port}"
        assert service_url("127.0.0.1", port) == f"http://127.0.0.1:{port}"
        client = DeviceClient(url, tmp_path / "device", cafile=str(cert))
        assert client.enrol().coordinator == service.coordinator_public     # host name verification passes
    finally:
        service.stop()
