"""The SDK's own errors: what an app embedding the device side catches.

Every error the SDK raises on purpose derives from :class:`SdkError` and carries a one-line message that
names the file, row or field at fault. The SDK does not know about the ``pategail`` command line; the
command line maps these to one-line messages and exit status 2 (``pategail.cli``). Protocol errors keep
their own classes next to the protocol: :class:`pategail.sdk.messages.MessageError` (a device-protocol
request refused, with a code) and :class:`pategail.sdk.secagg.errors.SecAggError` (secure aggregation).
"""


class SdkError(Exception):
    """Base class of every error the SDK raises on purpose (one-line message, never a bug)."""


class DataError(SdkError):
    """Days or a data file are missing, malformed or inconsistent (shape, type, a cell id out of range)."""


class BundleError(SdkError):
    """A model bundle is missing, altered, of another format version, or not runnable here."""


class DeviceError(SdkError):
    """The device cannot do what was asked (no bundle, no days, an unreadable identity file)."""
