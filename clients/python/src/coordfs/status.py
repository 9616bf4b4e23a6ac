"""What `Connection.status()` returns: the mount's status as this connection's user may see it.

The common parts are typed; `Status.raw` is the whole reply as Docs/PROTOCOL.md ("Status")
documents it, for what is not (the cluster, per-user limits, fields of newer servers). Paths
in status are `str` decoded as `os.fsdecode` does: `os.fsencode(path)` gives their exact bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import _paths
from ._base import ProtocolError


def _field(message: Mapping[str, Any], key: str, kind: type[Any], default: Any = None) -> Any:
    value = message.get(key, default)
    if value is None and default is None:
        if key in message:
            return None
        raise ProtocolError(f"no {key} in {dict(message)!r}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"{key} is not a {kind.__name__}: {value!r}")
    return value


def _optional(message: Mapping[str, Any], key: str, kind: type[Any]) -> Any:
    return _field(message, key, kind) if message.get(key) is not None else None


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not an object: {value!r}")
    return value


def _objects(message: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    values = message.get(key, [])
    if not isinstance(values, list):
        raise ProtocolError(f"{key} is not a list: {values!r}")
    return [_object(value, key) for value in values]


def _path(message: Mapping[str, Any], key: str) -> str:
    return os.fsdecode(_paths.decode(message, key))


@dataclass(frozen=True)
class ClaimOwner:
    """Who holds or waits for a claim: a `process` for one of its operations or open files,
    or a `client` (a connection, `session`) for its process tree."""

    kind: str
    pid: int
    session: int | None


def _owner(value: Any) -> ClaimOwner:
    owner = _object(value, "owner")
    return ClaimOwner(_field(owner, "kind", str), _field(owner, "pid", int), _optional(owner, "session", int))


@dataclass(frozen=True)
class ClaimHolder:
    """A claim held on `path`: its mode (`snapshot-read`, `read`, `write`, `exclusive`), its
    owner and how many seconds it has been held."""

    path: str
    mode: str
    owner: ClaimOwner
    held: float


def parse_holder(value: Any) -> ClaimHolder:
    holder = _object(value, "claim holder")
    return ClaimHolder(_path(holder, "path"), _field(holder, "mode", str), _owner(holder.get("owner")),
                       _field(holder, "held", float, 0.0))


@dataclass(frozen=True)
class ClaimWaiter:
    """A request waiting for claims on `paths`, for `waiting` seconds so far."""

    paths: list[str]
    mode: str
    owner: ClaimOwner
    waiting: float


@dataclass(frozen=True)
class StatusConnection:
    session: int
    pid: int
    uid: int
    client: str | None
    age: float


@dataclass(frozen=True)
class StatusSubscriber:
    session: int
    subscription: int
    path: str
    recursive: bool
    kinds: list[str]
    queued: int
    delivered: int
    dropped: int
    overflows: int


@dataclass(frozen=True)
class StatusPresenter:
    presenter: int
    session: int | None
    path: str
    answers: list[str]
    pid: int
    pending: int
    asked: int
    answered: int
    timed_out: int
    refused: int
    unresponsive: bool


@dataclass(frozen=True)
class StatusPresenterRequest:
    """An ask not answered yet: its kind, the item, the process whose access waits for it,
    and the presenters it waits for."""

    request: int
    kind: str
    path: str
    requester: int
    awaiting: list[int]
    waiting: float


@dataclass(frozen=True)
class Status:
    """The mount's status. `sequence` is the last event's number."""

    raw: dict[str, Any]
    sequence: int
    connections: list[StatusConnection]
    subscribers: list[StatusSubscriber]
    presenters: list[StatusPresenter]
    presenter_requests: list[StatusPresenterRequest]
    held: list[ClaimHolder]
    waiting: list[ClaimWaiter]


def parse_status(body: dict[str, Any]) -> Status:
    events = _object(body.get("events", {}), "events")
    claims = _object(body.get("claims", {}), "claims")
    return Status(
        raw=body,
        sequence=_field(events, "sequence", int, 0),
        connections=[
            StatusConnection(_field(c, "session", int), _field(c, "pid", int), _field(c, "uid", int),
                             _optional(c, "client", str), _field(c, "age", float, 0.0))
            for c in _objects(body, "connections")
        ],
        subscribers=[
            StatusSubscriber(_field(s, "session", int), _field(s, "subscription", int), _path(s, "path"),
                             _field(s, "recursive", bool, False), list(_field(s, "kinds", list, [])),
                             _field(s, "queued", int, 0), _field(s, "delivered", int, 0), _field(s, "dropped", int, 0),
                             _field(s, "overflows", int, 0))
            for s in _objects(body, "subscribers")
        ],
        presenters=[
            StatusPresenter(_field(p, "presenter", int), _optional(p, "session", int), _path(p, "path"),
                            list(_field(p, "answers", list, [])), _field(p, "pid", int, 0),
                            _field(p, "pending", int, 0), _field(p, "asked", int, 0), _field(p, "answered", int, 0),
                            _field(p, "timedOut", int, 0), _field(p, "refused", int, 0),
                            _field(p, "unresponsive", bool, False))
            for p in _objects(body, "presenters")
        ],
        presenter_requests=[
            StatusPresenterRequest(_field(r, "request", int), _field(r, "kind", str), _path(r, "path"),
                                   _field(r, "requester", int, 0), list(_field(r, "awaiting", list, [])),
                                   _field(r, "waiting", float, 0.0))
            for r in _objects(body, "presenterRequests")
        ],
        held=[parse_holder(h) for h in _objects(claims, "held")],
        waiting=[
            ClaimWaiter([os.fsdecode(p) for p in _paths.decode_list(w, "paths")], _field(w, "mode", str),
                        _owner(w.get("owner")), _field(w, "waiting", float, 0.0))
            for w in _objects(claims, "waiting")
        ],
    )
