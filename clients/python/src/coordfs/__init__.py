"""coordfs: the Python client of a coordfs mount's control socket.

    import coordfs

    with coordfs.connect("/mnt/shared") as conn:
        with conn.claim("/mnt/shared/counter", "write"):
            ...                                   # nobody else sees or changes the counter
        for event in conn.events("/mnt/shared/docs"):
            print(event)

`connect` finds the mount's socket from any path in it; `Connection.events` subscribes to
change events (`for` or `async for`), `Connection.present` registers a `Presenter`,
`Connection.claim` takes claims (`with` or `async with`) and `Connection.status` reads the
mount's status. Docs/PROTOCOL.md in the coordfs repository describes the protocol underneath.
"""

from ._locate import ATTRIBUTE, Location, locate
from ._paths import PathArg
from .connection import (
    PROTOCOL_VERSION,
    BrokenClaim,
    Claim,
    ClaimMode,
    Connection,
    PendingSubscription,
    ServerInfo,
    Subscription,
    aconnect,
    connect,
    connect_socket,
)
from .errors import (
    ClaimCancelledError,
    ClaimTimeoutError,
    ConflictError,
    ConnectError,
    ConnectionClosedError,
    CoordFSError,
    CutOffError,
    ErrorCode,
    InvalidPathError,
    LimitError,
    LocateError,
    NoSuchPathError,
    NotFoundError,
    NotInMountError,
    NotPermittedError,
    ProtocolError,
    ServerError,
)
from .events import EVENT_KINDS, Event, EventKind, Host, Item, Origin, Overflow, Resync
from .presenter import ASK_KINDS, AsyncPresenter, PresentedItem, Presenter, PresenterRegistration, Refuse
from .status import (
    ClaimHolder,
    ClaimOwner,
    ClaimWaiter,
    Status,
    StatusConnection,
    StatusPresenter,
    StatusPresenterRequest,
    StatusSubscriber,
)

__version__ = "0.1.0"

__all__ = [
    "ASK_KINDS",
    "ATTRIBUTE",
    "EVENT_KINDS",
    "PROTOCOL_VERSION",
    "AsyncPresenter",
    "BrokenClaim",
    "Claim",
    "ClaimCancelledError",
    "ClaimHolder",
    "ClaimMode",
    "ClaimOwner",
    "ClaimTimeoutError",
    "ClaimWaiter",
    "ConflictError",
    "ConnectError",
    "Connection",
    "ConnectionClosedError",
    "CoordFSError",
    "CutOffError",
    "ErrorCode",
    "Event",
    "EventKind",
    "Host",
    "InvalidPathError",
    "Item",
    "LimitError",
    "LocateError",
    "Location",
    "NoSuchPathError",
    "NotFoundError",
    "NotInMountError",
    "NotPermittedError",
    "Origin",
    "Overflow",
    "PathArg",
    "PendingSubscription",
    "PresentedItem",
    "Presenter",
    "PresenterRegistration",
    "ProtocolError",
    "Refuse",
    "Resync",
    "ServerError",
    "ServerInfo",
    "Status",
    "StatusConnection",
    "StatusPresenter",
    "StatusPresenterRequest",
    "StatusSubscriber",
    "Subscription",
    "__version__",
    "aconnect",
    "connect",
    "connect_socket",
    "locate",
]
