"""What a service reports about itself: the run's status board (written by the training thread, read by the
service) and the traffic that crossed it, with bounded latency samples."""
from __future__ import annotations

import threading
from typing import Any

from .limits import BoundedSamples


class RunStatus:
    """What ``GET /status`` reports; written by the training thread, read by the service."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fields = {"phase": "enrolling", "round": 0}

    def update(self, **fields) -> None:
        with self._lock:
            self._fields.update(fields)

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self._fields)

    @property
    def finished(self) -> bool:
        return self.snapshot()["phase"] == "finished"


class Traffic:
    """What crossed the service, HTTP request and status lines, headers and bodies (not TCP/IP framing), and
    how long each request took to handle — a poll's wait for an order excluded (it is the device's idle
    time, not latency)."""

    KEEP = 10_000
    """Latency samples kept per route (the newest): percentiles are over these, counts over all."""

    def __init__(self) -> None:
        self.bytes_in = self.bytes_out = self.requests = 0
        self.latency_s: dict[str, BoundedSamples] = {}

    def record(self, route: str, bytes_in: int, bytes_out: int, seconds: float) -> None:
        self.requests += 1
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out
        self.latency_s.setdefault(route, BoundedSamples(self.KEEP)).append(seconds)

    def summary(self) -> dict:
        import numpy as np
        out: dict[str, Any] = {"requests": self.requests, "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                               "latency_ms": {}}
        for route, samples in sorted(self.latency_s.items()):
            v = 1e3 * np.fromiter(samples, float, len(samples))
            out["latency_ms"][route] = {"n": samples.count, "p50": float(np.percentile(v, 50)),
                                        "p99": float(np.percentile(v, 99))}
        return out
