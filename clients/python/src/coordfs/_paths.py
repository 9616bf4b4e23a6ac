"""Paths on the wire: mount-relative bytes, sent and read as Docs/PROTOCOL.md says.

A path travels as a JSON string when it is valid UTF-8 and otherwise as a readable stand-in
plus its exact bytes in base64 under the field's name with `Bytes` appended. Inside the
library every path is bytes; a caller's `str` is `os.fsencode`d on the way in, and what
comes back is given in the type the caller used (`os.fsdecode` for `str`, as `os.listdir`
does), so the bytes are always exact.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from typing import Any, AnyStr, Callable, Union

from ._base import ProtocolError

#: A path as `open()` takes it: text, bytes or a path-like object.
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def _as_bytes(path: bytes) -> bytes:
    return path


def converter(path: AnyStr | os.PathLike[AnyStr]) -> Callable[[bytes], AnyStr]:
    """How to give paths back to whoever gave `path`: bytes as they are, text decoded as
    `os.fsdecode` does (so `os.fsencode` gives the exact bytes back)."""
    if isinstance(os.fspath(path), str):
        return os.fsdecode  # type: ignore[return-value]  # AnyStr is str here
    return _as_bytes  # type: ignore[return-value]  # AnyStr is bytes here


def encode(field: str, path: bytes) -> dict[str, Any]:
    """The request fields for one path."""
    try:
        return {field: path.decode("utf-8")}
    except UnicodeDecodeError:
        return {field: path.decode("utf-8", "replace"), field + "Bytes": base64.b64encode(path).decode("ascii")}


def encode_list(field: str, paths: Sequence[bytes]) -> dict[str, Any]:
    """The request fields for a list of paths: the bytes of every one of them beside the
    text when any is not UTF-8."""
    texts = []
    exact = True
    for path in paths:
        try:
            texts.append(path.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(path.decode("utf-8", "replace"))
            exact = False
    fields: dict[str, Any] = {field: texts}
    if not exact:
        fields[field + "Bytes"] = [base64.b64encode(path).decode("ascii") for path in paths]
    return fields


def _decode_one(value: Any, encoded: bool, field: str) -> bytes:
    if not isinstance(value, str):
        raise ProtocolError(f"{field} is not a string: {value!r}")
    try:
        return base64.b64decode(value, validate=True) if encoded else value.encode("utf-8")
    except (binascii.Error, UnicodeEncodeError) as error:
        raise ProtocolError(f"{field} is not a path: {value!r}") from error


def decode(message: Mapping[str, Any], field: str) -> bytes:
    """The exact bytes of a path field: its `Bytes` sibling when there, else its text."""
    if field + "Bytes" in message:
        return _decode_one(message[field + "Bytes"], True, field + "Bytes")
    if field not in message:
        raise ProtocolError(f"no {field} in {dict(message)!r}")
    return _decode_one(message[field], False, field)


def decode_optional(message: Mapping[str, Any], field: str) -> bytes | None:
    if field not in message and field + "Bytes" not in message:
        return None
    return decode(message, field)


def decode_list(message: Mapping[str, Any], field: str) -> list[bytes]:
    """The exact bytes of every path of a list field (absent: none)."""
    encoded = field + "Bytes" in message
    values = message.get(field + "Bytes" if encoded else field, [])
    if not isinstance(values, list):
        raise ProtocolError(f"{field} is not a list: {values!r}")
    return [_decode_one(value, encoded, field) for value in values]
