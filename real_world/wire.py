"""A small, typed wire format for policy inference: msgpack with numpy arrays, plus stream framing.

Why not pickle: a policy server may be reachable from other machines, and unpickling runs arbitrary
code. Everything here decodes into plain data only, and every decoded message is checked against a
closed set of types before anyone sees it.

Values allowed in a message: ``dict`` with ``str`` keys, ``list`` (tuples encode as lists), ``str``,
``int``, ``float``, ``bool``, ``None`` and numpy arrays whose dtype is in :data:`ALLOWED_DTYPES`.
Raw ``bytes`` are not allowed outside arrays (send images as uint8 arrays). Numpy scalars encode as
the matching Python scalar, so they come back as ``int``/``float``/``bool``; wrap them in
``np.asarray`` to keep the dtype.

An array travels as msgpack ExtType :data:`ARRAY_EXT_CODE` whose data is itself a msgpack list
``[dtype_name, shape, raw_bytes]``; the raw bytes are little-endian, C order.

Framing over a stream socket: a 4-byte big-endian unsigned length, then the payload. The length is
checked against the reader's limit before a single payload byte is read, so a peer cannot make us
allocate or wait for a huge frame.
"""

from __future__ import annotations

import math
import socket
import struct
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

ARRAY_EXT_CODE = 1
# dtype name -> explicit little-endian numpy dtype (the byte order on the wire).
ALLOWED_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name).newbyteorder("<")
    for name in ("bool", "uint8", "int32", "int64", "float32", "float64")
}
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_DEPTH = 32
MAX_ARRAY_NDIM = 32
_HEADER = struct.Struct(">I")
HEADER_BYTES = _HEADER.size
MAX_FRAME_BYTES = 2**32 - 1


class WireError(ValueError):
    """A message that cannot be encoded or that failed validation on decode."""


class FrameTooLargeError(WireError):
    """The length prefix of an incoming frame exceeds the reader's limit; the payload is unread."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
        self.size = size
        self.max_bytes = max_bytes


class StreamClosedError(ConnectionError):
    """The peer closed the stream (cleanly between frames, or in the middle of one)."""


# ---------------------------------------------------------------------------------------------
# Encoding


def _encode_default(obj: Any) -> Any:
    """msgpack's hook for types it does not know: numpy arrays and scalars, and nothing else."""
    if isinstance(obj, np.ndarray):
        name = obj.dtype.name
        if name not in ALLOWED_DTYPES:
            raise WireError(f"array dtype {obj.dtype} is not allowed (allowed: {sorted(ALLOWED_DTYPES)})")
        arr = obj.astype(ALLOWED_DTYPES[name], copy=False)  # tobytes("C") handles any layout
        inner = msgpack.packb([name, list(arr.shape), arr.tobytes(order="C")], use_bin_type=True)
        return msgpack.ExtType(ARRAY_EXT_CODE, inner)
    if isinstance(obj, np.bool_ | np.integer | np.floating) and obj.dtype.name in ALLOWED_DTYPES:
        return obj.item()
    raise WireError(f"cannot encode value of type {type(obj).__name__}")


def encode(message: dict[str, Any], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> bytes:
    """Serialize a message dict; raises :class:`WireError` for disallowed values or an oversize result."""
    if not isinstance(message, dict):
        raise WireError(f"a message must be a dict, got {type(message).__name__}")
    _check_tree(message, 0, DEFAULT_MAX_DEPTH, _encodable_leaf)
    try:
        payload = msgpack.packb(message, default=_encode_default, use_bin_type=True, strict_types=False)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot encode message: {exc}") from exc
    if len(payload) > max_bytes:
        raise WireError(f"encoded message is {len(payload)} bytes, over the limit of {max_bytes}")
    return payload


def _check_tree(value: Any, depth: int, max_depth: int, check_leaf: Callable[[Any], None]) -> None:
    """Walk a message: nesting depth, str keys, and ``check_leaf`` on everything that is not a
    dict or a list."""
    if depth > max_depth:
        raise WireError(f"message nesting exceeds {max_depth} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise WireError(f"dict keys must be str, got {type(key).__name__}")
            _check_tree(item, depth + 1, max_depth, check_leaf)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_tree(item, depth + 1, max_depth, check_leaf)
    else:
        check_leaf(value)


def _encodable_leaf(value: Any) -> None:
    """Refuse what msgpack would silently accept but the decoder rejects."""
    if isinstance(value, bytes | bytearray | memoryview):
        raise WireError("raw bytes are not allowed in a message; send a uint8 array")


def _decoded_leaf(value: Any) -> None:
    if not isinstance(value, str | int | float | bool | np.ndarray) and value is not None:
        raise WireError(f"value of type {type(value).__name__} is not allowed in a message")


# ---------------------------------------------------------------------------------------------
# Decoding


def _decode_array(data: bytes) -> np.ndarray:
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise WireError(f"malformed array header: {exc}") from exc
    if not (isinstance(fields, list) and len(fields) == 3):
        raise WireError("array payload must be [dtype, shape, bytes]")
    name, shape, raw = fields
    if not isinstance(name, str) or name not in ALLOWED_DTYPES:
        raise WireError(f"array dtype {name!r} is not allowed (allowed: {sorted(ALLOWED_DTYPES)})")
    if not isinstance(shape, list) or len(shape) > MAX_ARRAY_NDIM:
        raise WireError(f"array shape must be a list of at most {MAX_ARRAY_NDIM} ints")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise WireError(f"array shape {shape!r} must hold non-negative ints")
    if not isinstance(raw, bytes):
        raise WireError("array data must be bytes")
    dtype = ALLOWED_DTYPES[name]
    expected = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if expected != len(raw):
        raise WireError(
            f"array of dtype {name} and shape {tuple(shape)} needs {expected} bytes, got {len(raw)}"
        )
    # Copy: the result owns writable memory and does not pin the whole message buffer.
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(shape)).astype(dtype.newbyteorder("="), copy=True)


def _ext_hook(code: int, data: bytes) -> np.ndarray:
    if code != ARRAY_EXT_CODE:
        raise WireError(f"unknown msgpack extension type {code}")
    return _decode_array(data)


def decode(
    payload: bytes, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> dict[str, Any]:
    """Parse and validate one message; anything unexpected raises :class:`WireError`."""
    if len(payload) > max_bytes:
        raise WireError(f"message of {len(payload)} bytes exceeds the limit of {max_bytes}")
    try:
        message = msgpack.unpackb(
            payload, raw=False, strict_map_key=True, use_list=True, ext_hook=_ext_hook, timestamp=0
        )
    except WireError:
        raise
    except Exception as exc:  # ExtraData, FormatError, StackError, UnicodeDecodeError, ValueError, ...
        raise WireError(f"malformed message: {type(exc).__name__}: {exc}") from exc
    if not isinstance(message, dict):
        raise WireError(f"a message must be a map, got {type(message).__name__}")
    _check_tree(message, 0, max_depth, _decoded_leaf)
    return message


# ---------------------------------------------------------------------------------------------
# Framing


def send_frame(sock: socket.socket, payload: bytes) -> None:
    """Write one length-prefixed frame (a single ``sendall`` so small frames go out in one segment)."""
    if len(payload) > MAX_FRAME_BYTES:
        raise WireError(f"payload of {len(payload)} bytes does not fit a 4-byte length prefix")
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int, allow_clean_eof: bool = False) -> bytes | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            if got == 0 and allow_clean_eof:
                return None
            raise StreamClosedError(f"stream closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket, max_bytes: int) -> bytes:
    """Read one frame. Raises :class:`FrameTooLargeError` (payload left unread) if the announced
    length exceeds ``max_bytes``, :class:`StreamClosedError` at end of stream, and lets socket
    timeouts (``TimeoutError``) through."""
    header = _recv_exact(sock, HEADER_BYTES, allow_clean_eof=True)
    if header is None:
        raise StreamClosedError("stream closed by peer")
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise FrameTooLargeError(size, max_bytes)
    return _recv_exact(sock, size) or b""
