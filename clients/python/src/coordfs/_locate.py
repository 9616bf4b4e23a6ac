"""Finding a mount's control socket from a path in it, as the Swift client does
(Sources/CoordFSClient/Locate.swift): every item of a mount answers the extended attribute
`user.coordfs.control` with the socket's path and the item's own path inside the mount."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass

from . import _paths
from ._base import ProtocolError
from ._paths import PathArg
from .errors import LocateError, NotInMountError

#: The attribute every item of a mount answers with its location.
ATTRIBUTE = "user.coordfs.control"


@dataclass(frozen=True)
class Location:
    """Where a path's mount takes control requests (`socket`), and the path's name inside the
    mount (`path`, bytes, "/" for the mountpoint itself)."""

    socket: str
    path: bytes
    version: int = 1


def _read(path: bytes) -> Location:
    """The attribute of `path` (following symbolic links), decoded; a value that is not a
    location fails as EINVAL."""
    value = os.getxattr(path, ATTRIBUTE)
    try:
        location = json.loads(value)
        version, socket = location["version"], location["socket"]
        name = _paths.decode(location, "path")
    except (ValueError, KeyError, TypeError, ProtocolError):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL)) from None
    if not isinstance(version, int) or not isinstance(socket, str) or not socket.startswith("/") \
            or not name.startswith(b"/"):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    return Location(socket, name, version)


def _split(path: bytes) -> tuple[bytes, bytes | None]:
    """The directory of `path` and its last name; no name when the path ends in none that is
    a plain name ("/", ".", "..")."""
    stripped = path.rstrip(b"/")
    if not stripped:
        return path, None
    head, _, name = stripped.rpartition(b"/")
    if name in (b".", b".."):
        return path, None
    directory = head.rstrip(b"/") or (b"/" if stripped.startswith(b"/") else b".")
    return directory, name


def _failure(path: bytes, error: int) -> Exception:
    if error in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
        return NotInMountError(path, f"it has no {ATTRIBUTE} attribute")
    if error == errno.EINVAL:
        return NotInMountError(path, f"its {ATTRIBUTE} attribute is not a coordfs location")
    return LocateError(path, error)


def locate(path: PathArg) -> Location:
    """Finds the mount that holds `path`. A path that does not exist (yet), or whose attribute
    this user may not read, is located through its directory and named inside the mount as
    that directory's path plus its last name: the server then says what the user may do with
    it. Paths are bytes throughout: a name that is not UTF-8 is found and named exactly."""
    raw = os.fsencode(path)
    try:
        return _read(raw)
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.EACCES):
            raise _failure(raw, error.errno or errno.EIO) from None
        first = error.errno
    directory, name = _split(raw)
    if name is None:
        raise (NotInMountError(raw, "it does not exist") if first == errno.ENOENT else _failure(raw, first))
    try:
        location = _read(directory)
    except OSError as inner:
        if inner.errno == errno.ENOENT and first == errno.ENOENT:
            raise NotInMountError(raw, "neither it nor its directory exists") from None
        # A directory outside the mount says nothing about a path this user may not read.
        raise _failure(raw, first if first == errno.EACCES else (inner.errno or errno.EIO)) from None
    return Location(location.socket, location.path.rstrip(b"/") + b"/" + name, location.version)
