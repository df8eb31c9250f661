"""The Java device's network client (`NetDevice`) against the coordinator's real service: over TLS with a
self-made CA (--cafile) it enrols, installs the run's bundle (hashes checked), pins the coordinator's key and
answers the signed liveness order; without the CA, or with the wrong scheme, it stops at once with one line;
restarted on its store it comes back under the same id; a service gone for longer than --give-up ends it with
one line. Local mistakes are one line on stderr, exit status 2, before anything is sent."""
from __future__ import annotations

import json
import ssl
import subprocess
from pathlib import Path

import pytest

from .conftest import JAVA, VECTORS

MAIN = "org.pategail.core.tools.NetDevice"


def _net_device(classpath, *args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([*JAVA, "-cp", classpath, MAIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def days_csv(tmp_path, dataset):
    from pategail.sdk.synthetic import write_synthetic_csv

    path = tmp_path / "days.csv"
    write_synthetic_csv(path, dataset.user_days(int(dataset.users[0]))[:30], dataset.cells)
    return path


def _made_ca(tmp_path) -> tuple[Path, ssl.SSLContext]:
    """A self-made CA (its certificate in ca.pem, what the devices are given) and the service's TLS context:
    a certificate for 127.0.0.1 that the CA signed."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(text):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("pategail test CA")).issuer_name(name("pategail test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(name("coordinator")).issuer_name(ca.subject)
            .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM,
                                                               serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    return tmp_path / "ca.pem", context


def _service(run: Path, context: ssl.SSLContext):
    """The service of a run on the vectors' bundle (no training: enrolment, liveness, the bundle)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pategail.server.net.hub import Hub
    from pategail.server.net.roster import Roster
    from pategail.server.net.service import RunStatus, Service

    key = Ed25519PrivateKey.generate()
    run.mkdir()
    service = Service(Roster(run), Hub(key.sign), key, VECTORS / "bundle", RunStatus())
    service.port = service.start("127.0.0.1", 0, context)
    return service


@pytest.fixture
def tls_service(tmp_path):
    cafile, context = _made_ca(tmp_path)
    service = _service(tmp_path / "run", context)
    service.cert, service.context = cafile, context
    yield service
    service.stop()


def test_a_java_device_enrols_over_tls_answers_its_orders_and_resumes(java_device_classpath, tls_service, days_csv,
                                                                       tmp_path):
    from pategail.server.net.liveness import close_enrolment

    url, store = f"https://127.0.0.1:{tls_service.port}", tmp_path / "phone"
    args = ["--server", url, "--store", store, "--days", days_csv, "--cafile", tls_service.cert, "--give-up", "3"]
    proc = subprocess.Popen([*JAVA, "-cp", java_device_classpath, MAIN, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # the liveness check: a signed ping order, answered with a Pong signed by the enrolled key
        devices = close_enrolment(tls_service.roster, tls_service.hub, 1, 60, lambda line: None)
    finally:
        tls_service.stop()                          # then the device hears nothing: it gives up after 3 s
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "no answer for 3 s" in err.strip().splitlines()[-1], err
    (device_id,) = devices
    key = _net_device(java_device_classpath, "--store", store, "--show-key").stdout.strip()
    assert devices[device_id].signing.hex() == key
    state = json.loads((store / "network.json").read_text())
    assert state["device_id"] == device_id and state["coordinator"] == tls_service.coordinator_public.hex()
    assert state["last_seq"] > 0                   # the ping order was checked and remembered
    assert (store / "bundle" / "manifest.json").read_bytes() == (VECTORS / "bundle" / "manifest.json").read_bytes()
    assert (store / "days.bin").stat().st_size == 30 * 48 * 4

    # restarted on its store against the service of another run: told so in one line, before it enrols
    service2 = _service(tmp_path / "run2", tls_service.context)
    port2 = service2.port
    try:
        done = _net_device(java_device_classpath, "--server", f"https://127.0.0.1:{port2}", "--store", store,
                           "--cafile", tls_service.cert, "--give-up", "3")
        assert done.returncode == 2 and "belongs to another run" in done.stderr, done.stderr
        assert len(service2.roster) == 0
    finally:
        service2.stop()


def test_a_java_device_refuses_an_untrusted_certificate_and_the_wrong_scheme(java_device_classpath, tls_service,
                                                                             days_csv, tmp_path):
    https, http = f"https://127.0.0.1:{tls_service.port}", f"http://127.0.0.1:{tls_service.port}"
    for url, message in ((https, "certificate is not trusted"), (http, "speaks TLS: use https://")):
        done = _net_device(java_device_classpath, "--server", url, "--store", tmp_path / "phone", "--days", days_csv,
                           "--give-up", "30")
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert message in last and "Exception" not in last, done.stderr
    assert len(tls_service.roster) == 0


@pytest.mark.parametrize("argv, message", [
    (["--server", "ftp://x"], "expected http://HOST:PORT"),
    (["--server", "http://127.0.0.1:9/pategail"], "a path, query"),
    (["--server", "http://127.0.0.1:70000"], "not a valid port"),
    (["--cafile", "nope.pem", "--server", "https://127.0.0.1:9"], "--cafile nope.pem: no such file"),
    (["--cafile", "NOTPEM", "--server", "https://127.0.0.1:9"], "not CA certificates in PEM form"),
    (["--cafile", "NOTPEM"], "the service's address is http://"),
    (["--coordinator-key", "abc"], "64 hex digits"),
    (["--days", "EMPTY"], "empty.csv: no rows"),
    (["--days", "BADROW"], "bad.csv: row 3: expected 'agent,day,slot,cell,lat,lon'"),
    (["--days", "nowhere.csv"], "nowhere.csv: no such file"),
    (["--frobnicate", "1"], "unknown argument --frobnicate"),
])
def test_local_mistakes_are_one_line_before_anything_is_sent(argv, message, java_device_classpath, tmp_path):
    """The port has no service: had the device tried to enrol, it would fail with "no answer", not with the
    message; and no identity is made."""
    (tmp_path / "empty.csv").write_text("agent,day,slot,cell,lat,lon\n")
    (tmp_path / "bad.csv").write_text("agent,day,slot,cell,lat,lon\n0,0,0,5,1.0,2.0\n0,0,1,five,1.0,2.0\n")
    (tmp_path / "not.pem").write_text("hello\n")
    subs = {"EMPTY": tmp_path / "empty.csv", "BADROW": tmp_path / "bad.csv", "NOTPEM": tmp_path / "not.pem"}
    argv = [str(subs.get(a, a)) for a in argv]
    if "--server" not in argv:
        argv = ["--server", "http://127.0.0.1:9", *argv]
    done = subprocess.run([*JAVA, "-cp", java_device_classpath, MAIN, "--store", "store", "--give-up", "0.5", *argv],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    err = done.stderr.strip()
    assert done.returncode == 2 and message in err and "\n" not in err and "Exception" not in err, err
    assert not (tmp_path / "store" / "identity.key").exists()
