"""Errors that are the user's to fix: the command line prints them as one line and exits with status 2.

Two roots: :class:`PategailError` for the command line and the research tooling (an option, a config file,
a run directory), and the SDK's own :class:`~pategail.sdk.errors.SdkError` (a bundle, a device, a protocol
message), which the SDK raises without knowing about this command line. ``USER_ERRORS`` is both.
"""
from pategail.sdk.errors import DataError, SdkError


class PategailError(Exception):
    """A mistake in the input (a file, a row, a field, an option): shown as one line, never a traceback."""


class IntegrityError(PategailError):
    """A secure aggregation's result failed the coordinator's integrity check (checksum, survivor signatures or
    plausibility): nothing of it was used. The command exits with status 3; the run can be resumed."""

    exit_status = 3


class BudgetExhausted(PategailError):
    """The next release would take the run's composed ε past its target: it is not started. Exit status 4."""

    exit_status = 4


USER_ERRORS = (PategailError, SdkError)
"""What ``pategail`` prints as one line (exit 2, or the error's ``exit_status``); anything else is a bug and
keeps its traceback."""

__all__ = ["BudgetExhausted", "DataError", "IntegrityError", "PategailError", "SdkError", "USER_ERRORS"]
