"""Which log blocks of a file slice take part in a read.

Log files are scanned in reader order and blocks in file order.  A data or delete
block is *used* unless one of these applies (checked in this order):

1. its ``INSTANT_TIME`` is after ``ctx.as_of`` (time travel)            -> skipped
2. a rollback command block (itself at or before ``as_of``) anywhere in the slice's
   log files targets its instant                                         -> rolled back
3. its instant is neither completed nor older than the active timeline -> skipped
   (a failed or still running write)
4. a *used* log-compacted block lists its instant in ``COMPACTED_BLOCK_TIMES``
   (transitively: a compaction of compactions lists the earlier compaction) -> superseded

A used log-compacted block of instant ``L`` is merged before the first block of an instant
later than ``L``, not at its file's place in completion-time order (``_in_merge_order``).

Corrupt spans (``_check_corrupt``) are ignored when nothing can be lost with them:

* a span too short to have held a block (a duplicated magic, a few stray bytes);
* a span directly followed by a rollback command block (the rollback discards the failed
  append, as Java does);
* a torn tail (no valid block after it in the file) of a failed append: its surviving
  ``INSTANT_TIME`` header names an instant that did not complete, was rolled back or is
  after ``as_of``, or no header survived at all (nothing says which write it was).

A torn tail whose header names a completed instant is a block that instant committed and
that is now damaged, and any other span would hide the blocks written after it: both raise
``CorruptLogBlockError`` naming the file and offset instead of dropping data silently (Java
skips them; hudi-rs trusts the lengths).
"""

from __future__ import annotations

from dataclasses import dataclass

from tablesvc.errors import CorruptLogBlockError, LogFormatError
from tablesvc.logformat import BlockType, LogBlock, LogFileContents, read_log_file
from tablesvc.merge.context import ReadContext
from timeline.storage import Storage


@dataclass(frozen=True)
class SelectedBlock:
    path: str
    block: LogBlock


@dataclass(frozen=True)
class BlockSelection:
    blocks: tuple[SelectedBlock, ...]        # data and delete blocks to merge, in reader order
    log_files: int = 0
    skipped: int = 0
    rolled_back: int = 0
    superseded: int = 0
    command_blocks: int = 0
    corrupt_spans: int = 0


def _check_corrupt(contents: LogFileContents, ctx: ReadContext, rollback_targets: set[str]) -> int:
    """Count the tolerable corrupt spans of one file; raise on one that may lose data (module doc)."""
    tolerated = 0
    for span in contents.corrupt:
        after = [b for b in contents.blocks if b.offset >= span.end]
        if not span.can_hold_block or (after and after[0].is_rollback):
            tolerated += 1
            continue
        if after:
            raise CorruptLogBlockError(f"{span.describe(contents.path)}; {len(after)} valid block(s) follow it "
                                       f"(first at offset {after[0].offset}), refusing to drop data")
        instant = span.instant_time
        if instant is not None and ctx.within_as_of(instant) and instant not in rollback_targets \
                and ctx.is_committed(instant):
            raise CorruptLogBlockError(f"{span.describe(contents.path)}; it is the last block of the file and "
                                       f"belongs to completed instant {instant}, refusing to drop its records")
        tolerated += 1
    return tolerated


def select_from_contents(contents: list[LogFileContents], ctx: ReadContext, *,
                         hfile_blocks: bool = False) -> BlockSelection:
    """Block selection over already framed log files (in reader order).  ``hfile_blocks``: the
    metadata table's reader (``tablesvc.metadata``) takes HFILE_DATA blocks; the data reader
    refuses them."""
    ordered: list[SelectedBlock] = []
    rollback_targets: set[str] = set()
    commands = 0
    for c in contents:
        for block in c.blocks:
            if block.block_type == BlockType.COMMAND:
                commands += 1
                if block.is_rollback and ctx.within_as_of(block.instant_time) and block.target_instant_time:
                    rollback_targets.add(block.target_instant_time)
                continue
            if block.block_type == BlockType.CDC_DATA or (block.block_type == BlockType.HFILE_DATA
                                                           and not hfile_blocks):
                raise LogFormatError(f"{c.path}: {block.block_type.name} block at offset {block.offset} "
                                     "is not supported by the merge reader")
            ordered.append(SelectedBlock(c.path, block))
    corrupt = sum(_check_corrupt(c, ctx, rollback_targets) for c in contents)

    skipped = rolled_back = 0
    valid: list[SelectedBlock] = []
    for sb in ordered:
        instant = sb.block.instant_time
        if not ctx.within_as_of(instant):
            skipped += 1
        elif instant in rollback_targets:
            rolled_back += 1
        elif not ctx.is_committed(instant):
            skipped += 1
        else:
            valid.append(sb)

    covered: set[str] = set()
    for sb in valid:
        covered.update(sb.block.compacted_block_times)
    superseded = 0
    used: list[SelectedBlock] = []
    for sb in valid:
        if sb.block.instant_time in covered:
            superseded += 1
        else:
            used.append(sb)
    return BlockSelection(_in_merge_order(used), len(contents), skipped, rolled_back, superseded, commands, corrupt)


def _in_merge_order(used: list[SelectedBlock]) -> tuple[SelectedBlock, ...]:
    """Reader order, except that a log-compacted block of instant ``L`` merges before the first
    block of a later instant.  v8 orders log files by completion time, so a log compaction that
    completes after writes requested after ``L`` would otherwise merge its (older) records after
    theirs and undo them on an ordering tie or after a delete.  Java orders log files by the
    instant in their name (``L``) and hudi-rs breaks ties by commit time: both keep the later
    writes.  (The planner refuses while a write is pending, so every block before ``L`` that ``L``
    does not list is from an earlier slice or a rolled-back write.)"""
    keys = []
    for i, sb in enumerate(used):
        at = i
        if sb.block.compacted_block_times:
            at = next((j for j in range(i) if used[j].block.instant_time > sb.block.instant_time), i)
        keys.append((at, 0 if at < i else 1, i))
    return tuple(used[k[2]] for k in sorted(keys))


def select_blocks(storage: Storage, log_paths: tuple[str, ...] | list[str], ctx: ReadContext) -> BlockSelection:
    """Read and frame each log file, then select its blocks (see the module doc)."""
    return select_from_contents([read_log_file(storage, p) for p in log_paths], ctx)


__all__ = ["BlockSelection", "SelectedBlock", "select_blocks", "select_from_contents"]
