"""Dropping metadata-table partitions the user switched off, as Java Hudi's writer does.

A Java 1.2 writer whose configuration disables an index the table keeps drops that index before
it writes (``HoodieTable.deleteMetadataIndexIfNecessary``), and one with ``hoodie.metadata.enable
=false`` drops the whole metadata table (``HoodieTable.maybeDeleteMetadataTable``), both only
while ``hoodie.metadata.auto.delete.partitions`` is true.  tablesvc does the same with the same
keys, with one difference: it drops only what a key the user SET asks for.  Java's defaults
would drop silently (1.2 Spark writers default the record index to off, so a default Java writer
drops ``record_index``); tablesvc's default is to refuse (``table.writable``) and say which key
would let it go ahead.

The order is Java's, and it is what makes a drop safe to kill at any point: the partition names
leave ``hoodie.properties`` first (both ``hoodie.table.metadata.partitions`` and its
``.inflight``, through the backup-and-checksum update), then the folders go, then, for column
stats, its entry in ``.hoodie/.index_defs/index.json``.  Readers trust the properties, so a kill
after the rewrite leaves a folder (or an index definition) nobody reads; the next run with the
same opt-out sweeps it (``MetadataDrop.swept``).  The caller holds the table lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from tablesvc.config import ServiceConfig
from tablesvc.table.index_definitions import definition_names, drop_index_definition
from tablesvc.table.metadata_partitions import MetadataPartitionType
from tablesvc.table.properties import read_properties, write_properties
from timeline.storage import Storage, join

METADATA_FOLDER = ".hoodie/metadata"
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_KEY = "hoodie.table.metadata.partitions.inflight"

ENABLE_KEY = "hoodie.metadata.enable"
AUTO_DELETE_KEY = "hoodie.metadata.auto.delete.partitions"
COLUMN_STATS_KEY = "hoodie.metadata.index.column.stats.enable"
BLOOM_FILTERS_KEY = "hoodie.metadata.index.bloom.filter.enable"
GLOBAL_RECORD_INDEX_KEY = "hoodie.metadata.global.record.level.index.enable"
RECORD_INDEX_ALIAS_KEY = "hoodie.metadata.record.index.enable"          # Java: an alternative of the above
PARTITIONED_RECORD_INDEX_KEY = "hoodie.metadata.record.level.index.enable"

_KIND = MetadataPartitionType
# The key whose false drops a kind of partition (the one messages name).  Secondary and expression
# indexes have none: Java drops them only by DROP INDEX, so only the whole metadata table goes.
OPT_OUT_KEYS: Mapping[MetadataPartitionType, str] = MappingProxyType({
    _KIND.FILES: ENABLE_KEY,
    _KIND.COLUMN_STATS: COLUMN_STATS_KEY,
    _KIND.PARTITION_STATS: COLUMN_STATS_KEY,     # Java: isPartitionStatsIndexEnabled is column stats' flag
    _KIND.BLOOM_FILTERS: BLOOM_FILTERS_KEY,
    _KIND.RECORD_INDEX: RECORD_INDEX_ALIAS_KEY,
})


def opt_out_key(partition_name: str) -> str:
    """The key that, set to false, lets tablesvc drop ``partition_name`` (else the whole table's)."""
    kind = MetadataPartitionType.of(partition_name)
    return OPT_OUT_KEYS.get(kind, ENABLE_KEY) if kind is not None else ENABLE_KEY


def _names(props: Mapping[str, str], key: str) -> set[str]:
    return {p.strip() for p in (props.get(key) or "").split(",") if p.strip()}


def listed_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """Partitions the properties name, completed or inflight, sorted, once each."""
    return tuple(sorted(_names(props, PARTITIONS_KEY) | _names(props, INFLIGHT_KEY)))


def completed_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """Partitions ``hoodie.table.metadata.partitions`` names (built and complete), sorted."""
    return tuple(sorted(_names(props, PARTITIONS_KEY)))


def inflight_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """Partitions only ``….inflight`` names: being built, possibly by an async indexer that owns them."""
    return tuple(sorted(_names(props, INFLIGHT_KEY) - _names(props, PARTITIONS_KEY)))


def from_command(config: ServiceConfig, key: str) -> bool:
    """``key`` was set by the command itself (``--conf``, ``--config``, the Python API's options),
    not by the table's ``.hoodie/tablesvc.yaml`` nor left at its default (``config.loader``'s sources).
    Only such a key drops: the table file is a standing reader setting (``hoodie.metadata.enable=
    false`` there has always meant "list storage"), never an order to delete."""
    where = config.source(key)
    return where != "default" and where != config.table_file


@dataclass(frozen=True)
class MetadataOptOuts:
    """What the command's configuration asks to drop (only keys the command sets: ``from_command``)."""

    whole: bool                                  # hoodie.metadata.enable=false
    kinds: frozenset[MetadataPartitionType]      # indexes switched off
    settings: tuple[str, ...]                    # "key=false" of each key that asks, for the report

    @classmethod
    def of(cls, config: ServiceConfig) -> "MetadataOptOuts":
        def set_false(key: str) -> bool:
            return from_command(config, key) and config.get(key) is False

        if config.get(AUTO_DELETE_KEY) is False:
            return cls(False, frozenset(), ())
        if set_false(ENABLE_KEY):
            return cls(True, frozenset(), (f"{ENABLE_KEY}=false",))
        kinds: set[MetadataPartitionType] = set()
        settings: list[str] = []
        if set_false(COLUMN_STATS_KEY):
            kinds |= {_KIND.COLUMN_STATS, _KIND.PARTITION_STATS}
            settings.append(f"{COLUMN_STATS_KEY}=false")
        if set_false(BLOOM_FILTERS_KEY):
            kinds.add(_KIND.BLOOM_FILTERS)
            settings.append(f"{BLOOM_FILTERS_KEY}=false")
        record_keys = (GLOBAL_RECORD_INDEX_KEY, RECORD_INDEX_ALIAS_KEY, PARTITIONED_RECORD_INDEX_KEY)
        given = [k for k in record_keys if from_command(config, k)]
        # Java: the global key, else its older alternative; dropped when neither index is on.
        global_on = config.get(GLOBAL_RECORD_INDEX_KEY if from_command(config, GLOBAL_RECORD_INDEX_KEY)
                               else RECORD_INDEX_ALIAS_KEY)
        if given and not global_on and not config.get(PARTITIONED_RECORD_INDEX_KEY):
            kinds.add(_KIND.RECORD_INDEX)
            settings.append(" and ".join(f"{k}=false" for k in given))
        return cls(False, frozenset(kinds), tuple(settings))

    def drops(self, partition_name: str) -> bool:
        return self.whole or MetadataPartitionType.of(partition_name) in self.kinds

    def __bool__(self) -> bool:
        return self.whole or bool(self.kinds)


@dataclass(frozen=True)
class MetadataDrop:
    """One drop: the partitions leaving the properties, and what a killed earlier drop left."""

    whole: bool                     # the whole metadata table (.hoodie/metadata) goes
    partitions: tuple[str, ...]     # completed partitions that leave the properties (never inflight ones)
    swept: tuple[str, ...]          # folders / index definitions no partition lists any more
    settings: tuple[str, ...]

    def describe(self) -> str:
        """The one line a run reports."""
        what = ("the metadata table" + (f" ({', '.join(self.partitions)})" if self.partitions else "")
                if self.whole else ", ".join(self.partitions))
        parts = [f"dropped {what}"] if self.partitions or not self.swept else []
        if self.swept:
            parts.append(f"swept what an interrupted drop left: {', '.join(self.swept)}")
        return f"{'; '.join(parts)} ({', '.join(self.settings)})"


def plan_drop(storage: Storage, base_path: str, props: dict[str, str],
              opt_outs: MetadataOptOuts) -> MetadataDrop | None:
    """What ``opt_outs`` drops from the table whose properties are ``props`` (None: nothing).

    Only completed partitions (``hoodie.table.metadata.partitions``) are dropped, as Java's
    ``HoodieTable.shouldDeleteMetadataPartition`` looks at completed ones only: an ``.inflight``
    one may belong to an async indexer still building it, so it stays, and the refusal policy
    (``table.writable``) stops the action unless that partition is maintained or left true; a
    whole drop is not planned while any partition is inflight (``inflight_blocks_whole_drop``)."""
    if not opt_outs:
        return None
    listed = listed_partitions(props)
    completed = completed_partitions(props)
    metadata = join(base_path, METADATA_FOLDER)
    if opt_outs.whole:
        if listed:
            return MetadataDrop(True, completed, (), opt_outs.settings)
        if storage.exists(metadata):
            return MetadataDrop(True, (), (METADATA_FOLDER,), opt_outs.settings)
        return None
    dropping = tuple(p for p in completed if opt_outs.drops(p))
    swept = []
    if storage.exists(metadata):
        swept = [f"{METADATA_FOLDER}/{entry.name}" for entry in sorted(storage.list_dir(metadata), key=lambda e: e.name)
                 if entry.is_dir and entry.name not in listed and opt_outs.drops(entry.name)]
    cs = _KIND.COLUMN_STATS.value.folder
    if _KIND.COLUMN_STATS in opt_outs.kinds and cs not in listed and cs in definition_names(storage, base_path, props):
        swept.append(f"index definition {cs}")
    if not dropping and not swept:
        return None
    return MetadataDrop(False, dropping, tuple(swept), opt_outs.settings)


def apply_drop(storage: Storage, base_path: str, drop: MetadataDrop) -> None:
    """Carry out ``drop`` (the caller holds the table lock): properties, then folders, then the
    column-stats index definition, so that a kill anywhere leaves only what nobody reads."""
    props = read_properties(storage, base_path)
    if drop.partitions:
        gone = set(drop.partitions)
        for key in (PARTITIONS_KEY, INFLIGHT_KEY):
            kept = [] if drop.whole else [p for p in (props.get(key) or "").split(",") if p.strip() and p not in gone]
            props[key] = ",".join(sorted(kept))    # Java writes both sorted (setMetadataPartitionState)
        write_properties(storage, base_path, props)
    metadata = join(base_path, METADATA_FOLDER)
    folders = [metadata] if drop.whole else [join(metadata, p) for p in drop.partitions]
    folders += [join(base_path, s) for s in drop.swept if s.startswith(METADATA_FOLDER)]
    for folder in folders:
        if storage.exists(folder):
            storage.delete_tree(folder)
    cs = _KIND.COLUMN_STATS.value.folder
    if not drop.whole and (cs in drop.partitions or f"index definition {cs}" in drop.swept):
        drop_index_definition(storage, base_path, props, cs)


__all__ = ["AUTO_DELETE_KEY", "BLOOM_FILTERS_KEY", "COLUMN_STATS_KEY", "ENABLE_KEY", "GLOBAL_RECORD_INDEX_KEY",
           "METADATA_FOLDER", "MetadataDrop", "MetadataOptOuts", "OPT_OUT_KEYS", "PARTITIONED_RECORD_INDEX_KEY",
           "RECORD_INDEX_ALIAS_KEY", "apply_drop", "completed_partitions", "from_command", "inflight_partitions",
           "listed_partitions", "opt_out_key", "plan_drop"]
