"""The devices enrolled in a served run, kept in the run directory (``roster.json``) so that a restarted
service (``--resume``) knows them by the same ids and keys.

Enrolment is open until training starts, for the devices the run's :class:`~.admission.Admission` admits; a
token, once spent, is bound to the device that spent it. Before enrolment closes, the devices that did not
answer a liveness check are set aside (:meth:`Roster.mark_silent`; they hold no seat and count again once
they are heard from) and the roster is frozen with the devices that answered: the run's devices are fixed (the
privacy plan and n_min are sized for them). A known device enrolling again gets its id back; an unknown one is
refused.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Iterable

from pategail.server.errors import PategailError
from pategail.sdk.files import write_atomic
from pategail.sdk.net.frames import ANY_ID, Enrolment
from pategail.sdk.secagg.config import DevicePublicKeys

from .admission import Admission, AdmissionRefused

ROSTER_FILE = "roster.json"
MAX_DEVICE_ID = 0xFFFFFFFE


class EnrolmentRefused(Exception):
    """An enrolment the roster cannot take (not admitted, the run's devices are fixed, or the id is someone
    else's)."""


class Roster:
    """Device id -> public keys, persisted in ``run_dir/roster.json``; ``admission``: who may enrol (default:
    anyone — the command line asks for tokens unless told otherwise)."""

    def __init__(self, run_dir: Path, admission: Admission | None = None):
        self.path = Path(run_dir) / ROSTER_FILE
        self.admission = admission if admission is not None else Admission.open_to_all()
        self._lock = threading.Lock()
        self.devices: dict[int, DevicePublicKeys] = {}
        self.tokens_spent: dict[str, int] = {}
        self.frozen = False
        self._silent: set[int] = set()
        self.last_seen: dict[int, float] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.devices = {int(k): DevicePublicKeys(bytes.fromhex(v["signing"]), bytes.fromhex(v["envelope"]))
                                for k, v in data["devices"].items()}
                self.frozen = bool(data["frozen"])
                self.tokens_spent = {str(h): int(d) for h, d in data.get("tokens_spent", {}).items()}
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise PategailError(f"{self.path}: not a roster of enrolled devices ({err})") from None

    def _save(self) -> None:
        data = {"frozen": self.frozen, "devices": {str(k): {"signing": v.signing.hex(), "envelope": v.envelope.hex()}
                                                  for k, v in sorted(self.devices.items())},
                "tokens_spent": dict(sorted(self.tokens_spent.items()))}
        write_atomic(self.path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))

    def enrol(self, enrolment: Enrolment, token: str | None = None) -> int:
        """The id of the enrolling device: its own if its keys are known, else a new one (the asked-for id
        when free) if the admission rule lets it in with ``token``. Raises EnrolmentRefused."""
        with self._lock:
            for device_id, keys in self.devices.items():
                if keys == enrolment.keys:
                    if enrolment.requested_id not in (ANY_ID, device_id):
                        raise EnrolmentRefused(f"these keys are enrolled as device {device_id}")
                    self._heard(device_id)
                    return device_id
            if self.frozen:
                raise EnrolmentRefused("the run's devices are fixed: training has started")
            try:
                spent = self.admission.check(enrolment.keys.signing, token)
            except AdmissionRefused as err:
                raise EnrolmentRefused(str(err)) from None
            if spent is not None and spent in self.tokens_spent:
                raise EnrolmentRefused("this enrolment token was used by another device")
            if enrolment.requested_id == ANY_ID:
                device_id = max(self.devices, default=-1) + 1
            elif enrolment.requested_id > MAX_DEVICE_ID or enrolment.requested_id in self.devices:
                raise EnrolmentRefused(f"device id {enrolment.requested_id} is taken or out of range")
            else:
                device_id = enrolment.requested_id
            self.devices[device_id] = enrolment.keys
            if spent is not None:
                self.tokens_spent[spent] = device_id
            self._save()
            self._heard(device_id)
            return device_id

    # -- liveness before enrolment closes ----------------------------------------------------------------
    def _heard(self, device_id: int) -> None:
        self.last_seen[device_id] = time.time()
        self._silent.discard(device_id)

    def heard_from(self, device_id: int) -> None:
        """An authenticated request of ``device_id`` arrived: it is not silent (any more)."""
        with self._lock:
            self._heard(device_id)

    def mark_silent(self, device_ids: Iterable[int]) -> None:
        """Devices that did not answer a liveness check: they hold no seat until heard from again."""
        with self._lock:
            self._silent.update(d for d in device_ids if d in self.devices)

    def seated(self) -> list[int]:
        """The enrolled devices that are not silent."""
        with self._lock:
            return sorted(d for d in self.devices if d not in self._silent)

    def freeze(self, keep: Iterable[int] | None = None) -> dict[int, DevicePublicKeys]:
        """Close enrolment with the devices in ``keep`` (default: every enrolled one; the others are
        removed, their tokens stay spent); returns the run's devices."""
        with self._lock:
            if keep is not None:
                keep = set(keep)
                self.devices = {d: k for d, k in self.devices.items() if d in keep}
            self.frozen = True
            self._save()
            return dict(self.devices)

    def keys(self, device_id: int) -> DevicePublicKeys | None:
        with self._lock:
            return self.devices.get(device_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self.devices)
