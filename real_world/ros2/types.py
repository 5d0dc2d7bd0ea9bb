"""cyclonedds IDL classes for ROS 2 messages, generated at run time from rosbags' definitions.

ROS 2 maps a message ``pkg/msg/Name`` to the DDS type ``pkg::msg::dds_::Name_`` (an IDL struct
with the same fields, nested messages as nested structs) and a topic ``/name`` to the DDS topic
``rt/name``; the payload is XCDR1 (classic little-endian CDR with the 4-byte encapsulation header
``00 01 00 00``), which is also what ``rosbags`` reads and writes. So instead of hand-writing an
IDL class per message, this module walks rosbags' field definitions and builds them.

Messages cross the API as rosbags message objects (the typestore's dataclasses, numeric arrays as
numpy arrays); ``to_idl`` and ``from_idl`` convert to and from the generated IDL objects. Byte-like
fields (``uint8``/``byte``/``char`` sequences and arrays, e.g. ``Image.data``) are ``bytes`` on the
IDL side so images do not go through a Python int per byte (see ``_bytes_for_byte_sequences``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from cyclonedds.idl import IdlStruct, make_idl_struct
from cyclonedds.idl import types as idl
from rosbags.interfaces import Nodetype
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.store import Typestore

DEFAULT_STORE = Stores.ROS2_HUMBLE

# ROS 2 base type -> cyclonedds annotation. ROS ``char`` is an unsigned 8-bit integer (rosidl maps
# it to IDL ``uint8``), not IDL ``char``; ``byte`` is IDL ``octet``.
_BASE_IDL: dict[str, Any] = {
    "bool": bool,
    "byte": idl.byte,
    "octet": idl.byte,
    "char": idl.uint8,
    "int8": idl.int8,
    "uint8": idl.uint8,
    "int16": idl.int16,
    "uint16": idl.uint16,
    "int32": idl.int32,
    "uint32": idl.uint32,
    "int64": idl.int64,
    "uint64": idl.uint64,
    "float32": idl.float32,
    "float64": idl.float64,
}
_BYTE_LIKE = {"uint8", "byte", "octet", "char"}
# rosbags' numpy dtypes for arrays of these (it reads ROS ``byte`` as signed, scalars included).
_NUMPY_DTYPE = {"bool": np.bool_, "byte": np.int8, "octet": np.int8, "char": np.uint8}

Converter = Callable[[Any], Any]


@cache
def typestore(store: Stores = DEFAULT_STORE) -> Typestore:
    """rosbags' typestore for one ROS 2 distribution (cached: building it parses every message)."""
    return get_typestore(store)


def dds_typename(msgtype: str) -> str:
    """``sensor_msgs/msg/JointState`` -> ``sensor_msgs::msg::dds_::JointState_`` (ROS 2's DDS name)."""
    *namespace, name = msgtype.split("/")
    return "::".join([*namespace, "dds_", f"{name}_"])


def dds_topic_name(ros_topic: str) -> str:
    """``/joint_states`` -> ``rt/joint_states``: the DDS topic ROS 2 uses for a (fully qualified) topic.

    A relative name (no leading slash) is taken as relative to the root namespace, as a node with
    no namespace would resolve it.
    """
    if not ros_topic or ros_topic.endswith("/") or "//" in ros_topic:
        raise ValueError(f"not a valid ROS topic name: {ros_topic!r}")
    return "rt/" + ros_topic.lstrip("/")


def ros_topic_name(dds_topic: str) -> str:
    """``rt/joint_states`` -> ``/joint_states``."""
    if not dds_topic.startswith("rt/"):
        raise ValueError(f"not a ROS 2 topic (no 'rt/' prefix): {dds_topic!r}")
    return "/" + dds_topic[3:]


def _unsupported(base: str) -> NotImplementedError:
    return NotImplementedError(f"ROS 2 base type {base!r} is not supported over DDS here")


class IdlTypes:
    """Generated IDL classes and converters for the messages of one rosbags typestore.

    Classes are built on first use (with their nested types) and cached, so each message type has
    exactly one IDL class per ``IdlTypes``.
    """

    def __init__(self, store: Typestore) -> None:
        self.store = store
        self._classes: dict[str, type[IdlStruct]] = {}
        self._to: dict[str, list[tuple[str, Converter]]] = {}
        self._from: dict[str, list[tuple[str, Converter]]] = {}
        self._lock = threading.RLock()

    def idl_class(self, msgtype: str) -> type[IdlStruct]:
        """The IDL struct class of ``msgtype`` (e.g. ``sensor_msgs/msg/Image``)."""
        with self._lock:
            if msgtype not in self._classes:
                self._build(msgtype)
            return self._classes[msgtype]

    def to_idl(self, msg: Any, msgtype: str | None = None) -> IdlStruct:
        """A rosbags message -> its IDL object (``msgtype`` defaults to the message's own)."""
        msgtype = msgtype or msg.__msgtype__
        cls = self.idl_class(msgtype)
        return cls(**{name: conv(getattr(msg, name)) for name, conv in self._to[msgtype]})

    def from_idl(self, obj: IdlStruct, msgtype: str) -> Any:
        """An IDL object of ``msgtype`` -> the rosbags message."""
        self.idl_class(msgtype)
        fields = {name: conv(getattr(obj, name)) for name, conv in self._from[msgtype]}
        return self.store.types[msgtype](**fields)

    def serialize(self, msg: Any, msgtype: str | None = None) -> bytes:
        """XCDR1 bytes, encapsulation header included, as rosbags writes them.

        On the wire cyclonedds (and ROS 2 over it) pads a sample with zeros to a multiple of 4.
        """
        return self.to_idl(msg, msgtype).serialize(use_version_2=False)

    def deserialize(self, data: bytes, msgtype: str) -> Any:
        """XCDR1 bytes (with the encapsulation header) -> the rosbags message."""
        return self.from_idl(self.idl_class(msgtype).deserialize(data), msgtype)

    def _build(self, msgtype: str) -> None:
        fields: dict[str, Any] = {}
        to_conv: list[tuple[str, Converter]] = []
        from_conv: list[tuple[str, Converter]] = []
        byte_sequences = []
        for name, desc in self.store.get_msgdef(msgtype).fields:
            annotation, to_idl, from_idl = self._field(desc)
            fields[name] = annotation
            to_conv.append((name, to_idl))
            from_conv.append((name, from_idl))
            if _is_byte_sequence(desc):
                byte_sequences.append(name)
        class_name = dds_typename(msgtype).rsplit("::", 1)[-1]
        cls = make_idl_struct(class_name, dds_typename(msgtype), fields)
        _bytes_for_byte_sequences(cls, byte_sequences)
        self._classes[msgtype] = cls
        self._to[msgtype] = to_conv
        self._from[msgtype] = from_conv

    def _field(self, desc: tuple[Any, Any]) -> tuple[Any, Converter, Converter]:
        """(IDL annotation, rosbags -> IDL converter, IDL -> rosbags converter) of one field."""
        kind, detail = desc
        if kind == Nodetype.BASE:
            return self._base(*detail)
        if kind == Nodetype.NAME:
            return self._nested(detail)
        sub, size = detail
        if kind == Nodetype.ARRAY:
            return self._collection(sub, length=size, bound=None)
        if kind == Nodetype.SEQUENCE:
            return self._collection(sub, length=None, bound=size or None)
        raise NotImplementedError(f"unknown rosbags field kind {kind!r}")

    def _base(self, base: str, bound: int) -> tuple[Any, Converter, Converter]:
        if base == "string":
            return (idl.bounded_str[bound] if bound else str), str, str
        if base not in _BASE_IDL:
            raise _unsupported(base)
        if base in ("byte", "octet"):
            # An octet on the wire (and in the type information), but rosbags reads and writes a
            # scalar ``byte`` as a signed 8-bit value: keep its convention on the message side.
            return _BASE_IDL[base], (lambda v: int(v) & 0xFF), (lambda v: v - 256 if v > 127 else v)
        python = bool if base == "bool" else float if base.startswith("float") else int
        return _BASE_IDL[base], python, python

    def _nested(self, msgtype: str) -> tuple[Any, Converter, Converter]:
        cls = self.idl_class(msgtype)
        return cls, (lambda m: self.to_idl(m, msgtype)), (lambda o: self.from_idl(o, msgtype))

    def _collection(
        self, sub: tuple[Any, Any], *, length: int | None, bound: int | None
    ) -> tuple[Any, Converter, Converter]:
        """A fixed array (``length``) or a sequence (``bound``, None when unbounded) of ``sub``."""

        def wrap(annotation: Any) -> Any:
            if length is not None:
                return idl.array[annotation, length]
            return idl.sequence[annotation, bound] if bound else idl.sequence[annotation]

        kind, detail = sub
        if kind == Nodetype.BASE and detail[0] != "string":
            base = detail[0]
            if base not in _BASE_IDL:
                raise _unsupported(base)
            dtype = np.dtype(_NUMPY_DTYPE.get(base, base))

            def from_list(values: Any) -> np.ndarray:
                return np.array(values, dtype=dtype)

            if base in _BYTE_LIKE and bound is None:
                # Fixed arrays: cyclonedds reads and writes ``array[uint8, N]`` as bytes itself.
                # Unbounded sequences: bytes once ``_bytes_for_byte_sequences`` swapped the codec,
                # else a list of ints; either converts back the same way.
                def to_bytes(value: Any) -> bytes:
                    if isinstance(value, bytes | bytearray | memoryview):
                        return bytes(value)
                    return np.asarray(value, dtype=dtype).tobytes()

                def from_bytes(data: bytes | list[int]) -> np.ndarray:
                    raw = data if isinstance(data, bytes) else np.asarray(data, np.uint8).tobytes()
                    return np.frombuffer(bytearray(raw), dtype=dtype)

                return wrap(_BASE_IDL[base]), to_bytes, from_bytes
            return wrap(_BASE_IDL[base]), (lambda v: np.asarray(v, dtype=dtype).tolist()), from_list
        element, to_element, from_element = self._field(sub)
        return (
            wrap(element),
            lambda values: [to_element(v) for v in values],
            lambda values: [from_element(v) for v in values],
        )


def _is_byte_sequence(desc: tuple[Any, Any]) -> bool:
    kind, detail = desc
    if kind != Nodetype.SEQUENCE:
        return False
    (sub_kind, sub_detail), bound = detail
    return sub_kind == Nodetype.BASE and sub_detail[0] in _BYTE_LIKE and not bound


def _bytes_for_byte_sequences(cls: type[IdlStruct], names: list[str]) -> None:
    """Make the unbounded byte sequences ``names`` of ``cls`` (de)serialize as ``bytes``.

    cyclonedds encodes a ``bytes`` field exactly like sequence<uint8> (length, then the bytes) but
    cannot describe it in the XTypes type information that every DDS topic carries. So such fields
    are declared ``sequence[uint8]`` (right type information) and only their codec is swapped for
    cyclonedds' bytes codec. This reaches into cyclonedds internals (checked against 11.0); if they
    look different, the fields stay lists of ints: slower, same bytes on the wire.
    """
    if not names:
        return
    try:
        from cyclonedds.idl._machinery import BytesMachine, PlainCdrV2SequenceOfPrimitiveMachine

        cls.__idl__.populate()
        for machine in (cls.__idl__.v1_machine, cls.__idl__.v2_machine):
            members = machine.members_machines
            for name in names:
                if type(members.get(name)) is PlainCdrV2SequenceOfPrimitiveMachine:
                    members[name] = BytesMachine()
    except (ImportError, AttributeError):
        return


@cache
def idl_types(store: Stores = DEFAULT_STORE) -> IdlTypes:
    """The shared ``IdlTypes`` of one ROS 2 distribution's typestore."""
    return IdlTypes(typestore(store))


def message(msgtype: str, **fields: Any) -> Any:
    """A rosbags message of the default typestore: ``message('std_msgs/msg/Bool', data=True)``."""
    return typestore().types[msgtype](**fields)
