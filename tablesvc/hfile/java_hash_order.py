"""The order in which a ``java.util.HashMap<String, ...>`` hands back its keys.

Hudi's native HFile writer keeps the file info and the meta blocks in plain HashMaps and writes
them in iteration order, so byte-equal output needs that order.  It is deterministic for String
keys (``String.hashCode`` is specified): a key lives in bucket ``spread(hash) & (capacity - 1)``,
buckets are visited in ascending index, and inside a bucket keys keep insertion order (a new key
goes to the tail; a resize splits a bucket in two without reordering).  The table starts at 16
buckets and doubles when it holds more than three quarters of its capacity, or when one bucket's
chain reaches 8 keys while the table is smaller than 64 buckets (instead of turning that bucket
into a tree).  Tree bins (8+ colliding keys in a table of 64+) are not modelled: ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable

_INITIAL_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def java_string_hash(text: str) -> int:
    """``String.hashCode``: over UTF-16 code units, 32-bit signed overflow."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    return (h ^ (h >> 16)) & 0xFFFFFFFF


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The distinct ``keys``, put in this order, in the order the HashMap iterates them (a key
    put again keeps its first place, as ``put`` replaces the value in place)."""
    order: list[str] = []
    for key in keys:
        if key not in order:
            order.append(key)
    capacity = _INITIAL_CAPACITY
    hashes = {k: _spread(java_string_hash(k)) for k in order}
    # replay the puts: only the capacity at the end matters for the order, but it depends on
    # when resizes happened (size and chain length at each put)
    for count in range(1, len(order) + 1):
        placed = order[:count]
        newest = placed[-1]
        chain = sum(1 for k in placed if hashes[k] & (capacity - 1) == hashes[newest] & (capacity - 1))
        if chain > _TREEIFY_THRESHOLD:      # the put that makes a chain of 9 asks for a tree bin
            if capacity >= _MIN_TREEIFY_CAPACITY:
                raise ValueError(f"{chain} keys share one HashMap bucket: Java keeps them in a tree bin, "
                                 "whose order is not modelled")
            capacity *= 2
        if count > capacity * 3 // 4:
            capacity *= 2
    slot = {k: hashes[k] & (capacity - 1) for k in order}
    return sorted(order, key=lambda k: (slot[k], order.index(k)))
