"""The devices enrolled in a served run, kept in the run directory (``roster.json``) so that a restarted
service (``--resume``) knows them by the same ids and keys.

Enrolment is open until training starts; then the roster is frozen (the run's devices are fixed, as the
privacy plan and n_min are sized for them): a known device enrolling again gets its id back, an unknown one
is refused.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from pategail.errors import PategailError
from pategail.sdk.files import write_atomic
from pategail.sdk.net.frames import ANY_ID, Enrolment
from pategail.sdk.secagg.config import DevicePublicKeys

ROSTER_FILE = "roster.json"
MAX_DEVICE_ID = 0xFFFFFFFE


class EnrolmentRefused(Exception):
    """An enrolment the roster cannot take (the run's devices are fixed, or the id is someone else's)."""


class Roster:
    """Device id -> public keys, persisted in ``run_dir/roster.json``."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / ROSTER_FILE
        self._lock = threading.Lock()
        self.devices: dict[int, DevicePublicKeys] = {}
        self.frozen = False
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.devices = {int(k): DevicePublicKeys(bytes.fromhex(v["signing"]), bytes.fromhex(v["envelope"]))
                                for k, v in data["devices"].items()}
                self.frozen = bool(data["frozen"])
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise PategailError(f"{self.path}: not a roster of enrolled devices ({err})") from None

    def _save(self) -> None:
        data = {"frozen": self.frozen, "devices": {str(k): {"signing": v.signing.hex(), "envelope": v.envelope.hex()}
                                                  for k, v in sorted(self.devices.items())}}
        write_atomic(self.path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))

    def enrol(self, enrolment: Enrolment) -> int:
        """The id of the enrolling device: its own if its keys are known, else a new one (the asked-for id
        when free). Raises EnrolmentRefused."""
        with self._lock:
            for device_id, keys in self.devices.items():
                if keys == enrolment.keys:
                    if enrolment.requested_id not in (ANY_ID, device_id):
                        raise EnrolmentRefused(f"these keys are enrolled as device {device_id}")
                    return device_id
            if self.frozen:
                raise EnrolmentRefused("the run's devices are fixed: training has started")
            if enrolment.requested_id == ANY_ID:
                device_id = max(self.devices, default=-1) + 1
            elif enrolment.requested_id > MAX_DEVICE_ID or enrolment.requested_id in self.devices:
                raise EnrolmentRefused(f"device id {enrolment.requested_id} is taken or out of range")
            else:
                device_id = enrolment.requested_id
            self.devices[device_id] = enrolment.keys
            self._save()
            return device_id

    def freeze(self) -> dict[int, DevicePublicKeys]:
        """Close enrolment; returns the run's devices."""
        with self._lock:
            self.frozen = True
            self._save()
            return dict(self.devices)

    def keys(self, device_id: int) -> DevicePublicKeys | None:
        with self._lock:
            return self.devices.get(device_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self.devices)
