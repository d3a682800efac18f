"""Warnings for ``hoodie.*`` keys that look like a misspelling of a key tablesvc reads.

tablesvc keeps keys it does not read and never interprets them, as Hudi ignores keys it does
not know, so a typo (``hoodie.cleaner.commits.retain``) would silently leave the default in
force.  A key gets a warning only when tablesvc does not read it *and* one key it reads is
nearly the same text (``difflib``, ratio >= ``CLOSE_ENOUGH``): a whole Hudi property file brought
along stays quiet, since Hudi's other keys (``hoodie.datasource.*``, ``hoodie.clean.async``) are
not that close to any key tablesvc reads.  ``HUDI_KEYS_NOT_READ`` lists the real Hudi keys
nearest to those tablesvc reads, so that none of them is ever taken for a typo.
"""

from __future__ import annotations

import difflib
from typing import Iterator, Mapping

from tablesvc.config.registry import REGISTRY

# Misspellings (a letter, a plural, a word of Hudi 1.x's renamed keys) score 0.93 and more against
# the key meant; the nearest real Hudi keys of other settings score 0.89 and less.
CLOSE_ENOUGH = 0.9

# Hudi keys of settings tablesvc does not implement, next to the keys it reads (Hudi's
# HoodieCleanConfig, HoodieCompactionConfig, HoodieStorageConfig and HoodieLockConfig).
HUDI_KEYS_NOT_READ = (
    "hoodie.clean.async", "hoodie.clean.trigger.strategy", "hoodie.clean.max.commits", "hoodie.clean.allow.multiple",
    "hoodie.cleaner.parallelism", "hoodie.cleaner.delete.bootstrap.base.file",
    "hoodie.compaction.logfile.size.threshold", "hoodie.compaction.logfile.num.threshold",
    "hoodie.compaction.strategy", "hoodie.compaction.daybased.target.partitions",
    "hoodie.compaction.partition.path.regex", "hoodie.compaction.sort.merge", "hoodie.compaction.external.sorter.type",
    "hoodie.parquet.small.file.limit", "hoodie.record.size.estimation.threshold",
    "hoodie.logfile.max.size", "hoodie.logfile.data.block.max.size", "hoodie.logfile.to.parquet.compression.ratio",
    "hoodie.write.lock.provider", "hoodie.write.lock.num_retries", "hoodie.write.lock.wait_time_ms_between_retry",
    "hoodie.write.lock.client.num_retries", "hoodie.write.lock.client.wait_time_ms_between_retry",
    "hoodie.write.lock.heartbeat_interval_ms",
    # HoodieMetadataConfig: the metadata table's own base files' bloom filter, next to the index's key
    "hoodie.metadata.bloom.filter.enable",
)


def closest_known_key(key: str) -> str | None:
    """The key tablesvc reads that ``key`` most likely misspells, or None (``key`` is read, is a
    listed Hudi key of another setting, is not a ``hoodie.*`` key, or is not close to any)."""
    if not key.startswith("hoodie.") or key in REGISTRY or key in HUDI_KEYS_NOT_READ:
        return None
    found = difflib.get_close_matches(key, REGISTRY, n=1, cutoff=CLOSE_ENOUGH)
    return found[0] if found else None


def misspelled_key_warnings(sources: Mapping[str, str], layers: tuple[str, ...]) -> Iterator[str]:
    """One line per key whose value came from one of ``layers`` (``--conf``, a ``--config``
    file's path; ``ServiceConfig.sources`` names them so) and that looks misspelled."""
    for key, where in sources.items():
        closest = closest_known_key(key) if where in layers else None
        if closest:
            given = f"--conf {key}" if where == "--conf" else f"{where}: {key}"
            yield (f"tablesvc: warning: {given} is not a key tablesvc reads (did you mean {closest}?); "
                   "its value is kept but not used")


__all__ = ["CLOSE_ENOUGH", "HUDI_KEYS_NOT_READ", "closest_known_key", "misspelled_key_warnings"]
