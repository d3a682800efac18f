"""The keys of the metadata table's secondary indexes (``secondary_index_<name>``), as Apache Hudi
1.2 spells them (``SecondaryIndexKeyUtils``; checked on the Java-written fixtures).

A key is ``escape(value) + "$" + escape(record key)``: ``\\``, ``$`` and NUL are escaped with a
backslash, and a null value is written as one NUL character.  The key's file group is
``|javaHash(h) % n|`` where ``h`` is the whole key for index version V1 (table version 8) and the
escaped value with its ``$`` for V2 (table version 9), so V2 keeps every key of one value in one
file group.  What a write changes in an index: ``secondary_index``; which indexes a table has:
``secondary_index_definitions``.
"""

from __future__ import annotations

from tablesvc.errors import TablesvcError

SEPARATOR = "$"
ESCAPE = "\\"
NULL_TEXT = "\u0000"


def escape(text: str | None) -> str:
    if text is None:
        return NULL_TEXT
    return "".join(ESCAPE + c if c in (ESCAPE, SEPARATOR, NULL_TEXT) else c for c in text)


def unescape(text: str) -> str | None:
    if text == NULL_TEXT:
        return None
    out, pending = [], False
    for c in text:
        if pending:
            out.append(c)
            pending = False
        elif c == ESCAPE:
            pending = True
        else:
            out.append(c)
    return "".join(out)


def separator_position(key: str, source: str = "") -> int:
    """Where the value ends in ``key``; ``source`` (the file the key was read from) names it in
    the error (exit 1: a stored key without its separator is damaged)."""
    pending = False
    for i, c in enumerate(key):
        if c == ESCAPE and not pending:
            pending = True
            continue
        if c == SEPARATOR and not pending:
            return i
        pending = False
    where = f"{source}: " if source else ""
    raise TablesvcError(f"{where}secondary index key {key!r} has no unescaped {SEPARATOR!r}")


def secondary_index_key(value: str | None, record_key: str) -> str:
    return escape(value) + SEPARATOR + escape(record_key)


def split_key(key: str, source: str = "") -> tuple[str | None, str]:
    """(secondary value, record key) of a secondary-index key read from ``source`` (a file)."""
    at = separator_position(key, source)
    record_key = unescape(key[at + 1:])
    if record_key is None:
        where = f"{source}: " if source else ""
        raise TablesvcError(f"{where}secondary index key {key!r} has a null record key")
    return unescape(key[:at]), record_key


def group_key(key: str, version: int) -> str:
    """The text whose Java hash picks the key's file group: V2 hashes the escaped value and its
    separator (``getUnescapedSecondaryKeyPrefixFromSecondaryIndexKey``), V1 the whole key."""
    return key[:separator_position(key) + 1] if version >= 2 else key


__all__ = ["ESCAPE", "NULL_TEXT", "SEPARATOR", "escape", "group_key", "secondary_index_key", "separator_position",
           "split_key", "unescape"]
