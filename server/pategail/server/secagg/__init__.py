"""Aggregator and coordinator side of secure noisy aggregation (the device side is ``pategail.sdk.secagg``)."""
from pategail.sdk.secagg.errors import (ImplausibleAggregate, MessageRejected, ProtocolError, RefusedUnmask,
                                        SecAggAbort, SecAggError, TamperDetected)

from .aggregator import Aggregator
from .config import SecureRoundConfig
from .coordinator import RoundStart, SecAggCoordinator, VerifiedAggregate
from .round import AggregateResult, Dropouts, RoundStats, run_secure_round

__all__ = ["Aggregator", "RoundStart", "SecAggCoordinator", "VerifiedAggregate", "AggregateResult", "Dropouts",
           "RoundStats", "SecureRoundConfig", "run_secure_round", "ImplausibleAggregate", "MessageRejected",
           "ProtocolError", "RefusedUnmask", "SecAggAbort", "SecAggError", "TamperDetected"]
