"""What can go wrong in a secure-aggregation round, as exception types both sides share.

The server re-exports these (``pategail.server.secagg``); the SDK never imports the server.
"""
from pategail.sdk.errors import SdkError


class SecAggError(SdkError):
    """Base class of every secure-aggregation error."""


class SecAggAbort(SecAggError):
    """The round stops and releases nothing: too few survivors (below ``n_min``) or too few shares to unmask."""


class AbortAfterUnmask(SecAggAbort):
    """The round stopped after devices had revealed unmasking shares to an aggregator that is not the
    coordinator: that aggregator may have opened the sum, so the attempt counts as a release (its noise was
    spent) even though nothing reached the coordinator."""


class MessageRejected(SecAggError):
    """One message was refused (malformed, wrong round, replayed, unsigned, wrongly signed, wrong length).

    The receiver's state is left exactly as it was, so the round goes on without that message.
    """


class ProtocolError(SecAggError):
    """A peer (usually the aggregator) asked for something the protocol forbids, or in the wrong phase."""


class RefusedUnmask(ProtocolError):
    """A device refused to reveal a secret: the request would expose both secrets of one device."""


class TamperDetected(SecAggError):
    """The coordinator's keyed checksum (or range check) does not match the aggregate it received."""


class ImplausibleAggregate(TamperDetected):
    """A released sum lies outside what clipped inputs plus the round's noise can produce (probability of a
    false alarm < 2^-40 per round): a device skipped its clipping, or the aggregate was altered."""


class RoundRefused(SecAggError):
    """A device refused a round before sending anything: its configuration is below the device's floors
    (``code`` "policy") or would take the device past its own privacy budget (``code`` "budget"). The
    device's state is unchanged."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
