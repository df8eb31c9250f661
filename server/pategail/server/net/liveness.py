"""Closing enrolment with devices that answer: a device that enrolled and then went silent — a phantom, a
squatter's key, a typo'd process that crashed — must not hold one of the run's seats.

Once ``min_devices`` devices are seated (enrolled and not silent), each is sent a liveness order
(``WORK_PING``) and has ``deadline_s`` to answer with its signed Pong. Those that did not are set aside
(they count again once they make a signed request, and are checked again); when at least ``min_devices``
answered, the roster is frozen with exactly those: a ``--min-devices N`` run starts with N devices that
answered, never fewer.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from pategail.sdk.net.frames import WORK_PING

from .hub import Hub
from .roster import Roster

log = logging.getLogger(__name__)


def close_enrolment(roster: Roster, hub: Hub, min_devices: int, deadline_s: float,
                    say: Callable[[str], None] = log.info, on_count: Callable[[int], None] = lambda n: None,
                    poll_s: float = 0.2) -> dict:
    """Wait for ``min_devices`` seated devices, check that they answer, and freeze the roster with those that
    did; returns the run's devices. ``say``: a line for the operator; ``on_count(n)``: devices seated."""
    last = -1
    while True:
        seated = roster.seated()
        if len(seated) != last:
            last = len(seated)
            on_count(last)
            say(f"waiting for devices: {last} of {min_devices} enrolled")
        if len(seated) < min_devices:
            time.sleep(poll_s)
            continue
        say(f"checking that the {len(seated)} enrolled devices answer (up to {deadline_s:g} s)")
        replies = hub.exchange(WORK_PING, {d: () for d in seated}, deadline_s)
        answered = sorted(d for d in seated if d in replies)
        silent = sorted(set(seated) - set(answered))
        if silent:
            roster.mark_silent(silent)
            say(f"{len(silent)} device(s) did not answer within {deadline_s:g} s and hold no seat: "
                f"{_ids(silent)}")
        if len(answered) >= min_devices:
            devices = roster.freeze(keep=answered)
            say(f"training starts with {len(devices)} devices; enrolment is closed")
            return devices
        last = -1


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
