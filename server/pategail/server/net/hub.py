"""Mailboxes between the coordinator's training thread and the service's event loop.

The training thread hands the hub one step's work for many devices at once (:meth:`Hub.exchange`) and waits,
up to a deadline, for their replies; each device's long poll (:meth:`Hub.next_order`, on the event loop) takes
its next order, signed by the coordinator, and :meth:`Hub.reply` files the device's answer. An order whose
device did not answer in time is withdrawn (a late reply to it is refused), so a slow or vanished device is a
dropout and never holds a round longer than the deadline.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from pategail.sdk.net.frames import Order

from .limits import BoundedSamples

log = logging.getLogger(__name__)


@dataclass
class _Ticket:
    order: bytes
    seq: int
    reply: bytes | None = None
    delivered_at: float | None = None


@dataclass
class HubStats:
    """Traffic through the hub: bytes of orders sent and replies received, and each order's time from its
    delivery to the device until the reply (seconds; the newest samples)."""

    bytes_down: int = 0
    bytes_up: int = 0
    turnaround_s: BoundedSamples = field(default_factory=lambda: BoundedSamples(100_000))


@dataclass
class DeviceActivity:
    """One device's record at the hub: orders it answered (an empty reply included) and orders it let pass
    their deadline (dropouts)."""

    answered: int = 0
    missed: int = 0


class Hub:
    """Orders out, replies in; ``sign`` is the coordinator's Ed25519 signing function. ``on_missed(work,
    device ids, deadline_s)`` is called (from the training thread) after an exchange that some devices let
    pass its deadline."""

    def __init__(self, sign, on_missed: Callable[[str, list[int], float], None] | None = None):
        self._sign = sign
        self.on_missed = on_missed
        self.activity: dict[int, DeviceActivity] = {}
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._queued: dict[int, deque[_Ticket]] = {}
        self._open: dict[int, dict[int, _Ticket]] = {}       # delivered, awaiting the reply
        self._waiters: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._polls: dict[int, int] = {}                      # the newest poll of each device
        self._last_seq = 0
        self._closed = False
        self.stats = HubStats()

    def close(self) -> None:
        """No more orders: every waiting poll returns at once (the service then answers 410)."""
        with self._lock:
            self._closed = True
            for device_id in list(self._waiters):
                self._wake(device_id)

    def _next_seq(self) -> int:
        # wall-clock nanoseconds, strictly increasing: a restarted service keeps increasing what devices saw
        self._last_seq = max(time.time_ns(), self._last_seq + 1)
        return self._last_seq

    # -- the training thread -------------------------------------------------------------------------------
    def exchange(self, work: str, inboxes: dict[int, tuple[bytes, ...]], deadline_s: float) -> dict[int, bytes]:
        """Send each device d the order (``work``, ``inboxes[d]``) and wait until every one answered or
        ``deadline_s`` passed; returns the non-empty replies (an empty reply: the device gave up)."""
        tickets = {}
        with self._lock:
            for d, parts in inboxes.items():
                seq = self._next_seq()
                ticket = _Ticket(Order(d, seq, work, tuple(parts)).to_bytes(self._sign), seq)
                self._queued.setdefault(d, deque()).append(ticket)
                tickets[d] = ticket
                self._wake(d)
            end = time.monotonic() + deadline_s
            while any(t.reply is None for t in tickets.values()):
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            late = [d for d, t in tickets.items() if t.reply is None]
            for d in late:                                     # withdrawn: a late answer is refused
                ticket = tickets[d]
                queue = self._queued.get(d)
                if queue is not None and ticket in queue:
                    queue.remove(ticket)
                self._open.get(d, {}).pop(ticket.seq, None)
            for d, t in tickets.items():
                record = self.activity.setdefault(d, DeviceActivity())
                if t.reply is None:
                    record.missed += 1
                else:
                    record.answered += 1
        if late:
            log.info("%s: %d device(s) did not answer within %.0f s: %s", work, len(late), deadline_s,
                     sorted(late)[:20])
            if self.on_missed is not None:
                self.on_missed(work, sorted(late), deadline_s)
        gave_up = sorted(d for d, t in tickets.items() if t.reply is not None and not t.reply)
        if gave_up:                                            # e.g. restarted without the round's secrets
            log.info("%s: %d device(s) gave up: %s", work, len(gave_up), gave_up[:20])
        return {d: t.reply for d, t in tickets.items() if t.reply}

    def _wake(self, device_id: int) -> None:
        waiter = self._waiters.pop(device_id, None)
        if waiter is not None:
            loop, future = waiter
            loop.call_soon_threadsafe(
                lambda: future.done() or future.set_result(None))  # type: ignore[func-returns-value]

    # -- the event loop ------------------------------------------------------------------------------------
    async def next_order(self, device_id: int, wait_s: float) -> bytes | None:
        """The device's next order, waiting up to ``wait_s`` for one (None: nothing for it). Only the device's
        newest poll takes orders: an older one — e.g. still held open for a process that was killed and
        restarted — returns None rather than hand an order to a connection nobody reads."""
        end = time.monotonic() + wait_s
        with self._lock:
            mine = self._polls[device_id] = self._polls.get(device_id, 0) + 1
            self._wake(device_id)                             # retire the older poll, if any
        while True:
            with self._lock:
                if self._polls[device_id] != mine:
                    return None
                queue = self._queued.get(device_id)
                if queue:
                    ticket = queue.popleft()
                    ticket.delivered_at = time.monotonic()
                    self._open.setdefault(device_id, {})[ticket.seq] = ticket
                    self.stats.bytes_down += len(ticket.order)
                    return ticket.order
                left = end - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                loop = asyncio.get_running_loop()
                future = loop.create_future()
                self._waiters[device_id] = (loop, future)
            try:
                await asyncio.wait_for(future, left)
            except asyncio.TimeoutError:
                pass
            finally:
                with self._lock:
                    if self._waiters.get(device_id, (None, None))[1] is future:
                        del self._waiters[device_id]

    def reply(self, device_id: int, seq: int, body: bytes) -> bool:
        """File a device's reply to its order ``seq``; False when no such order awaits one (never sent,
        answered already, or withdrawn after its deadline)."""
        with self._lock:
            ticket = self._open.get(device_id, {}).pop(seq, None)
            if ticket is None:
                return False
            ticket.reply = bytes(body)
            self.stats.bytes_up += len(body)
            assert ticket.delivered_at is not None          # an open ticket went out
            self.stats.turnaround_s.append(time.monotonic() - ticket.delivered_at)
            self._done.notify_all()
            return True

    def activity_of(self, device_id: int) -> DeviceActivity:
        with self._lock:
            a = self.activity.get(device_id)
            return DeviceActivity() if a is None else DeviceActivity(a.answered, a.missed)

    def waiting(self) -> int:
        """Orders queued or delivered and not answered yet."""
        with self._lock:
            return sum(len(q) for q in self._queued.values()) + sum(len(o) for o in self._open.values())
