"""Where a service listens and the address devices reach it at: the socket is bound before any work (a busy
port or an unknown host fails at once), and the URL names the certificate's host when there is one."""
from __future__ import annotations

import errno
import socket
from pathlib import Path

from pategail.server.errors import PategailError


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), not yet listening: taken before a service does any work, so a busy
    port or an unknown host fails at once. PategailError for either."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as err:
        raise PategailError(f"--host {host}: not an address of this machine ({err})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # as aiohttp: a restart reuses the port at once
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        why = "in use by another process" if err.errno == errno.EADDRINUSE else (err.strerror or str(err))
        raise PategailError(f"cannot listen on {host}:{port} ({why})") from None
    return sock


def certificate_host(cert_pem: Path) -> str | None:
    """The host name devices must use for the service's certificate: its first DNS (else IP) subject
    alternative name, else its common name; None when it names none."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    try:
        cert = x509.load_pem_x509_certificate(Path(cert_pem).read_bytes())
    except (OSError, ValueError):
        return None
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for kind in (x509.DNSName, x509.IPAddress):
            found = names.get_values_for_type(kind)
            if found:
                return str(found[0])
    except x509.ExtensionNotFound:
        pass
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(common[0].value) if common else None


def service_url(host: str, port: int, cert_pem: Path | None = None) -> str:
    """The URL devices reach the service at: with TLS, the certificate's host name (the bind address fails
    host name verification); without, the bind address, or this machine's name for a wildcard one."""
    name = certificate_host(cert_pem) if cert_pem is not None else None
    if name is None:
        name = socket.gethostname() if host in ("", "0.0.0.0", "::") else host
    if ":" in name:                                                # an IPv6 literal
        name = f"[{name}]"
    return f"{'https' if cert_pem is not None else 'http'}://{name}:{port}"
