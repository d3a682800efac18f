"""Block framing: turn blocks into bytes exactly as Hudi's Java writer does, and back.

Layout (big-endian, as Java's ``DataOutputStream``)::

    magic "#HUDI#" | int64 blockLength | int32 version=1 | int32 type
    | header map | int64 contentLength | content | footer map | int64 reversePointer

A map is ``int32 count`` then per entry ``int32 key, int32 length, UTF-8 bytes``.
``blockLength`` counts from the version through the reverse pointer; the reverse
pointer equals ``blockLength + 6`` (everything before it, magic included).

Reading is defensive: content bytes carry no checksum, so the frame itself is
what tells a complete block from a torn append.  Every frame is parsed field by
field and must end exactly where its length says; anything else becomes a
``CorruptBlock`` span and the scan resumes at the next magic.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from tablesvc.errors import CorruptLogBlockError, LogFormatError
from tablesvc.logformat.blocks import (
    LOG_FORMAT_VERSION,
    MAGIC,
    BlockType,
    CorruptBlock,
    Header,
    HeaderKey,
    LogBlock,
)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# version + type + header count + content length + footer count + reverse pointer
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8
_PREFIX = len(MAGIC) + 8
_BLOCK_TYPE_CODES = frozenset(int(t) for t in BlockType if t is not BlockType.CORRUPT)


def _encode_map(pairs: Header) -> bytes:
    parts = [_I32.pack(len(pairs))]
    for key, value in pairs:
        raw = value.encode("utf-8")
        parts.append(_I32.pack(int(key)))
        parts.append(_I32.pack(len(raw)))
        parts.append(raw)
    return b"".join(parts)


def encode_block(block: LogBlock) -> bytes:
    """The exact bytes Java's ``HoodieLogFormatWriter`` would append for ``block``."""
    if block.block_type == BlockType.CORRUPT:
        raise LogFormatError("a CORRUPT block is a reader artefact and cannot be written")
    before = b"".join((_I32.pack(LOG_FORMAT_VERSION), _I32.pack(int(block.block_type)),
                       _encode_map(block.header), _I64.pack(len(block.content))))
    footer = _encode_map(block.footer)
    block_length = len(before) + len(block.content) + len(footer) + 8
    # one join: the content (megabytes) is copied once
    return b"".join((MAGIC, _I64.pack(block_length), before, block.content, footer,
                     _I64.pack(block_length + len(MAGIC))))


def encode_blocks(blocks: Iterable[LogBlock]) -> bytes:
    """A whole log file: the blocks back to back, nothing after the last one."""
    return b"".join(encode_block(b) for b in blocks)


class _FrameError(Exception):
    """Internal: why the frame at some offset is not a valid block."""


def _read_map(data: bytes, pos: int, limit: int, what: str) -> tuple[Header, int]:
    if pos + 4 > limit:
        raise _FrameError(f"{what} count at offset {pos} runs past the frame end {limit}")
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    # Each entry needs at least 8 bytes; a bigger count can only be garbage.
    if count < 0 or count * 8 > limit - pos:
        raise _FrameError(f"{what} count {count} at offset {pos - 4} does not fit in the frame")
    pairs = []
    for index in range(count):
        if pos + 8 > limit:
            raise _FrameError(f"{what} entry {index} at offset {pos} runs past the frame end {limit}")
        key_code, length = struct.unpack_from(">ii", data, pos)
        try:
            key = HeaderKey(key_code)
        except ValueError:
            raise _FrameError(f"unknown {what} key code {key_code} at offset {pos}") from None
        pos += 8
        if length < 0 or pos + length > limit:
            raise _FrameError(f"{what} value length {length} at offset {pos - 4} runs past the frame end {limit}")
        try:
            value = data[pos:pos + length].decode("utf-8")
        except UnicodeDecodeError:
            raise _FrameError(f"{what} value for {key.name} at offset {pos} is not UTF-8") from None
        pairs.append((key, value))
        pos += length
    return tuple(pairs), pos


def _parse_frame(data: bytes, start: int) -> LogBlock:
    """Parse the block whose magic is at ``start``; ``_FrameError`` says why it is not one."""
    left = len(data) - start
    if left < _PREFIX:
        raise _FrameError(f"only {left} bytes left, a block needs at least {_PREFIX + _MIN_BLOCK_LENGTH}")
    (block_length,) = _I64.unpack_from(data, start + len(MAGIC))
    if block_length < _MIN_BLOCK_LENGTH:
        raise _FrameError(f"block length {block_length} is below the minimum {_MIN_BLOCK_LENGTH}")
    if block_length > left - _PREFIX:
        raise _FrameError(f"block length {block_length} runs past the end of the file "
                          f"({left - _PREFIX} bytes left after the length field)")
    end = start + _PREFIX + block_length
    pointer_at = end - 8
    version, type_code = struct.unpack_from(">ii", data, start + _PREFIX)
    if version != LOG_FORMAT_VERSION:
        raise _FrameError(f"log format version {version}, only {LOG_FORMAT_VERSION} is supported")
    try:
        block_type = BlockType(type_code)
    except ValueError:
        raise _FrameError(f"unknown block type code {type_code}") from None
    if block_type == BlockType.CORRUPT:
        raise _FrameError("block type CORRUPT is never written by a Hudi writer")
    pos = start + _PREFIX + 8
    header, pos = _read_map(data, pos, pointer_at, "header")
    if pos + 8 > pointer_at:
        raise _FrameError(f"content length at offset {pos} runs past the frame end {pointer_at}")
    (content_length,) = _I64.unpack_from(data, pos)
    pos += 8
    if content_length < 0 or content_length > pointer_at - pos:
        raise _FrameError(f"content length {content_length} at offset {pos - 8} runs past the frame end {pointer_at}")
    content = data[pos:pos + content_length]
    pos += content_length
    footer, pos = _read_map(data, pos, pointer_at, "footer")
    if pos != pointer_at:
        raise _FrameError(f"fields end at offset {pos} but the block length puts the reverse pointer at {pointer_at}")
    (reverse_pointer,) = _I64.unpack_from(data, pointer_at)
    if reverse_pointer != block_length + len(MAGIC):
        raise _FrameError(f"reverse pointer {reverse_pointer} at offset {pointer_at} does not match "
                          f"block length {block_length} (expected {block_length + len(MAGIC)})")
    return LogBlock(block_type, header, content, footer, offset=start)


def _peek_instant_time(data: bytes, start: int, limit: int) -> str | None:
    """INSTANT_TIME of the broken frame at ``start`` (its span ends at ``limit``) if that header
    entry survived, else None.

    Only the entries up to INSTANT_TIME need to be whole: writers put it first (ascending key
    codes), so a block torn inside its SCHEMA header or its content still names its instant.
    A frame whose magic alone is damaged still names it when the version and block type that
    follow are intact: without that, a complete block of a completed instant with six bad bytes
    in front would pass for the torn tail of a failed append and be dropped in silence."""
    pos = start + _PREFIX + 8  # past magic, block length, version and type
    if pos + 4 > limit:
        return None
    if not data.startswith(MAGIC, start):
        version, block_type = struct.unpack_from(">ii", data, start + _PREFIX)
        if version != LOG_FORMAT_VERSION or block_type not in _BLOCK_TYPE_CODES:
            return None
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    for _ in range(max(0, min(count, 64))):
        if pos + 8 > limit:
            return None
        key, length = struct.unpack_from(">ii", data, pos)
        pos += 8
        if length < 0 or pos + length > limit:
            return None
        if key == HeaderKey.INSTANT_TIME:
            try:
                return data[pos:pos + length].decode("utf-8")
            except UnicodeDecodeError:
                return None
        pos += length
    return None


def iter_blocks(data: bytes, path: str = "<bytes>", *,
                raise_on_corrupt: bool = False) -> Iterator[LogBlock | CorruptBlock]:
    """Blocks of a log file in order, with a ``CorruptBlock`` for every span that does not frame.

    After a bad span the scan resumes at the next ``#HUDI#`` (searching from one byte
    past the bad offset, so a duplicated magic costs only its six bytes).  Bytes that
    follow a valid block but do not start with the magic are reported as their own
    corrupt span; the valid block before them is kept, since its reverse pointer and
    field layout already prove it complete.

    With ``raise_on_corrupt`` the first bad span raises ``CorruptLogBlockError``
    naming ``path`` and the offset instead of being yielded.
    """
    pos, size = 0, len(data)
    while pos < size:
        if data.startswith(MAGIC, pos):
            try:
                block = _parse_frame(data, pos)
            except _FrameError as exc:
                reason = str(exc)
            else:
                yield block
                pos = block.end
                continue
        else:
            reason = f"expected block magic {MAGIC!r} at offset {pos}, found {bytes(data[pos:pos + len(MAGIC)])!r}"
        resume = data.find(MAGIC, pos + 1)
        if resume < 0:
            resume = size
        bad = CorruptBlock(pos, resume - pos, reason, _peek_instant_time(data, pos, resume))
        if raise_on_corrupt:
            raise CorruptLogBlockError(bad.describe(path))
        yield bad
        pos = resume
