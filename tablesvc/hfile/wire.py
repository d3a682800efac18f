"""The two variable-length integer encodings an HFile uses, and the little Protobuf it needs.

* Hadoop's ``WritableUtils`` vlong: the length of a root index entry's key, and the MVCC
  timestamp after each cell.  One byte for -112..127; otherwise the first byte says how many
  big-endian bytes follow and whether the value is negated.
* Protobuf base-128 varints and fields: the trailer (``TrailerProto``) and the file info
  (``InfoProto``) are Protobuf messages.  Only what those two messages use is read (varint and
  length-delimited fields; fixed 32/64-bit fields are skipped), so no Protobuf package is needed.

Every reader takes the bytes and a position and returns (value, next position); a value that runs
past the end raises ``WireError`` with the position, which the HFile reader turns into a
``CorruptHFileError`` naming the file and the absolute offset.
"""

from __future__ import annotations


class WireError(ValueError):
    def __init__(self, position: int, reason: str):
        super().__init__(reason)
        self.position = position
        self.reason = reason


def hadoop_vlong(data: bytes, pos: int) -> tuple[int, int]:
    """One ``WritableUtils.readVLong`` value at ``pos``."""
    if pos >= len(data):
        raise WireError(pos, "variable-length integer past the end")
    first = data[pos] - 256 if data[pos] > 127 else data[pos]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)   # bytes in all, this one included
    end = pos + size
    if end > len(data):
        raise WireError(pos, f"variable-length integer of {size} bytes past the end")
    value = int.from_bytes(data[pos + 1:end], "big")
    return (~value if negative else value), end


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """One Protobuf base-128 varint at ``pos``."""
    value = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise WireError(start, "protobuf varint past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError(start, "protobuf varint longer than 10 bytes")


def protobuf_fields(data: bytes, start: int = 0, end: int | None = None) -> list[tuple[int, int | bytes, int]]:
    """(field number, value, position) of each field of one message: an int for varint fields,
    the bytes of length-delimited ones; fixed-width fields are skipped (neither message has them)."""
    end = len(data) if end is None else end
    out: list[tuple[int, int | bytes, int]] = []
    pos = start
    while pos < end:
        at = pos
        tag, pos = varint(data, pos)
        number, kind = tag >> 3, tag & 7
        if number == 0:
            raise WireError(at, "protobuf field number 0")
        if kind == 0:
            value, pos = varint(data, pos)
            out.append((number, value, at))
        elif kind == 2:
            length, pos = varint(data, pos)
            if pos + length > end:
                raise WireError(at, f"protobuf field {number} of {length} bytes past the end of its message")
            out.append((number, bytes(data[pos:pos + length]), at))
            pos += length
        elif kind in (1, 5):
            pos += 8 if kind == 1 else 4
            if pos > end:
                raise WireError(at, f"protobuf field {number} past the end of its message")
        else:
            raise WireError(at, f"protobuf wire type {kind} of field {number} is not supported")
    if pos != end:
        raise WireError(pos, "protobuf message overruns its length")
    return out


def delimited_message(data: bytes, pos: int) -> tuple[int, int]:
    """(start, end) of a varint-length-prefixed message at ``pos`` (``writeDelimitedTo``)."""
    length, start = varint(data, pos)
    if start + length > len(data):
        raise WireError(pos, f"protobuf message of {length} bytes past the end")
    return start, start + length


# -- writing (the HFile writer) ------------------------------------------------------------------

def hadoop_vlong_bytes(value: int) -> bytes:
    """``WritableUtils.writeVLong``: the inverse of ``hadoop_vlong``."""
    if -112 <= value <= 127:
        return bytes([value & 0xFF])
    negative = value < 0
    magnitude = ~value if negative else value
    size = max(1, (magnitude.bit_length() + 7) // 8)
    if size > 8:
        raise ValueError(f"{value} does not fit a 64-bit vlong")
    first = (-120 if negative else -112) - size
    return bytes([first & 0xFF]) + magnitude.to_bytes(size, "big")


def varint_bytes(value: int) -> bytes:
    """A Protobuf base-128 varint; a negative value is written as its 64-bit two's complement
    (ten bytes), as Protobuf's Java ``writeUInt64NoTag`` writes -1."""
    if value < 0:
        value += 1 << 64
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{value} does not fit a 64-bit varint")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def protobuf_varint_field(number: int, value: int) -> bytes:
    return varint_bytes(number << 3) + varint_bytes(value)


def protobuf_bytes_field(number: int, value: bytes) -> bytes:
    return varint_bytes(number << 3 | 2) + varint_bytes(len(value)) + value
