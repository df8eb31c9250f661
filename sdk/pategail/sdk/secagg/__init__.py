"""Device side of secure noisy aggregation: fixed point, Shamir, PRG, distributed noise, messages, client.

Others use ``SecAggClient`` (client.py), ``DeviceIdentity`` (crypto.py), ``KeyDirectory`` /
``DevicePublicKeys`` / ``RoundConfig`` (config.py), ``RoundLog`` (replay.py) and the exception types
(errors.py).
"""
from .client import SecAggClient
from .config import COORDINATOR, DevicePublicKeys, KeyDirectory, RoundConfig
from .crypto import DeviceIdentity
from .errors import (ImplausibleAggregate, MessageRejected, ProtocolError, RefusedUnmask, SecAggAbort, SecAggError,
                     TamperDetected)
from .fixedpoint import FRAC_BITS
from .replay import RoundLog

__all__ = ["SecAggClient", "COORDINATOR", "DevicePublicKeys", "KeyDirectory", "RoundConfig", "DeviceIdentity",
           "ImplausibleAggregate", "MessageRejected", "ProtocolError", "RefusedUnmask", "SecAggAbort",
           "SecAggError", "TamperDetected", "FRAC_BITS", "RoundLog"]
