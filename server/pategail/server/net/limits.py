"""What keeps a service exposed to strangers serving: per-address limits applied before any authentication,
bounded statistics, and refusal logs that cannot fill a disk.

- :class:`TokenBucket`: ``rate`` a second sustained, ``burst`` at once.
- :class:`AddressGuard`: per remote address, open connections (over ``max_connections`` a new one is closed
  at once) and a budget of refused requests (an address that spent it is answered 429 before any work until
  the budget refills). Many phones can share one address behind a carrier's NAT: the defaults leave room for
  hundreds of honest devices per address, and a refused request is rare for an honest device.
- :class:`LogLimiter`: at most ``burst`` lines per ``window_s``; the lines held back are counted in one line.
- :class:`BoundedSamples`: the newest ``keep`` values of a series and the count of all.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque


class TokenBucket:
    def __init__(self, rate: float, burst: int):
        self.rate, self.burst, self.tokens, self.at = rate, burst, float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def full(self) -> bool:
        return self.tokens + (time.monotonic() - self.at) * self.rate >= self.burst


class AddressGuard:
    """Per-address connection counts and refusal budgets; used from the service's event loop only."""

    MAX_TRACKED = 10_000
    """Addresses whose refusal budget is remembered; past this, the ones with a full budget are forgotten."""

    def __init__(self, max_connections: int, refusal_rate: float, refusal_burst: int):
        self.max_connections = max_connections
        self.refusal_rate, self.refusal_burst = refusal_rate, refusal_burst
        self.connections: dict[str, int] = {}
        self._budgets: dict[str, TokenBucket] = {}
        self.connections_refused = 0

    def open(self, address: str) -> bool:
        """A connection from ``address`` opens: False when the address has ``max_connections`` open already
        (the caller closes it; :meth:`close` is still called for it)."""
        n = self.connections.get(address, 0)
        self.connections[address] = n + 1
        if n >= self.max_connections:
            self.connections_refused += 1
            return False
        return True

    def close(self, address: str) -> None:
        n = self.connections.get(address, 0) - 1
        if n > 0:
            self.connections[address] = n
        else:
            self.connections.pop(address, None)

    def blocked(self, address: str) -> bool:
        """Whether ``address`` spent its budget of refused requests (it refills at ``refusal_rate``)."""
        bucket = self._budgets.get(address)
        return bucket is not None and bucket.tokens + (time.monotonic() - bucket.at) * bucket.rate < 1

    def refused(self, address: str) -> None:
        """One request of ``address`` was refused: it spends one unit of its budget."""
        bucket = self._budgets.get(address)
        if bucket is None:
            if len(self._budgets) >= self.MAX_TRACKED:
                for a in [a for a, b in self._budgets.items() if b.full()]:
                    del self._budgets[a]
            bucket = self._budgets[address] = TokenBucket(self.refusal_rate, self.refusal_burst)
        bucket.take()


class LogLimiter:
    """Logs at most ``burst`` lines per ``window_s`` to ``logger``; then one line with the count held back."""

    def __init__(self, logger: logging.Logger, burst: int = 20, window_s: float = 60.0):
        self.logger, self.burst, self.window_s = logger, burst, window_s
        self._lock = threading.Lock()
        self._start, self._lines, self.held_back = time.monotonic(), 0, 0

    def info(self, fmt: str, *args) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._start >= self.window_s:
                if self.held_back:
                    self.logger.info("%d more refused request(s) in the last %.0f s (not logged one by one)",
                                     self.held_back, now - self._start)
                self._start, self._lines, self.held_back = now, 0, 0
            if self._lines >= self.burst:
                self.held_back += 1
                return
            self._lines += 1
        self.logger.info(fmt, *args)


class BoundedSamples:
    """The newest ``keep`` values of a series (for percentiles) and the count and sum of all of them."""

    def __init__(self, keep: int = 10_000):
        self.values: deque[float] = deque(maxlen=keep)
        self.count, self.total = 0, 0.0

    def append(self, value: float) -> None:
        self.values.append(value)
        self.count += 1
        self.total += value

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)
