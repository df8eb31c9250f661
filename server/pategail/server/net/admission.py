"""Who may enrol in a served run: holders of an enrolment token the operator issued, or devices whose signing
key is on an allow-list — or, on an explicitly open service, anyone.

A token is single-use: it binds to the first device key enrolled with it (a device restarted on its store
enrols with the same key and needs no token again; a second key with the same token is refused). This is what
an app distributing the SDK does: its back end hands each signed-in user one token, the app passes it once
(``pategail device --token``). The service keeps only the tokens' SHA-256; the token file is re-read when it
changes, so an operator adds tokens without restarting the service.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import threading
from pathlib import Path

from pategail.server.errors import PategailError
from pategail.sdk.files import write_atomic

TOKENS_FILE = "enrol-tokens.txt"
"""Where ``pategail serve`` writes the tokens it issues, in the run directory (mode 0600)."""
HEADER_TOKEN = "X-Pategail-Enrol-Token"
"""The request header an enrolment carries its token in."""
MAX_TOKEN_CHARS = 256


class AdmissionRefused(Exception):
    """An enrolment without a valid token, with a used one, or from a key not on the allow-list."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.strip().encode("utf-8")).hexdigest()


def issue_tokens(path: Path, count: int) -> list[str]:
    """``count`` fresh tokens (128 random bits each, hexadecimal), written one a line to ``path`` (mode 0600).
    Hexadecimal, not base64: a token that began with "-" would be read as an option by `pategail device --token`."""
    tokens = [secrets.token_hex(16) for _ in range(count)]
    write_atomic(path, ("".join(t + "\n" for t in tokens)).encode("ascii"), 0o600)
    return tokens


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise PategailError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def read_allowed_keys(path: Path) -> frozenset[bytes]:
    """An allow-list file: one device signing key a line, 64 hex digits (``pategail device --show-key``)."""
    keys = set()
    for n, line in enumerate(_lines(path), 1):
        try:
            key = bytes.fromhex(line.split()[0])
        except ValueError:
            key = b""
        if len(key) != 32:
            raise PategailError(f"{path}:{n}: not a device key (64 hex digits)")
        keys.add(key)
    return frozenset(keys)


class Admission:
    """The admission rule of one service: ``tokens_file`` (one token a line; re-read when it changes),
    ``allowed_keys`` (signing keys), or ``open`` (anyone may enrol)."""

    def __init__(self, *, tokens_file: Path | None = None, allowed_keys: frozenset[bytes] = frozenset(),
                 open: bool = False):
        self.tokens_file, self.allowed_keys, self.open = tokens_file, frozenset(allowed_keys), open
        self._lock = threading.Lock()
        self._hashes: frozenset[str] = frozenset()
        self._stamp: tuple | None = None
        if tokens_file is not None:
            self._reload()

    @classmethod
    def open_to_all(cls) -> "Admission":
        return cls(open=True)

    def describe(self) -> str:
        if self.open:
            return "open: any device may enrol"
        parts = []
        if self.tokens_file is not None:
            parts.append(f"{len(self._hashes)} enrolment token(s) from {self.tokens_file}")
        if self.allowed_keys:
            parts.append(f"{len(self.allowed_keys)} allowed device key(s)")
        return " or ".join(parts) or "nobody may enrol"

    def _reload(self) -> None:
        assert self.tokens_file is not None             # reloaded only when there is one
        try:
            st = os.stat(self.tokens_file)
        except OSError as err:
            raise PategailError(f"{self.tokens_file}: cannot read the enrolment tokens ({err.strerror})") from None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._hashes = frozenset(token_hash(t) for t in _lines(self.tokens_file))
            self._stamp = stamp

    def check(self, signing_key: bytes, token: str | None) -> str | None:
        """The hash of the token this enrolment spends (None: admitted without one); AdmissionRefused
        otherwise. Whether the token was spent already is the roster's to know."""
        if self.open or signing_key in self.allowed_keys:
            return None
        if self.tokens_file is None or not token:
            raise AdmissionRefused("enrolment needs a token from the operator (pategail device --token)"
                                   if self.tokens_file is not None else "this device's key is not on the allow-list")
        if len(token) > MAX_TOKEN_CHARS:
            raise AdmissionRefused("not a valid enrolment token")
        with self._lock:
            try:
                self._reload()
            except PategailError:
                pass                              # keep the tokens read before; the operator is editing the file
            h = token_hash(token)
            if h not in self._hashes:
                raise AdmissionRefused("not a valid enrolment token")
        return h
