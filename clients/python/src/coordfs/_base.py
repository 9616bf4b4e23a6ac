"""The root of the library's exceptions, apart so that every module may raise them."""


class CoordFSError(Exception):
    """Anything the library raises."""


class ProtocolError(CoordFSError):
    """The server said something this client does not understand."""
