"""Building the metadata table of a NEW, empty table (``tablesvc init``, ``Table.create``), as
Apache Hudi 1.x's writer initialises it before a table's first commit (``HoodieBackedTableMetadataWriter.
initializeFromFilesystem`` on a table without completed instants; docs/metadata-table.md, "Tables
tablesvc creates").

What is built, partition by partition, each at its own initialisation instant (``00000000000000000``
for ``files``, then one millisecond later for each further partition: Hudi's ``SOLO_COMMIT_TIMESTAMP``
plus an offset, what every carried fixture initialised on an empty table shows):

* the partition folder with ``.hoodie_partition_metadata`` (``commitTime`` = that instant, depth 1);
* per file group an init log file ``.<fileId>_<instant>.log.1_0-0-0`` holding one empty DELETE block
  whose only header is INSTANT_TIME (Java's ``initializeFileGroups``: a file group that receives no
  record still shows as a slice) — ``files`` 1 group, ``column_stats`` 2, ``partition_stats`` 1
  (Hudi's default file-group counts);
* ``files`` only: a base HFile ``files-0000-0_<token>_<instant>.hfile`` with the one record an empty
  table has, ``__all_partitions__`` listing no partition (Java's bulk insert of that record);
* the delta commit ``<instant>.deltacommit``: requested and inflight empty, completed with the base
  file's write stat (none for the stats partitions), operation ``BULK_INSERT_PREPPED``, the record
  schema in ``extraMetadata.schema``.

Before all that the metadata table's own ``hoodie.properties`` is written (the fixtures' keys).  The
data table's ``hoodie.table.metadata.partitions`` and its index definitions are the CALLER's to write,
after this returns: ``create_table`` writes the data table's ``hoodie.properties`` last and exclusively,
so a crash anywhere in here leaves no table at all (no ``hoodie.properties``), and a retried
``tablesvc init`` starts by deleting what the killed run left under ``.hoodie/metadata`` (as Java
deletes an initialising partition's folder before it starts).

Version 6 (Hudi 0.15's ``HoodieBackedTableMetadataWriter.initializeIfNeeded`` /
``initializeFromFilesystem`` on a table without a completed instant; checked against fixture
``v6_mdt_files``, which Java 0.15.0 initialised on an empty table): only ``files`` (0.15's default
partitions), at ``00000000000000010`` (the 14-zero initialisation time plus the suffix ``010``,
``HoodieTableMetadataUtil.createIndexInitTimestamp``); the metadata table's ``hoodie.properties``
with 0.15's keys (``archived``, layout 1, ``HoodieTableMetadataKeyGenerator``, the merger strategy
id); the record written with Hudi 0.15's schema (``metadata_record_schema_v6``) and
``_hoodie_file_name`` set to the base file's name, as Java 0.15's bulk insert writes it; operation
``BULK_INSERT``; no ``numUpdates`` in the write stat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tablesvc.fsview.names import PARTITION_METAFILE, BaseFileName, LogFileName
from tablesvc.logformat import KeyedRecord, delete_block, write_log_file
from tablesvc.logformat.hfile_content import encode_hfile_records
from tablesvc.metadata.files_records import TYPE_PARTITION_LIST
from tablesvc.metadata.reader import metadata_base_path
from tablesvc.metadata.record_schema import files_record, metadata_record_schema, metadata_record_schema_v6
from tablesvc.metadata.writer import MetadataTableWriter, WRITE_TOKEN, commit_schema
from tablesvc.metadata.column_stats import IndexVersion
from tablesvc.metadata.indexed_columns import COLUMN_STATS_INDEX, default_indexed_columns
from tablesvc.table.index_definitions import DEFINITIONS, INDEX_DEFS_PATH_KEY, render_index_definitions
from tablesvc.table.metadata_partitions import MetadataPartitionType
from tablesvc.table.properties import write_properties
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.instant_time import InstantTimeGenerator
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
from timeline.storage import Storage, join

OPERATION = "BULK_INSERT_PREPPED"            # what Hudi records for a partition's initialisation
OPERATION_V6 = "BULK_INSERT"                  # what Hudi 0.15 records for it (fixture v6_mdt_files)
FIRST_INIT_INSTANT = "00000000000000000"      # HoodieTimeline.SOLO_COMMIT_TIMESTAMP: no completed instant yet
# Hudi 0.15: no completed data instant -> "00000000000000", plus "%03d" of 10 + the offset
V6_INIT_TIME, V6_INIT_SUFFIX = "00000000000000", 10
INIT_LOG_WRITE_TOKEN = "0-0-0"                # the init log files' token in every fixture
ALL_PARTITIONS_KEY = "__all_partitions__"
# Hudi's default file-group counts (HoodieMetadataConfig): files 1, column stats 2, partition stats 1
FILE_GROUPS = {MetadataPartitionType.FILES: 1, MetadataPartitionType.COLUMN_STATS: 2,
               MetadataPartitionType.PARTITION_STATS: 1}


@dataclass(frozen=True)
class BuiltPartition:
    name: str           # folder / the name hoodie.table.metadata.partitions lists
    instant: str        # its initialisation delta commit


def init_instant(offset: int, table_version: int = 8) -> str:
    """The initialisation instant of the ``offset``-th partition built: ``SOLO_COMMIT_TIMESTAMP``
    plus ``offset`` milliseconds (Java's ``generateUniqueInstantTime`` on an empty table); on
    version 6 ``00000000000000`` + ``010`` + offset (Hudi 0.15's ``createIndexInitTimestamp``)."""
    if table_version < 8:
        return f"{V6_INIT_TIME}{V6_INIT_SUFFIX + offset:03d}"
    return f"{int(FIRST_INIT_INSTANT) + offset:017d}"


def metadata_table_properties(data_props: dict[str, str]) -> dict[str, str]:
    """The metadata table's ``hoodie.properties`` for a data table with ``data_props``: Java 1.2's
    keys on v8/v9, Hudi 0.15's (``HoodieBackedTableMetadataWriter.initializeMetaClient``, the
    fixture ``v6_mdt_files``) on v6."""
    version = data_props["hoodie.table.version"]
    if int(version) < 8:
        return {
            "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.archivelog.folder": "archived",
            "hoodie.timeline.layout.version": data_props["hoodie.timeline.layout.version"],
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.table.name": f"{data_props['hoodie.table.name']}_metadata",
            "hoodie.compaction.record.merger.strategy": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.class": "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
            "hoodie.table.base.file.format": "HFILE",
            "hoodie.table.version": version,
        }
    return {
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.table.initial.version": data_props.get("hoodie.table.initial.version", version),
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.archivelog.folder": "history",
        "hoodie.timeline.layout.version": data_props["hoodie.timeline.layout.version"],
        "hoodie.timeline.history.path": "history",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.name": f"{data_props['hoodie.table.name']}_metadata",
        "hoodie.timeline.path": "timeline",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.table.version": version,
    }


def build_metadata_table(storage: Storage, data_base_path: str, data_props: dict[str, str],
                         kinds: tuple[MetadataPartitionType, ...], generator: InstantTimeGenerator,
                         ) -> list[BuiltPartition]:
    """Build the metadata table of the empty table at ``data_base_path`` with the partitions
    ``kinds`` (``FILES`` first); returns them in the order built.  Anything under
    ``.hoodie/metadata`` is deleted first: only a killed earlier attempt can have left it, since
    the caller has checked that the table does not exist yet."""
    if not kinds or kinds[0] is not MetadataPartitionType.FILES:
        raise ValueError("a metadata table starts with its files partition")
    base = metadata_base_path(data_base_path)
    if storage.exists(base):
        storage.delete_tree(base)
    layout = TimelineLayout.for_table_version(int(data_props["hoodie.table.version"]))
    storage.makedirs(join(base, layout.timeline_dir))
    write_properties(storage, base, metadata_table_properties(data_props), create=True)
    writer = MetadataTableWriter.of(storage, data_base_path, generator)
    built = []
    version = int(data_props["hoodie.table.version"])
    for offset, kind in enumerate(kinds):
        instant = init_instant(offset, version)
        _build_partition(writer, kind, instant, version)
        built.append(BuiltPartition(kind.value.folder, instant))
    return built


INDEX_DEFS_FILE = ".hoodie/.index_defs/index.json"      # Java's hoodie.table.index.defs.path
PARTITIONS_KEY = "hoodie.table.metadata.partitions"


def chosen_partitions(data_props: dict[str, str], column_stats: bool) -> tuple[MetadataPartitionType, ...]:
    """What a Java 1.2 Spark writer with its defaults builds on its first write: ``files``, and
    ``column_stats`` (``hoodie.metadata.index.column.stats.enable``, default true for Spark) with
    ``partition_stats`` on a partitioned table.  Column stats need the table's schema (their
    definition names its columns), so a table created without one gets ``files`` only (Java's next
    writer adds the others itself).  Version 6: ``files`` only, what Hudi 0.15 enables by default."""
    kinds = [MetadataPartitionType.FILES]
    if int(data_props["hoodie.table.version"]) < 8:
        return tuple(kinds)
    if column_stats and data_props.get("hoodie.table.create.schema"):
        kinds.append(MetadataPartitionType.COLUMN_STATS)
        if data_props.get("hoodie.table.partition.fields"):
            kinds.append(MetadataPartitionType.PARTITION_STATS)
    return tuple(kinds)


def column_stats_definition(data_props: dict[str, str]) -> dict:
    """The ``column_stats`` entry of ``index.json``: Java's default columns of the create schema;
    index version V2 on table version 9, V1 on 8 (Hudi 1.1 made V2 the version-9 default)."""
    version = IndexVersion.V2 if int(data_props["hoodie.table.version"]) >= 9 else IndexVersion.V1
    return {"indexName": COLUMN_STATS_INDEX, "indexType": COLUMN_STATS_INDEX, "indexFunction": COLUMN_STATS_INDEX,
            "sourceFields": default_indexed_columns(data_props["hoodie.table.create.schema"], version),
            "indexOptions": {}, "version": version.value}


def with_metadata_table(storage: Storage, data_base_path: str, data_props: dict[str, str],
                        generator: InstantTimeGenerator, *, column_stats: bool = True) -> dict[str, str]:
    """Build the metadata table of the new table (``build_metadata_table``), write the column
    stats' index definition when built, and return the data table's properties to write, which
    list the partitions built.  Nothing here makes the table exist: the caller's exclusive write
    of those properties does."""
    kinds = chosen_partitions(data_props, column_stats)
    built = build_metadata_table(storage, data_base_path, data_props, kinds, generator)
    props = dict(data_props)
    if MetadataPartitionType.COLUMN_STATS in kinds:
        storage.makedirs(join(data_base_path, INDEX_DEFS_FILE.rsplit("/", 1)[0]))
        storage.write_replace(join(data_base_path, INDEX_DEFS_FILE), render_index_definitions(
            {DEFINITIONS: {COLUMN_STATS_INDEX: column_stats_definition(data_props)}}))
        props[INDEX_DEFS_PATH_KEY] = INDEX_DEFS_FILE
    props[PARTITIONS_KEY] = ",".join(sorted(b.name for b in built))      # Java lists them sorted
    props[PARTITIONS_KEY + ".inflight"] = ""
    return props


def _build_partition(writer: MetadataTableWriter, kind: MetadataPartitionType, instant: str,
                     table_version: int = 8) -> None:
    v6 = table_version < 8
    started = time.monotonic()
    storage, name = writer.storage, kind.value.folder
    folder = join(writer.base_path, name)
    storage.makedirs(folder)
    storage.write_new(join(folder, PARTITION_METAFILE),
                      f"#partition metadata\ncommitTime={instant}\npartitionDepth=1\n".encode())
    file_ids = [f"{kind.value.file_id_prefix}{i:04d}-0" for i in range(FILE_GROUPS[kind])]
    for file_id in file_ids:        # Java creates the file groups before the instant is requested
        write_log_file(storage, join(folder, LogFileName(file_id, instant, 1, INIT_LOG_WRITE_TOKEN).name),
                       [delete_block(instant, None, [])])
    timeline = writer.timeline()
    requested = Instant(instant, Action.DELTA_COMMIT, State.REQUESTED)
    storage.write_new(timeline.path_of(requested), b"")
    inflight = writer.timeline_writer.start(requested, b"")
    stats: dict[str, tuple[WriteStat, ...]] = {}
    if kind is MetadataPartitionType.FILES:
        base_name = BaseFileName(file_ids[0], WRITE_TOKEN, instant, "hfile").name
        schema = metadata_record_schema_v6() if v6 else metadata_record_schema()
        record = files_record(TYPE_PARTITION_LIST, {}, schema)       # an empty table has no partition yet
        if v6:                  # Java 0.15's bulk insert fills the file name in
            record["_hoodie_file_name"] = base_name
        data = encode_hfile_records([KeyedRecord(ALL_PARTITIONS_KEY, record)], schema)
        storage.write_new(join(folder, base_name), data)
        stats[name] = (WriteStat(
            file_id=file_ids[0], path=f"{name}/{base_name}", prev_commit="null", partition_path=name,
            num_writes=1, num_deletes=0, num_update_writes=0, num_inserts=1, total_write_bytes=len(data),
            file_size_in_bytes=len(data), total_log_records=0, total_log_blocks=0,
            runtime_stats={"totalScanTime": 0, "totalUpsertTime": 0,
                           "totalCreateTime": int((time.monotonic() - started) * 1000)},
            extra={} if v6 else {"numUpdates": 0}),)
    schema = commit_schema(metadata_record_schema_v6()) if v6 else commit_schema()
    metadata = CommitMetadata(partition_to_write_stats=stats, compacted=False, extra_metadata={"schema": schema},
                              operation_type=OPERATION_V6 if v6 else OPERATION, version=None)
    writer.timeline_writer.complete(inflight, encode_commit_metadata(metadata, writer.config.layout))


__all__ = ["ALL_PARTITIONS_KEY", "chosen_partitions", "column_stats_definition", "with_metadata_table", "FILE_GROUPS", "FIRST_INIT_INSTANT", "BuiltPartition", "build_metadata_table",
           "init_instant", "metadata_table_properties"]
