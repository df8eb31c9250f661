"""Errors that are the user's to fix: the command line prints them as one line and exits non-zero."""


class PategailError(Exception):
    """A mistake in the input (a file, a row, a field, an option): shown as one line, never a traceback."""


class DataError(PategailError):
    """A data file or a data set directory is missing, malformed or inconsistent."""
