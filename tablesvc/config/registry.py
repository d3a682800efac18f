"""One typed registry of configuration keys, with Hudi's own key names.

Each key knows its type, default and documentation; values are parsed once and
a malformed value is a ``ConfigError`` naming the key.  Keys tablesvc does not
know are kept as strings (users bring whole Hudi property files) but never
interpreted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from tablesvc.errors import ConfigError


def _parse_bool(key: str, raw: str) -> bool:
    v = str(raw).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {raw!r}")


def _parse_number(kind: type, minimum: float | None = None) -> Callable[[str, str], Any]:
    label = "an integer" if kind is int else "a number"

    def parse(key: str, raw: str) -> Any:
        try:
            value = kind(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{key}: expected {label}, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"{key}: must be >= {minimum}, got {value}")
        return value
    return parse


def _parse_int(minimum: int | None = None) -> Callable[[str, str], int]:
    return _parse_number(int, minimum)


def _parse_float(minimum: float | None = None) -> Callable[[str, str], float]:
    return _parse_number(float, minimum)


def _parse_text(key: str, raw: str) -> str:
    return str(raw).strip()


def _parse_choice(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        v = str(raw).strip().upper()
        if v not in choices:
            raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {raw!r}")
        return v
    return parse


def _parse_lock_dir(key: str, raw: str) -> str:
    """A folder as Java's provider would name it: empty (the default), or an absolute local path,
    ``file://`` or not (a relative one would resolve against each process's working folder)."""
    v = str(raw).strip()
    local = v[len("file://"):] if v.startswith("file://") else v
    if v and not local.startswith("/"):
        raise ConfigError(f"{key}: expected an absolute folder path (or file:///...), got {raw!r}")
    return local.rstrip("/") or ("/" if local else "")


class CleanerPolicy(enum.Enum):
    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"


# hoodie.compact.inline.trigger.strategy (tablesvc/services/compaction/triggers.py says what each means)
COMPACTION_TRIGGER_STRATEGIES = ("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED", "NUM_AND_TIME",
                                 "NUM_OR_TIME")


@dataclass(frozen=True)
class ConfigKey:
    key: str
    default: Any
    parse: Callable[[str, str], Any]
    doc: str

    def value(self, raw: Any) -> Any:
        return self.parse(self.key, raw)


_KEYS = [
    # compaction
    ConfigKey("hoodie.compact.inline", False, _parse_bool, "Run compaction after each write when due."),
    ConfigKey("hoodie.compact.schedule.inline", False, _parse_bool,
              "Schedule compaction after each write when due; execute it elsewhere."),
    ConfigKey("hoodie.compact.inline.trigger.strategy", COMPACTION_TRIGGER_STRATEGIES[0],
              _parse_choice(*COMPACTION_TRIGGER_STRATEGIES), "When compaction is due."),
    ConfigKey("hoodie.compact.inline.max.delta.commits", 5, _parse_int(1),
              "Delta commits since the last compaction that make one due."),
    ConfigKey("hoodie.compact.inline.max.delta.seconds", 3600, _parse_int(0),
              "Seconds since the last compaction that make one due."),
    ConfigKey("hoodie.compaction.target.io", 512_000, _parse_int(1),
              "MB of log and base files one compaction plan may read and write (largest logs first)."),
    # log compaction
    ConfigKey("hoodie.log.compaction.inline", False, _parse_bool, "Run log compaction after each write when due."),
    ConfigKey("hoodie.log.compaction.enable", False, _parse_bool,
              "Let the async runner (tablesvc run) schedule log compactions when due."),
    ConfigKey("hoodie.log.compaction.blocks.threshold", 5, _parse_int(2),
              "Log blocks in a file slice that make log compaction due."),
    # cleaning
    ConfigKey("hoodie.clean.automatic", True, _parse_bool, "Clean after each write when due."),
    ConfigKey("hoodie.cleaner.policy", CleanerPolicy.KEEP_LATEST_COMMITS.value,
              _parse_choice(*(p.value for p in CleanerPolicy)), "Which file slices cleaning keeps."),
    ConfigKey("hoodie.cleaner.commits.retained", 10, _parse_int(1), "KEEP_LATEST_COMMITS: commits kept."),
    ConfigKey("hoodie.cleaner.fileversions.retained", 3, _parse_int(1),
              "KEEP_LATEST_FILE_VERSIONS: slices kept per file group."),
    ConfigKey("hoodie.cleaner.hours.retained", 24, _parse_float(0), "KEEP_LATEST_BY_HOURS: hours kept."),
    ConfigKey("hoodie.cleaner.incremental.mode", True, _parse_bool, "Plan cleaning from the last clean on."),
    ConfigKey("hoodie.metadata.derive.from.datatable.clean.policy", True, _parse_bool,
              "The metadata table's own clean (inside each commit): derive its policy from the table's cleaner "
              "keys as Hudi 1.2 does (commits: max(20, 1.2 x retained); versions or hours: ceil(1.2 x n)); "
              "false: keep 2 file versions.  Read from the committing command's configuration (--conf too)."),
    ConfigKey("hoodie.metadata.log.compaction.enable", False, _parse_bool,
              "The metadata table's own log compaction (inside each commit, after its clean and compaction): "
              "when no metadata compaction ran, merge the log blocks of each metadata file slice with at least "
              "hoodie.metadata.log.compaction.blocks.threshold blocks into one, as Hudi 1.2 does (default off, "
              "as Java's).  Read from the committing command's configuration, --conf too (docs/metadata-table.md)."),
    ConfigKey("hoodie.metadata.log.compaction.blocks.threshold", 5, _parse_int(1),
              "The metadata table's log compaction: delta commits since its last compaction and log compaction "
              "that make one due, and the log files or valid blocks a slice needs to be taken (Java's default 5)."),
    ConfigKey("hoodie.metadata.compact.max.delta.commits", 10, _parse_int(1),
              "The metadata table's own compaction (inside each commit): delta commits since its last "
              "compaction that make one due (Java's default 10).  Read from the committing command's "
              "configuration, --conf too (docs/metadata-table.md)."),
    # reads
    ConfigKey("hoodie.metadata.enable", True, _parse_bool,
              "Readers: list a table's files through its metadata table (the files partition) when "
              "hoodie.table.metadata.partitions names files; false lists storage (docs/metadata-table.md). "
              "Commands that change the table: false drops the metadata table first, as Java's writer does "
              "(docs/metadata-table.md, 'Refusals and opt-outs').  tablesvc init: build a metadata table "
              "(unset: yes on table versions 8 and 9, no on 6; true with version 6 is refused)."),
    # Dropping metadata-table partitions (Java's HoodieMetadataConfig keys and defaults).  tablesvc
    # drops a partition only when a key below is SET to false (any layer but the default): with the
    # default it refuses instead, where a default Java 1.2 writer would drop silently.
    ConfigKey("hoodie.metadata.auto.delete.partitions", True, _parse_bool,
              "Let the drops below (and hoodie.metadata.enable=false) happen; false: tablesvc refuses instead."),
    ConfigKey("hoodie.metadata.index.column.stats.enable", True, _parse_bool,
              "Set to false: drop the column_stats and partition_stats partitions and column_stats' index "
              "definition before changing the table (Java Spark writers default to true)."),
    ConfigKey("hoodie.metadata.index.bloom.filter.enable", False, _parse_bool,
              "Set to false: drop the bloom_filters partition before changing the table."),
    ConfigKey("hoodie.metadata.global.record.level.index.enable", False, _parse_bool,
              "With hoodie.metadata.record.level.index.enable, set to false: drop the record_index partition "
              "(alias hoodie.metadata.record.index.enable)."),
    ConfigKey("hoodie.metadata.record.index.enable", False, _parse_bool,
              "Hudi's older name of hoodie.metadata.global.record.level.index.enable (used when that is not set)."),
    ConfigKey("hoodie.metadata.record.level.index.enable", False, _parse_bool,
              "The partitioned record index; record_index is dropped only when this and the global one are false."),
    # writes
    ConfigKey("hoodie.logfile.data.block.format", "avro",
              lambda key, raw: _parse_choice("AVRO", "PARQUET")(key, raw).lower(),
              "Data block format of the log files a write appends: avro (Hudi's default) or parquet "
              "(faster to write and to read; docs/performance.md)."),
    # failed writes, heartbeats, locks
    ConfigKey("hoodie.cleaner.policy.failed.writes", "EAGER", _parse_choice("EAGER", "LAZY", "NEVER"),
              "When failed writes are rolled back."),
    ConfigKey("hoodie.client.heartbeat.interval_in_ms", 60_000, _parse_int(1), "Writer heartbeat period."),
    ConfigKey("hoodie.client.heartbeat.tolerable.misses", 2, _parse_int(0),
              "Missed heartbeats before a writer counts as dead."),
    ConfigKey("hoodie.write.lock.wait_time_ms", 30_000, _parse_int(0), "How long to wait for the table lock."),
    # The table lock is Java Hudi's FileSystemBasedLockProvider file (timeline/lock.py); table-wide:
    # read from the table's .hoodie/tablesvc.yaml only, so every tablesvc process agrees (TABLE_WIDE_KEYS).
    ConfigKey("hoodie.write.lock.filesystem.path", "", _parse_lock_dir,
              "Folder of the table lock file `lock` (absolute; empty: <table>/.hoodie), as Java writers set it."),
    ConfigKey("hoodie.write.lock.filesystem.expire", 0, _parse_int(0),
              "Minutes after which a Java writer's lock file counts as abandoned (by its mtime); 0: never."),
    # The table lock on an object store is Hudi's storage-based lock (timeline/storage_lock.py, RFC-91);
    # tablesvc's defaults are shorter than Java's (300 and 30): its holds last milliseconds to seconds.
    ConfigKey("hoodie.write.lock.storage.validity.timeout.secs", 20, _parse_int(10),
              "Object stores: how long the table lock object stays valid unless renewed (validUntil = now + this); "
              "a killed holder blocks others this long at most. At least 10 x the renew interval."),
    ConfigKey("hoodie.write.lock.storage.renew.interval.secs", 2, _parse_int(1),
              "Object stores: how often a holder renews the table lock object's validity."),
    # Object-store settings (docs/storage.md): Hadoop S3A's names, as Java Hudi users set them, and
    # tablesvc's retry bounds. Only values a layer sets reach the storage (STORAGE_KEY_PREFIXES);
    # credentials are never printed and never written anywhere by tablesvc.
    ConfigKey("fs.s3a.endpoint", "", _parse_text, "S3 endpoint URL (a bare host:port gets https://)."),
    ConfigKey("fs.s3a.endpoint.region", "", _parse_text, "S3 region."),
    ConfigKey("fs.s3a.access.key", "", _parse_text, "S3 access key id (a credential: give it by --conf or the "
                                                     "environment, not in the table's files)."),
    ConfigKey("fs.s3a.secret.key", "", _parse_text, "S3 secret access key (a credential)."),
    ConfigKey("fs.s3a.session.token", "", _parse_text, "S3 session token (a credential)."),
    ConfigKey("fs.s3a.path.style.access", False, _parse_bool, "true: path-style requests (http://host/bucket/key)."),
    ConfigKey("fs.s3a.connection.ssl.enabled", True, _parse_bool,
              "false: plain HTTP to the endpoint (a bare host:port gets http://)."),
    ConfigKey("tablesvc.storage.retry.timeout.ms", 180_000, _parse_int(0),
              "Object stores: how long a failing request is retried in all (obstore's default 3 minutes)."),
    ConfigKey("tablesvc.storage.max.retries", 10, _parse_int(0),
              "Object stores: how many times a failing request is retried (obstore's default 10)."),
]

# Keys every process on a table must agree on: only the table's .hoodie/tablesvc.yaml sets them
# (tablesvc/config/loader.py refuses a --conf, --config or mapping that says otherwise).
TABLE_WIDE_KEYS = ("hoodie.write.lock.filesystem.path", "hoodie.write.lock.filesystem.expire")

REGISTRY: dict[str, ConfigKey] = {k.key: k for k in _KEYS}

# Keys handed to the table's storage (``storage_for(path, options)``) when a layer sets them: Hadoop
# S3A's (also with ``spark.hadoop.``), tablesvc's ``tablesvc.storage.*``, and object_store's own
# names (``aws_endpoint_url``, ``AWS_ACCESS_KEY_ID``, ``google_*``, ``azure_*``: no dot).
STORAGE_KEY_PREFIXES = ("fs.s3a.", "spark.hadoop.fs.s3a.", "tablesvc.storage.")
OBJECT_STORE_NAME_PREFIXES = ("aws_", "google_", "azure_")


def is_storage_key(key: str) -> bool:
    return key.startswith(STORAGE_KEY_PREFIXES) or ("." not in key
                                                   and key.lower().startswith(OBJECT_STORE_NAME_PREFIXES))
