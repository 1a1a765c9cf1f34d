"""Python exceptions for tpuoff's absl::Status codes.

Every error raised by tpuoff's C++ core is an instance of :class:`Error` and of
the builtin exception that fits its code, so callers can catch either::

    InvalidArgument, OutOfRange -> ValueError       NotFound -> FileNotFoundError
    ResourceExhausted -> MemoryError                Unimplemented -> NotImplementedError
    AlreadyExists -> FileExistsError                PermissionDenied -> PermissionError
    DeadlineExceeded -> TimeoutError                others -> RuntimeError

The message is the status message unchanged (it names the file, instruction
or device at fault).
"""


class Error(Exception):
    """Base of every tpuoff error; ``code`` is the absl status code name."""

    code = "UNKNOWN"


def _make(name, code, builtin):
    cls = type(name, (Error, builtin), {"code": code, "__module__": "tpuoff"})
    cls.__doc__ = f"absl status {code} (also a {builtin.__name__})."
    return cls


InvalidArgumentError = _make("InvalidArgumentError", "INVALID_ARGUMENT", ValueError)
OutOfRangeError = _make("OutOfRangeError", "OUT_OF_RANGE", ValueError)
NotFoundError = _make("NotFoundError", "NOT_FOUND", FileNotFoundError)
AlreadyExistsError = _make("AlreadyExistsError", "ALREADY_EXISTS", FileExistsError)
PermissionDeniedError = _make("PermissionDeniedError", "PERMISSION_DENIED", PermissionError)
ResourceExhaustedError = _make("ResourceExhaustedError", "RESOURCE_EXHAUSTED", MemoryError)
UnimplementedError = _make("UnimplementedError", "UNIMPLEMENTED", NotImplementedError)
DeadlineExceededError = _make("DeadlineExceededError", "DEADLINE_EXCEEDED", TimeoutError)
FailedPreconditionError = _make("FailedPreconditionError", "FAILED_PRECONDITION", RuntimeError)
InternalError = _make("InternalError", "INTERNAL", RuntimeError)

# absl::StatusCode values (absl/status/status.h).
_BY_CODE = {
    1: _make("CancelledError", "CANCELLED", RuntimeError),
    2: _make("UnknownError", "UNKNOWN", RuntimeError),
    3: InvalidArgumentError,
    4: DeadlineExceededError,
    5: NotFoundError,
    6: AlreadyExistsError,
    7: PermissionDeniedError,
    8: ResourceExhaustedError,
    9: FailedPreconditionError,
    10: _make("AbortedError", "ABORTED", RuntimeError),
    11: OutOfRangeError,
    12: UnimplementedError,
    13: InternalError,
    14: _make("UnavailableError", "UNAVAILABLE", RuntimeError),
    15: _make("DataLossError", "DATA_LOSS", RuntimeError),
    16: _make("UnauthenticatedError", "UNAUTHENTICATED", PermissionError),
}


def from_status(code: int, message: str) -> Error:
    """The exception for a failed absl::Status (called by the C++ core)."""
    return _BY_CODE.get(code, _BY_CODE[2])(message)
