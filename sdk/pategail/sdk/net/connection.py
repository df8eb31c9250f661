"""The device's side of the transport: its service address, TLS context and store checked before anything
is written, and one kept-alive HTTP(S) connection that tells a passing failure (retried) from a lasting one
— an untrusted certificate, the wrong scheme — which it reports at once."""
from __future__ import annotations

import http.client
import os
import socket
import ssl
from pathlib import Path
from urllib.parse import urlsplit

from pategail.sdk.errors import SdkError


class ServiceError(SdkError):
    """The service refused the device, or could not be reached for longer than the retry policy allows."""


class TransientFailure(Exception):
    """A failure worth retrying: the service unreachable, a connection lost."""


def check_server_url(url: str) -> tuple[bool, str, int]:
    """(https, host, port) of a service address ``http(s)://HOST[:PORT]``; ServiceError for anything else — a
    path, a query or a user name included (the service is reached at its root)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServiceError(f"--server {url}: expected http://HOST:PORT or https://HOST:PORT")
    try:
        port = parts.port
    except ValueError:
        raise ServiceError(f"--server {url}: not a valid port (1 to 65535)") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username is not None:
        raise ServiceError(f"--server {url}: give the service's address only, http(s)://HOST:PORT (a path, query "
                           "or user name is not supported)")
    https = parts.scheme == "https"
    return https, parts.hostname, port or (443 if https else 80)


def tls_context(cafile: str | None, https: bool) -> ssl.SSLContext | None:
    """The context to verify an https service with (``cafile``: its CA certificates, PEM); ServiceError
    naming the file when it is missing or not PEM, or given for an http service."""
    if not https:
        if cafile is not None:
            raise ServiceError(f"--cafile {cafile}: the service's address is http://, which uses no certificate "
                               "(https:// for a TLS service)")
        return None
    if cafile is not None and not Path(cafile).is_file():
        raise ServiceError(f"--cafile {cafile}: no such file")
    try:
        return ssl.create_default_context(cafile=cafile)
    except (ssl.SSLError, OSError, ValueError) as err:
        raise ServiceError(f"--cafile {cafile}: not CA certificates in PEM form "
                           f"({getattr(err, 'reason', None) or err})") from None


def check_store(store: Path) -> None:
    """ServiceError unless ``store`` is (or can be made) a writable directory."""
    for parent in [store, *store.parents]:
        if parent.exists() and not parent.is_dir():
            raise ServiceError(f"--store {store}: {parent} is a file, not a directory")
        if parent.exists():
            break
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ServiceError(f"--store {store}: not a writable directory ({err.strerror or err})") from None


_NOT_TLS = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL",
            "HTTP_REQUEST", "UNEXPECTED_EOF_WHILE_READING"}
"""OpenSSL's reasons for a handshake with a peer that does not speak TLS."""


class Connection:
    """One kept-alive HTTP(S) connection to the service, reopened after any failure."""

    def __init__(self, url: str, context: ssl.SSLContext | None, timeout_s: float):
        self.https, self.host, self.port = check_server_url(url)
        self.context = context
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._answered = False                     # the service answered an HTTP request once: right scheme

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            if self._conn is None:
                if self.https:
                    self._conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s,
                                                             context=self.context)
                else:
                    self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            self._conn.request(method, path, body=body, headers={**headers, "Content-Length": str(len(body))})
            response = self._conn.getresponse()
            status, data = response.status, response.read()
            self._answered = True
            return status, data
        except ssl.SSLCertVerificationError as err:      # not a passing failure: never retried
            self.close()
            raise ServiceError(f"{self.host}:{self.port}: the service's TLS certificate is not trusted "
                               f"({err.verify_message}); give the device its CA with --cafile, and reach the "
                               "service by the host name its certificate names") from None
        except ssl.SSLError as err:
            self.close()
            if not self._answered and err.reason in _NOT_TLS:
                raise ServiceError(f"{self.host}:{self.port} does not speak TLS: use http:// (or give the "
                                   "service --tls-cert and --tls-key)") from None
            raise TransientFailure(f"{type(err).__name__}: {err}") from None
        except (OSError, http.client.HTTPException) as err:
            self.close()
            if (not self.https and not self._answered and not isinstance(err, ConnectionRefusedError)
                    and self._speaks_tls()):
                raise ServiceError(f"{self.host}:{self.port} speaks TLS: use https:// (with --cafile for a "
                                   "self-made certificate)") from None
            raise TransientFailure(f"{type(err).__name__}: {err}") from None

    def _speaks_tls(self) -> bool:
        """Whether the service completes a TLS handshake (an http:// address for a TLS service)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE   # a probe: nothing is sent
        try:
            with socket.create_connection((self.host, self.port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname=self.host):
                    return True
        except (OSError, ssl.SSLError):
            return False

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
