"""Typed state areas: an operator declares its state once, as named areas of one ordered store.

    LAYOUT = StateLayout("interval join", 1, (
        Area("watermark", b"\\x00watermark", (), Ints(1)),
        Area("left", b"L", (("bucket", TIMESTAMP), ("kind", BYTE), ("version", INT)), RAW),
    ))
    LAYOUT["left"].key(bucket, b"m", version)    # b"L" | encode_timestamp(bucket) | b"m" | encode_int(version)

An :class:`Area` holds the keys that start with its ``prefix``: ``prefix | part 1 | part 2 | ...``,
each part encoded by its :class:`Part` codec (the order-preserving codecs of
:mod:`streamjoin.statestore.codecs`), each value by the area's value codec. Byte order within an
area is the order of the parts' values, part by part; a key made of the leading parts only (a *key
prefix*) is a prefix of every key that extends it, so the keys under it form one ``[start, end)``
range, which :meth:`Area.range` gives. A key holds all of an area's parts or a leading run of them.

A :class:`StateLayout` names an operator's areas and the version of their format; the operator puts
that version into its definition, so a checkpoint written in another format is refused. When a
layout is declared it refuses an area whose prefix starts another's, so every key belongs to at most
one area and the range of one area never covers another's keys.

Operators build keys, ranges and scans through their areas and never concatenate prefixes. Paths that
encode keys column-wise (many rows at once) hand an area parts that are already encoded
(:meth:`Area.join`, :meth:`Area.keys`); the bytes are the same as :meth:`Area.key` makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.statestore.base import KeyValue, Store, prefix_end
from streamjoin.statestore.binary_concat import concat_binary
from streamjoin.statestore.codecs import (
    decode_int,
    decode_timestamp,
    decode_uint32,
    encode_int,
    encode_timestamp,
    encode_uint32,
    pack,
    unpack,
)

__all__ = [
    "Part", "INT", "TIMESTAMP", "UINT32", "BYTE", "PACKED",
    "ValueCodec", "Raw", "Ints", "Packed", "ArrowIpc", "Int64s", "RAW", "PACKED_VALUE", "ARROW",
    "Area", "StateLayout",
]


# -- key parts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """How one part of a key is encoded: ``width`` bytes, or (None) the rest of the key."""

    name: str
    width: int | None
    encode: Callable[[Any], bytes] = field(repr=False)
    decode: Callable[[bytes], Any] = field(repr=False)


def _one_byte(value: bytes) -> bytes:
    if not isinstance(value, bytes) or len(value) != 1:
        raise ValueError(f"a one-byte key part takes one byte, not {value!r}")
    return value


def _pack_tuple(values: Sequence[Any]) -> bytes:
    return pack(*values)


#: a signed 64-bit integer (:func:`encode_int`)
INT = Part("int", 8, encode_int, decode_int)
#: microseconds since the epoch (:func:`encode_timestamp`)
TIMESTAMP = Part("timestamp", 8, encode_timestamp, decode_timestamp)
#: an unsigned 32-bit counter (:func:`encode_uint32`)
UINT32 = Part("uint32", 4, encode_uint32, decode_uint32)
#: one byte telling kinds of entries apart, given as ``bytes`` (``b"m"``)
BYTE = Part("byte", 1, _one_byte, bytes)
#: the rest of the key: a tuple of values encoded by :func:`pack`. Since ``pack`` of a tuple is the
#: concatenation of ``pack`` of its parts, a leading run of the values is a key prefix.
PACKED = Part("packed", None, _pack_tuple, unpack)


# -- value codecs ------------------------------------------------------------------------------


class ValueCodec(Protocol):
    """How an area's values are encoded."""

    def encode(self, value: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


@dataclass(frozen=True)
class Raw:
    """Values are bytes the operator encodes itself (the area's docstring says how)."""

    def encode(self, value: bytes) -> bytes:
        return value

    def decode(self, data: bytes) -> bytes:
        return data


@dataclass(frozen=True)
class Ints:
    """A fixed number of signed 64-bit integers, each :func:`encode_int`, one after the other."""

    count: int

    def encode(self, value: Sequence[int]) -> bytes:
        if len(value) != self.count:
            raise ValueError(f"this value holds {self.count} integers, not {len(value)}")
        return b"".join(encode_int(v) for v in value)

    def decode(self, data: bytes) -> tuple[int, ...]:
        return tuple(decode_int(data[i : i + 8]) for i in range(0, 8 * self.count, 8))


@dataclass(frozen=True)
class Packed:
    """A tuple of values encoded by :func:`pack`."""

    def encode(self, value: Sequence[Any]) -> bytes:
        return pack(*value)

    def decode(self, data: bytes) -> tuple[Any, ...]:
        return unpack(data)


@dataclass(frozen=True)
class ArrowIpc:
    """An Arrow table as one Arrow IPC stream (schema, then its record batches)."""

    def encode(self, value: pa.Table, compression: str | None = None) -> bytes:
        """``value`` as a stream; ``compression`` (None, "lz4", "zstd") compresses its buffers."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, value.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
            writer.write_table(value)
        return sink.getvalue().to_pybytes()

    def decode(self, data: bytes) -> pa.Table:
        return pa.ipc.open_stream(data).read_all()


@dataclass(frozen=True)
class Int64s:
    """An array of signed 64-bit integers, 8 bytes little-endian each (numpy's ``<i8``)."""

    def encode(self, value: np.ndarray) -> bytes:
        return np.asarray(value).astype("<i8").tobytes()

    def decode(self, data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype="<i8")


RAW, PACKED_VALUE, ARROW = Raw(), Packed(), ArrowIpc()


# -- areas -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Area:
    """The keys of a store that start with ``prefix``, followed by ``parts`` (name, codec) in order;
    values encoded by ``value``. An area without parts is a single entry, under ``prefix``."""

    name: str
    prefix: bytes
    parts: tuple[tuple[str, Part], ...] = ()
    value: ValueCodec = RAW

    def __post_init__(self) -> None:
        if not self.prefix or prefix_end(self.prefix) is None:
            raise JoinDefinitionError(
                f"state area {self.name!r} has prefix {self.prefix!r}; give it a prefix that is not "
                "empty and not made only of 0xff bytes, so that its keys form a bounded range")
        names = [name for name, _ in self.parts]
        if len(set(names)) != len(names):
            raise JoinDefinitionError(f"state area {self.name!r} names a key part twice: {names}")
        if any(part.width is None for _, part in self.parts[:-1]):
            raise JoinDefinitionError(
                f"state area {self.name!r}: only its last key part may take the rest of the key")

    @property
    def end(self) -> bytes:
        """The smallest key above every key of this area."""
        return prefix_end(self.prefix)  # type: ignore[return-value]  # checked at declaration

    def key(self, *values: Any) -> bytes:
        """The key of ``values`` (its parts' values, in order; a leading run makes a key prefix)."""
        if len(values) > len(self.parts):
            raise ValueError(f"state area {self.name!r} has {len(self.parts)} key parts, not {len(values)}")
        return self.prefix + b"".join(part.encode(v) for (_, part), v in zip(self.parts, values))

    def join(self, *encoded: bytes) -> bytes:
        """The key of parts already encoded (each the bytes its codec makes, as column-wise encoders
        give them): the same bytes as :meth:`key` of their values."""
        return self.prefix + b"".join(encoded)

    def keys(self, encoded: Iterable[bytes]) -> list[bytes]:
        """:meth:`join` of each of ``encoded`` (the encoded leading parts of one key each)."""
        prefix = self.prefix
        return [prefix + e for e in encoded]

    def key_column(self, *encoded: pa.Array) -> pa.Array:
        """:meth:`join` row by row of binary columns (the encoded leading parts of one key a row),
        as a binary column, in Arrow."""
        return concat_binary(self.prefix, *encoded)

    def decode(self, key: bytes) -> tuple[Any, ...]:
        """The values of the parts ``key`` holds (a key of this area, or a key prefix)."""
        if not key.startswith(self.prefix):
            raise ValueError(f"key {key!r} is not in state area {self.name!r} (prefix {self.prefix!r})")
        values, pos = [], len(self.prefix)
        for _, part in self.parts:
            if pos >= len(key):
                break
            end = len(key) if part.width is None else pos + part.width
            if end > len(key):
                raise ValueError(f"key {key!r} of state area {self.name!r} ends inside its {part.name} part")
            values.append(part.decode(key[pos:end]))
            pos = end
        if pos != len(key):
            raise ValueError(f"key {key!r} of state area {self.name!r} has bytes after its last part")
        return tuple(values)

    def offset(self, name: str) -> slice:
        """Where part ``name`` lies in every key that holds it (the parts before it have fixed
        widths): for slicing keys in a loop without decoding them."""
        pos = len(self.prefix)
        for part_name, part in self.parts:
            if part_name == name:
                return slice(pos, None if part.width is None else pos + part.width)
            if part.width is None:
                break
            pos += part.width
        raise ValueError(f"state area {self.name!r} has no fixed place for a key part {name!r}")

    # -- ranges: [start, end) ------------------------------------------------------------------

    def range(self, *values: Any) -> tuple[bytes, bytes]:
        """The keys under the key prefix ``values`` (none: the whole area)."""
        if not values:
            return self.prefix, self.end
        start = self.key(*values)
        return start, prefix_end(start) or self.end

    def span(self, low: Sequence[Any] | None, high: Sequence[Any] | None) -> tuple[bytes, bytes]:
        """The keys from key prefix ``low`` through key prefix ``high``, both included (None: the
        area's start, its end)."""
        start = self.prefix if low is None else self.key(*low)
        return start, self.range(*high)[1] if high is not None else self.end

    def below(self, *values: Any) -> tuple[bytes, bytes]:
        """The keys that sort before the key prefix ``values``."""
        return self.prefix, self.key(*values)

    def through(self, key: bytes) -> tuple[bytes, bytes]:
        """The keys from the area's start up to and including ``key``."""
        return self.prefix, key + b"\x00"

    # -- reads and writes ----------------------------------------------------------------------

    def scan(self, store: Store, *values: Any, reverse: bool = False) -> Iterator[KeyValue]:
        """The entries (values encoded) under the key prefix ``values`` (none: the area), in key order."""
        return store.scan(*self.range(*values), reverse=reverse)

    def scan_span(self, store: Store, low: Sequence[Any] | None, high: Sequence[Any] | None) -> Iterator[KeyValue]:
        """The entries (values encoded) of :meth:`span`, in key order."""
        return store.scan(*self.span(low, high))

    def scan_under(self, store: Store, key_prefix: bytes) -> Iterator[KeyValue]:
        """(the rest of the key after ``key_prefix``, encoded value) of the entries under an
        encoded key prefix (from :meth:`join`), in key order."""
        cut = len(key_prefix)
        for key, value in store.scan(key_prefix, prefix_end(key_prefix) or self.end):
            yield key[cut:], value

    def scan_under_many(self, store: Store, key_prefixes: Sequence[bytes]) -> list[dict[bytes, bytes]]:
        """For each encoded key prefix (from :meth:`join`), its entries as {the rest of the key:
        encoded value}, in key order: one batched seek (:meth:`Store.scan_prefixes`) for all."""
        out = []
        for key_prefix, entries in zip(key_prefixes, store.scan_prefixes(key_prefixes)):
            cut = len(key_prefix)
            out.append({key[cut:]: value for key, value in entries})
        return out

    def get(self, store: Store, *values: Any) -> Any | None:
        """The decoded value under the key of ``values``, or None when there is none."""
        data = store.get(self.key(*values))
        return None if data is None else self.value.decode(data)

    def put(self, value: Any, *values: Any) -> KeyValue:
        """The put storing ``value`` (encoded by the area's codec) under the key of ``values``."""
        return self.key(*values), self.value.encode(value)


@dataclass(frozen=True)
class StateLayout:
    """An operator's state: its areas, and ``version``, the version of their byte format.

    Raises :class:`JoinDefinitionError` when two areas share a name or one's prefix starts another's.
    """

    name: str
    version: int
    areas: tuple[Area, ...]

    def __post_init__(self) -> None:
        names = [a.name for a in self.areas]
        if len(set(names)) != len(names):
            raise JoinDefinitionError(f"state layout {self.name!r} names an area twice: {names}")
        for a in self.areas:
            for b in self.areas:
                if a is not b and b.prefix.startswith(a.prefix):
                    raise JoinDefinitionError(
                        f"state layout {self.name!r}: the prefix {a.prefix!r} of area {a.name!r} starts the "
                        f"prefix {b.prefix!r} of area {b.name!r}, so their keys would mix; give one of them "
                        "a prefix that neither starts nor extends the other's")

    def __getitem__(self, name: str) -> Area:
        for area in self.areas:
            if area.name == name:
                return area
        raise KeyError(f"state layout {self.name!r} has no area {name!r}; it has {[a.name for a in self.areas]}")

    def prefixed(self, prefix: bytes) -> StateLayout:
        """This layout with ``prefix`` before every area's prefix (the same version): its areas
        beside another layout's in one store, e.g. two operators' steps run in one stage."""
        return StateLayout(self.name, self.version, tuple(replace(a, prefix=prefix + a.prefix) for a in self.areas))

    def area_of(self, key: bytes) -> Area | None:
        """The area ``key`` belongs to (None: a key of no area)."""
        return next((a for a in self.areas if key.startswith(a.prefix)), None)
