"""Errors that are the user's to fix: the command line prints them as one line and exits non-zero."""


class PategailError(Exception):
    """A mistake in the input (a file, a row, a field, an option): shown as one line, never a traceback."""


class DataError(PategailError):
    """A data file or a data set directory is missing, malformed or inconsistent."""


class IntegrityError(PategailError):
    """A secure aggregation's result failed the coordinator's integrity check (checksum, survivor signatures or
    plausibility): nothing of it was used. The command exits with status 3; the run can be resumed."""

    exit_status = 3


class BudgetExhausted(PategailError):
    """The next release would take the run's composed ε past its target: it is not started. Exit status 4."""

    exit_status = 4
