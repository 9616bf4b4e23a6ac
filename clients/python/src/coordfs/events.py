"""What a subscription yields: events in commit order, and the markers that say to rescan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, AnyStr, Callable, Generic, Literal, Union

from . import _paths
from .status import _field, _object, _optional

#: The kinds of change events (Docs/PROTOCOL.md, "Events"); an `Event.kind` may be another
#: that a newer mount sends.
EventKind = Literal["created", "changed", "deleted", "moved", "attributes", "conflict"]
EVENT_KINDS: tuple[str, ...] = ("created", "changed", "deleted", "moved", "attributes", "conflict")


@dataclass(frozen=True)
class Host:
    """Another host of the cluster (`coordfs mount --cluster`)."""

    id: int
    name: str


@dataclass(frozen=True)
class Origin:
    """Who made a change. Through the mount all of `pid`, `uid` and `process` are there; for
    a change made directly in the backing (`outside`) only what the kernel told; for one
    another host committed, that host's process and `host`."""

    pid: int | None
    uid: int | None
    process: str | None
    outside: bool = False
    host: Host | None = None


@dataclass(frozen=True)
class Event(Generic[AnyStr]):
    """One change. `path` is inside the mount ("/docs/a.txt"), in the type the subscription
    was made with; for `moved` it is where the item was and `destination` where it is now;
    for `conflict`, `destination` is where the other version was kept. `size` is the size
    after the change, when it has one; `time` the commit's, in seconds since the epoch."""

    sequence: int
    kind: str
    path: AnyStr
    destination: AnyStr | None
    directory: bool
    origin: Origin
    size: int | None
    time: float


@dataclass(frozen=True)
class Overflow:
    """Events were lost: `dropped` of them, numbered `first` to `last` (this subscription fell
    behind the server's queue or the library's buffer). Rescan what you watch; events after
    `last` follow. With `reason` "backing" the mount lost track of changes made behind it:
    anything may have changed, whatever `dropped` says."""

    dropped: int
    first: int
    last: int
    reason: str | None = None

    @property
    def backing(self) -> bool:
        return self.reason == "backing"

    def merged(self, other: Overflow) -> Overflow:
        return Overflow(self.dropped + other.dropped, min(self.first, other.first), max(self.last, other.last),
                        self.reason or other.reason)


@dataclass(frozen=True)
class Resync:
    """The subscription asked to replay from `since`, which the mount's history no longer
    reaches (or which is from an earlier run of the mount): events were lost, rescan what you
    watch. Live events follow, numbered after `sequence`. Always the first item when it comes."""

    since: int
    sequence: int


#: What iterating a subscription gives.
Item = Union[Event[AnyStr], Overflow, Resync]


def parse_event(message: Mapping[str, Any], convert: Callable[[bytes], AnyStr]) -> Event[AnyStr]:
    origin = _object(message.get("origin", {}), "origin")
    host = origin.get("host")
    destination = _paths.decode_optional(message, "destination")
    return Event(
        sequence=_field(message, "sequence", int),
        kind=_field(message, "kind", str),
        path=convert(_paths.decode(message, "path")),
        destination=None if destination is None else convert(destination),
        directory=_field(message, "directory", bool, False),
        origin=Origin(
            pid=_optional(origin, "pid", int),
            uid=_optional(origin, "uid", int),
            process=_optional(origin, "process", str),
            outside=origin.get("outside") is True,
            host=None if host is None else Host(_field(_object(host, "host"), "id", int), _field(host, "name", str)),
        ),
        size=_optional(message, "size", int),
        time=_field(message, "time", float, 0.0),
    )


def parse_overflow(message: Mapping[str, Any]) -> Overflow:
    return Overflow(_field(message, "dropped", int), _field(message, "first", int), _field(message, "last", int),
                    _optional(message, "reason", str))
