"""The one error type of the Python side."""


class CaptureError(Exception):
    """A user-facing error of the capture: what went wrong and where."""
