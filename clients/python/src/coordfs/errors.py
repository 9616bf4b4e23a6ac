"""What can go wrong talking to a coordfs mount.

Every exception of the library is a `CoordFSError`. A request the server refused raises a
`ServerError` whose `code` is the protocol's error code (Docs/PROTOCOL.md, "Error codes");
programs switch on the code (or catch the subclass for it), never on the message.
"""

from __future__ import annotations

import os
from typing import Any, Final

from ._base import CoordFSError, ProtocolError
from .status import ClaimHolder, parse_holder

__all__ = [
    "ClaimCancelledError",
    "ClaimTimeoutError",
    "ConflictError",
    "ConnectError",
    "ConnectionClosedError",
    "CoordFSError",
    "CutOffError",
    "ErrorCode",
    "InvalidPathError",
    "LimitError",
    "LocateError",
    "NoSuchPathError",
    "NotFoundError",
    "NotInMountError",
    "NotPermittedError",
    "ProtocolError",
    "ServerError",
]


class NotInMountError(CoordFSError):
    """The path is not inside a coordfs mount (or the mount does not say where its socket is)."""

    def __init__(self, path: bytes, reason: str) -> None:
        super().__init__(f"{os.fsdecode(path)} is not inside a coordfs mount ({reason})")
        self.path = path
        self.reason = reason


class LocateError(CoordFSError):
    """Whether the path is inside a coordfs mount could not be told: reading its attribute
    failed with `errno` (EACCES for a directory on the way that this user may not search)."""

    def __init__(self, path: bytes, errno: int) -> None:
        super().__init__(f"cannot tell which mount holds {os.fsdecode(path)}: {os.strerror(errno)}")
        self.path = path
        self.errno = errno


class ConnectError(CoordFSError):
    """The control socket could not be reached."""

    def __init__(self, socket: str, reason: str) -> None:
        super().__init__(f"cannot connect to the control socket {socket}: {reason}")
        self.socket = socket
        self.reason = reason


class ConnectionClosedError(CoordFSError):
    """The connection ended: the mount stopped, or `close()` was called."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the connection to the mount closed: {reason}")
        self.reason = reason


class ErrorCode:
    """The protocol's error codes (`ServerError.code`)."""

    BAD_JSON: Final = "bad-json"
    BAD_REQUEST: Final = "bad-request"
    UNKNOWN_REQUEST: Final = "unknown-request"
    TOO_LARGE: Final = "too-large"
    HELLO_REQUIRED: Final = "hello-required"
    UNSUPPORTED_VERSION: Final = "unsupported-version"
    INVALID_PATH: Final = "invalid-path"
    NOT_PERMITTED: Final = "not-permitted"
    NO_SUCH_PATH: Final = "no-such-path"
    NOT_FOUND: Final = "not-found"
    CONFLICT: Final = "conflict"
    TIMEOUT: Final = "timeout"
    CUT_OFF: Final = "cut-off"
    CANCELLED: Final = "cancelled"
    LIMIT: Final = "limit"
    CLOSING: Final = "closing"
    INTERNAL: Final = "internal"


class ServerError(CoordFSError):
    """The server refused a request. `code` says why (`ErrorCode`), `message` is for people,
    `detail` is the error object as sent, and `blockers` lists who holds what a `conflict`
    or `timeout` waited for."""

    def __init__(self, code: str, message: str, detail: dict[str, Any]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail
        blockers = detail.get("blockers")
        self.blockers: list[ClaimHolder] = (
            [parse_holder(blocker) for blocker in blockers] if isinstance(blockers, list) else []
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ConflictError(ServerError):
    """`conflict`: a claim that was not to wait conflicts with claims held by others."""


class ClaimTimeoutError(ServerError):
    """`timeout`: a claim's wait ran out."""


class ClaimCancelledError(ServerError):
    """`cancelled`: a waiting claim was given up."""


class NotPermittedError(ServerError):
    """`not-permitted`: this user could not read the path (or, to claim it for writing, change it)."""


class NoSuchPathError(ServerError):
    """`no-such-path`: the directory that would hold the path does not exist."""


class NotFoundError(ServerError):
    """`not-found`: no such subscription, presenter or claim on this connection."""


class InvalidPathError(ServerError):
    """`invalid-path`: not a path the mount takes."""


class LimitError(ServerError):
    """`limit`: too many connections, subscriptions, presenters or claims."""


class CutOffError(ServerError):
    """`cut-off`: one of several hosts that cannot reach the cluster's database."""


_BY_CODE: dict[str, type[ServerError]] = {
    ErrorCode.CONFLICT: ConflictError,
    ErrorCode.TIMEOUT: ClaimTimeoutError,
    ErrorCode.CANCELLED: ClaimCancelledError,
    ErrorCode.NOT_PERMITTED: NotPermittedError,
    ErrorCode.NO_SUCH_PATH: NoSuchPathError,
    ErrorCode.NOT_FOUND: NotFoundError,
    ErrorCode.INVALID_PATH: InvalidPathError,
    ErrorCode.LIMIT: LimitError,
    ErrorCode.CUT_OFF: CutOffError,
}


def server_error(detail: Any) -> ServerError:
    """The exception for an error reply's `error` object."""
    if not isinstance(detail, dict):
        return ServerError(ErrorCode.INTERNAL, f"an error reply without its error object: {detail!r}", {})
    code = detail.get("code")
    message = detail.get("message")
    code = code if isinstance(code, str) else ErrorCode.INTERNAL
    message = message if isinstance(message, str) else code
    return _BY_CODE.get(code, ServerError)(code, message, detail)
