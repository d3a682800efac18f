"""Java Hudi's own check of a table's metadata table (MDT), run inside the Java tier's driver: the
substitute for ``HoodieMetadataTableValidator`` (issue #27's acceptance; docs/metadata-table.md,
"How it is checked against Java").

The validator lives in hudi-utilities, which Maven does not serve here (hudi-utilities_2.12 and
the utilities bundles, 1.2.0: "Could not find artifact"), and its source may not be copied.  So
the same comparisons are made in our own words through ``spark._jvm``, with classes of the Hudi
1.2 Spark bundle the driver already loads: the MDT's answers (``HoodieBackedTableMetadata``, a
file-system view over it) against what Java reads from storage (``FileSystemBackedTableMetadata``,
a file-system view over a storage listing, Parquet footers, log blocks).  Every value compared is
produced by Java code; this module only lines the two sides up and words the differences.

Checks (each difference names its partition, file group, file or column):

* **partitions**: the MDT's partition list vs storage's, leaving out partitions whose
  ``.hoodie_partition_metadata`` names an instant that never completed (as the validator does).
* **file slices**: per partition, the latest file slice of every file group from both views:
  base instant, base file name and size, log file names and sizes.  A log file present on one
  side only passes when it is uncommitted, as the validator rules (its first block's instant is
  not completed, or that instant's commit metadata does not list it).  Stricter than the
  validator in one case: a file the MDT lists but storage does not have is a difference (the
  validator, failing to open it, takes it for an inflight write).
* **column_stats** (when the table keeps it): for every file of the storage view's latest slices
  and every column of the table's ``column_stats`` index definition, the MDT's record
  (``getColumnStats``, as ``HoodieColumnRangeMetadata.fromColumnStats``) equals what Java computes
  from the file (``FileFormatUtils.readColumnStatsFromMetadata`` for base files,
  ``HoodieTableMetadataUtil.getLogFileColumnRangeMetadata`` for log files), by Java's
  ``HoodieColumnRangeMetadata.equals`` (min, max, null and value counts, sizes).  The validator
  of the stored source compares only the three ``_hoodie_*`` columns; every indexed column is
  compared here.  A log compaction's log file is read block by block (Java's per-file log reader
  gives nothing for it read alone).  A record of no values (no min/max, zero counts and sizes) for a file Java
  computes nothing from passes: Java's writer records that for a log of deletes only.
* **partition_stats** (when the table keeps it): the MDT's records (``PartitionStatsIndexSupport``)
  against the column stats of the MDT-based view's latest slices that have a base file (base
  and logs), merged per column with ``HoodieColumnRangeMetadata.merge`` and made into records
  by ``HoodieMetadataPayload.createPartitionStatsRecords``, as the validator aggregates them.
  A record on one side only is a difference (both ways; the validator only looks for MDT
  records the aggregation lacks); otherwise the value types must be equal and the stored range
  must hold the aggregated one.  Counts and sizes are not compared: Java's writer sums them
  across commits (after a clustering, ``mor_avro_v9_txns_simple_meta``'s ``region=apac``
  record counts 8 values, its latest slices 4), so the validator's exact comparison fails on
  Java's own tables.

Two halves, like ``java_hudi.py``: ``validate_in_jvm`` runs in the driver (Hudi's venv, op
``validate_metadata``); ``validate_metadata_table`` is the tests' call.  Only the standard
library at module level.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PARTITIONS, FILE_SLICES, COLUMN_STATS, PARTITION_STATS = "partitions", "file slices", "column_stats", "partition_stats"
CHECKS = (PARTITIONS, FILE_SLICES, COLUMN_STATS, PARTITION_STATS)


# ==== the tests' side ===============================================================================

@dataclass(frozen=True)
class Difference:
    check: str       # one of CHECKS
    where: str       # partition, partition/file group, partition/file, plus the column for stats
    detail: str

    def __str__(self) -> str:
        return f"{self.check} {self.where}: {self.detail}"


@dataclass(frozen=True)
class MetadataValidation:
    path: str
    differences: tuple[Difference, ...]
    compared: tuple[tuple[str, int], ...]     # per check, how many items were compared (0: not run)
    skipped: tuple[tuple[str, str], ...]      # per check not run, why (the table does not keep it)

    def count(self, check: str) -> int:
        return dict(self.compared).get(check, 0)

    def render(self) -> str:
        lines = [f"metadata table of {self.path}: " + ", ".join(f"{n} {c}" for c, n in self.compared)
                 + "".join(f"; {c} not checked ({why})" for c, why in self.skipped)]
        lines += [f"  {d}" for d in self.differences] or ["  no differences"]
        return "\n".join(lines)


def validate_metadata_table(java, path) -> MetadataValidation:
    """Runs the checks in ``java`` (a started ``JavaHudi`` driver, Hudi 1.x) on the table at ``path``."""
    where = str(path) if "://" in str(path) else os.path.abspath(str(path))   # an s3a:// table stays a URL
    got = java.step({"op": "validate_metadata", "path": where})
    return MetadataValidation(
        path=str(path),
        differences=tuple(Difference(**d) for d in got["differences"]),
        compared=tuple((c, int(got["compared"].get(c, 0))) for c in CHECKS),
        skipped=tuple((c, why) for c, why in got["skipped"].items()))


# ==== the driver's side (Hudi's venv, one Spark session with the bundle) ============================

def validate_in_jvm(spark, base_path: str) -> dict:
    """The checks above on the table at ``base_path``: ``{"differences", "compared", "skipped"}``."""
    return _JvmChecks(spark, base_path).run()


class _JvmChecks:
    def __init__(self, spark, base_path: str):
        self.spark = spark
        jvm = spark.sparkContext._jvm
        self.jvm = jvm
        self.hudi = hudi = jvm.org.apache.hudi
        jsc = spark.sparkContext._jsc
        self.ctx = hudi.client.common.HoodieSparkEngineContext(jsc)
        conf = hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(jsc.hadoopConfiguration())
        # a local base path needs its scheme (the validator's class doc says so)
        uri = base_path if "://" in base_path else "file://" + os.path.abspath(base_path)
        self.meta = (hudi.common.table.HoodieTableMetaClient.builder().setConf(conf).setBasePath(uri)
                     .setLoadActiveTimelineOnLoad(True).build())
        self.storage = self.meta.getStorage()
        self.base = self.meta.getBasePath().toString()
        config = hudi.common.config.HoodieMetadataConfig
        self.mdt_config = config.newBuilder().enable(True).build()
        self.mdt = hudi.metadata.HoodieBackedTableMetadata(self.ctx, self.storage, self.mdt_config, self.base)
        listed = hudi.metadata.FileSystemBackedTableMetadata(self.ctx, self.meta.getTableConfig(), self.storage, self.base)
        # both views over the same timeline; only where the file names and sizes come from differs
        timeline = self.meta.getActiveTimeline().filterCompletedAndCompactionInstants()
        view = hudi.common.table.view.HoodieTableFileSystemView
        self.mdt_view = view(self.mdt, self.meta, timeline)
        self.storage_view = view(listed, self.meta, timeline)
        self.completed = self.meta.getCommitsTimeline().filterCompletedInstants()
        self.kept = set(self.meta.getTableConfig().getMetadataPartitions())
        self.differences: list[dict] = []
        self.compared = {c: 0 for c in CHECKS}
        self.skipped: dict[str, str] = {}
        self._write_paths: dict[str, set[str]] = {}

    # -- helpers ------------------------------------------------------------------------------------
    def _diff(self, check: str, where: str, detail: str) -> None:
        self.differences.append({"check": check, "where": where, "detail": detail})

    def _list(self, stream) -> list:
        return list(stream.collect(self.jvm.java.util.stream.Collectors.toList()))

    def _java_list(self, items) -> object:
        out = self.jvm.java.util.ArrayList()
        for item in items:
            out.add(item)
        return out

    def _slices(self, view, partition: str) -> dict[str, object]:
        return {s.getFileId(): s for s in self._list(view.getLatestFileSlices(partition))}

    def _relative(self, partition: str, name: str) -> str:
        return f"{partition}/{name}" if partition else name

    def _path(self, partition: str, name: str):
        return self.hudi.storage.StoragePath(self.hudi.common.fs.FSUtils.constructAbsolutePath(self.base, partition), name)

    # -- partitions ---------------------------------------------------------------------------------
    def _created_by_completed_instant(self, partition: str) -> bool:
        created = self.hudi.common.model.HoodiePartitionMetadata(
            self.storage, self.hudi.common.fs.FSUtils.constructAbsolutePath(self.base, partition)).readPartitionCreatedCommitTime()
        if not created.isPresent():
            return False
        instant = created.get()
        if self.completed.containsOrBeforeTimelineStarts(instant):
            return True
        # a later write into a partition whose creating write failed and was rolled back
        last = self.completed.lastInstant()
        return last.isPresent() and instant <= last.get().requestedTime()

    def partitions(self) -> list[str]:
        fs_util = self.hudi.common.fs.FSUtils
        in_storage = {p for p in fs_util.getAllPartitionPaths(self.ctx, self.meta, False)
                      if self._created_by_completed_instant(p)}
        in_mdt = set(self.mdt.getAllPartitionPaths())
        for p in sorted(in_storage - in_mdt):
            self._diff(PARTITIONS, p or ".", "in storage (created by a completed instant), not listed by the metadata table")
        for p in sorted(in_mdt - in_storage):
            self._diff(PARTITIONS, p or ".", "listed by the metadata table, not in storage")
        self.compared[PARTITIONS] = len(in_storage | in_mdt)
        return sorted(in_storage | in_mdt)

    # -- file slices --------------------------------------------------------------------------------
    def _written_paths(self, instant) -> set[str]:
        key = instant.requestedTime()
        if key not in self._write_paths:
            metadata = self.completed.readCommitMetadata(instant)
            self._write_paths[key] = {ws.getPath() for ws in metadata.getWriteStats()}
        return self._write_paths[key]

    def _committed_log(self, partition: str, name: str) -> str | None:
        """Why the log file counts as committed, or None when it does not (the validator's rule)."""
        path = self._path(partition, name)
        if not self.storage.exists(path):
            return "listed by the metadata table but absent from storage"
        hudi = self.hudi
        schema = hudi.common.table.TableSchemaResolver.readSchemaFromLogFile(self.storage, path)
        if schema is None:
            return None       # no data block yet: a write in progress
        reader = hudi.common.table.log.HoodieLogFormat.newReader(
            self.storage, hudi.common.model.HoodieLogFile(path.toString()), schema, False)
        try:
            if not reader.hasNext():
                return None
            header_type = getattr(hudi.common.table.log.block, "HoodieLogBlock$HeaderMetadataType")
            instant_time = reader.next().getLogBlockHeader().get(header_type.INSTANT_TIME)
        finally:
            reader.close()
        if self.completed.containsInstant(instant_time):
            (instant,) = [i for i in self.completed.getInstants() if i.requestedTime() == instant_time]
            if self._relative(partition, name) in self._written_paths(instant):
                return f"written by completed instant {instant_time}"
            return None       # a retried task's file, left out of the commit
        if self.completed.isBeforeTimelineStarts(instant_time):
            return f"written by archived instant {instant_time}"
        return None

    def _compare_logs(self, partition: str, file_id: str, mdt_slice, fs_slice) -> None:
        mdt_logs = {f.getFileName(): f.getFileSize() for f in self._list(mdt_slice.getLogFiles())}
        fs_logs = {f.getFileName(): f.getFileSize() for f in self._list(fs_slice.getLogFiles())}
        where = f"{partition or '.'}/{file_id}"
        for name in sorted(mdt_logs.keys() ^ fs_logs.keys()):
            side = "the metadata table" if name in mdt_logs else "storage"
            why = self._committed_log(partition, name)
            if why is not None:
                self._diff(FILE_SLICES, where, f"log file {name} only in {side}'s latest slice, and no uncommitted "
                                               f"leftover: {why}")
        for name in sorted(mdt_logs.keys() & fs_logs.keys()):
            if mdt_logs[name] != fs_logs[name]:
                self._diff(FILE_SLICES, where, f"log file {name}: size {mdt_logs[name]} in the metadata table, "
                                               f"{fs_logs[name]} in storage")

    def file_slices(self, partitions: list[str]) -> None:
        for partition in partitions:
            in_mdt, in_storage = self._slices(self.mdt_view, partition), self._slices(self.storage_view, partition)
            for file_id in sorted(in_mdt.keys() | in_storage.keys()):
                self.compared[FILE_SLICES] += 1
                where = f"{partition or '.'}/{file_id}"
                a, b = in_mdt.get(file_id), in_storage.get(file_id)
                if a is None or b is None:
                    missing, present = ("the metadata table", b) if a is None else ("storage", a)
                    self._diff(FILE_SLICES, where, f"file group missing from {missing}'s view: {present.toString()}")
                    continue
                if a.getBaseInstantTime() != b.getBaseInstantTime():
                    self._diff(FILE_SLICES, where, f"latest base instant {a.getBaseInstantTime()} in the metadata "
                                                   f"table, {b.getBaseInstantTime()} in storage")
                    continue
                base_a = a.getBaseFile().get() if a.getBaseFile().isPresent() else None
                base_b = b.getBaseFile().get() if b.getBaseFile().isPresent() else None
                if (base_a is None) != (base_b is None):
                    self._diff(FILE_SLICES, where, "base file only in "
                               + ("the metadata table" if base_b is None else "storage"))
                elif base_a is not None and (base_a.getFileName(), base_a.getFileSize()) != \
                        (base_b.getFileName(), base_b.getFileSize()):
                    self._diff(FILE_SLICES, where, f"base file {base_a.getFileName()} of {base_a.getFileSize()} bytes "
                                                   f"in the metadata table, {base_b.getFileName()} of "
                                                   f"{base_b.getFileSize()} bytes in storage")
                self._compare_logs(partition, file_id, a, b)

    # -- column stats -------------------------------------------------------------------------------
    def _indexed_columns(self) -> list[str]:
        definitions = self.meta.getIndexMetadata()
        column_stats = definitions.get().getIndexDefinitions().get(COLUMN_STATS) if definitions.isPresent() else None
        if column_stats is None:
            raise ValueError(f"{self.base}: the table keeps column_stats but has no column_stats index definition")
        return list(column_stats.getSourceFields())

    def _mdt_ranges(self, partition: str, names: list[str], columns) -> dict[tuple[str, str], object]:
        hudi = self.hudi
        pairs = self._java_list(hudi.common.util.collection.Pair.of(partition, n) for n in names)
        found = self.mdt.getColumnStats(pairs, columns)
        out = {}
        for key in found.keySet():
            for stats in found.get(key):
                out[(key.getValue(), stats.getColumnName())] = hudi.stats.HoodieColumnRangeMetadata.fromColumnStats(stats)
        return out

    def _file_ranges(self, partition: str, name: str, columns, version, schema) -> list:
        hudi = self.hudi
        path = self._path(partition, name)
        if hudi.common.fs.FSUtils.isLogFile(path):
            compacted = self._compacted_log_ranges(path, name, columns, version, schema)
            if compacted is not None:
                return compacted
            return list(hudi.metadata.HoodieTableMetadataUtil.getLogFileColumnRangeMetadata(
                path.toString(), partition, self.meta, columns, hudi.common.util.Option.of(schema),
                self.mdt_config.getMaxReaderBufferSize()))
        utils = hudi.io.storage.HoodieIOFactory.getIOFactory(self.storage).getFileFormatUtils(path)
        return list(utils.readColumnStatsFromMetadata(self.storage, path, columns, version))

    def _compacted_log_ranges(self, path, name: str, columns, version, schema) -> list | None:
        """A log compaction's log file (its blocks carry ``COMPACTED_BLOCK_TIMES``): the ranges of
        its data blocks' records, by Java's ``collectColumnRangeMetadata``; None for any other log.
        Java's per-file reader (``getLogFileColumnRangeMetadata``) returns nothing for such a file
        read alone, its own log compaction's included: its scanner places a compacted block only
        where one of the blocks it replaced is read.  Java's writer records the compacted file's
        records, so that is what is computed here."""
        hudi, jvm = self.hudi, self.jvm
        reader = hudi.common.table.log.HoodieLogFormat.newReader(self.storage, hudi.common.model.HoodieLogFile(path), schema)
        records, compacted = jvm.java.util.ArrayList(), False
        try:
            while reader.hasNext():
                block = reader.next()
                compacted = compacted or block.isCompactedLogBlock()
                if block.getBlockType().toString().endswith("_DATA_BLOCK"):
                    it = block.getRecordIterator(hudi.common.model.HoodieRecord.HoodieRecordType.AVRO)
                    while it.hasNext():
                        records.add(it.next())
                    it.close()
        finally:
            reader.close()
        if not compacted:
            return None
        fields = self._java_list(schema.getNestedField(c).get() for c in columns)
        found = hudi.metadata.HoodieTableMetadataUtil.collectColumnRangeMetadata(
            records.iterator(), fields, name, schema, self.meta.getStorageConf(), version)
        return [found.get(k) for k in found.keySet()]

    def column_stats(self, partitions: list[str]) -> None:
        if COLUMN_STATS not in self.kept:
            self.skipped[COLUMN_STATS] = "the table's metadata table does not keep it"
            return
        hudi = self.hudi
        names = self._indexed_columns()
        columns = self._java_list(names)
        version = hudi.metadata.HoodieTableMetadataUtil.existingIndexVersionOrDefault(COLUMN_STATS, self.meta)
        schema = hudi.common.table.TableSchemaResolver(self.meta).getTableSchema()
        for partition in partitions:
            files = []
            for s in self._slices(self.storage_view, partition).values():
                if s.getBaseFile().isPresent():
                    files.append(s.getBaseFile().get().getFileName())
                files += [f.getFileName() for f in self._list(s.getLogFiles())]
            if not files:
                continue
            in_mdt = self._mdt_ranges(partition, files, columns)
            for name in sorted(files):
                computed = {r.getColumnName(): r for r in self._file_ranges(partition, name, columns, version, schema)}
                for column in names:
                    self.compared[COLUMN_STATS] += 1
                    where = f"{self._relative(partition, name)} column {column}"
                    ours, theirs = in_mdt.get((name, column)), computed.get(column)
                    if ours is None and theirs is None:
                        continue
                    if theirs is None and _counts_nothing(ours):
                        # a log of deletes only: Java's writer records an empty range for each column
                        # (no value, no null, no size), its log reader computes none; the same nothing
                        continue
                    if ours is None:
                        self._diff(COLUMN_STATS, where, f"no record in the metadata table; the file says {theirs.toString()}")
                    elif theirs is None:
                        self._diff(COLUMN_STATS, where, f"the metadata table has {ours.toString()}; Java computes none from the file")
                    elif not ours.equals(theirs):
                        self._diff(COLUMN_STATS, where, f"metadata table {ours.toString()} != file {theirs.toString()}")

    # -- partition stats ----------------------------------------------------------------------------
    def _aggregated(self, partition: str, columns) -> dict[str, tuple[object, object]]:
        """Per column, the merged range of the MDT-based view's latest slices that have a base file
        (base and logs) and the partition stats record Java makes of it."""
        hudi = self.hudi
        files = []
        for s in self._slices(self.mdt_view, partition).values():
            if s.getBaseFile().isPresent():
                files.append(s.getBaseFile().get().getFileName())
                files += [f.getFileName() for f in self._list(s.getLogFiles())]
        merged: dict[str, object] = {}
        for (_, column), ranges in sorted(self._mdt_ranges(partition, files, columns).items()):
            if _counts_nothing(ranges):
                # a log of deletes only: no value to merge, and on V2 no value type either, which
                # Java's merge refuses ("Value types should be the same")
                continue
            merged[column] = ranges if column not in merged else \
                hudi.stats.HoodieColumnRangeMetadata.merge(merged[column], ranges)
        if not merged:
            return {}
        records = hudi.metadata.HoodieMetadataPayload.createPartitionStatsRecords(
            partition, self._java_list(merged.values()), False, False, hudi.common.util.Option.empty())
        out = {}
        for record in self._list(records):
            value = record.getData().getInsertValue(None)
            if value.isPresent():
                stats = value.get().getColumnStatsMetadata()
                out[stats.getColumnName()] = (merged[stats.getColumnName()], stats)
        return out

    def _covers(self, stored, aggregated) -> bool:
        """Whether the stored range holds the aggregated one: merging them changes neither end."""
        stored_range = self.hudi.stats.HoodieColumnRangeMetadata.fromColumnStats(stored)
        both = self.hudi.stats.HoodieColumnRangeMetadata.merge(stored_range, aggregated)

        def same(x, y) -> bool:
            return (x is None and y is None) or (x is not None and y is not None and x.equals(y))
        return same(both.getMinValueWrapped(), stored_range.getMinValueWrapped()) and \
            same(both.getMaxValueWrapped(), stored_range.getMaxValueWrapped())

    def partition_stats(self, partitions: list[str]) -> None:
        if PARTITION_STATS not in self.kept:
            self.skipped[PARTITION_STATS] = "the table's metadata table does not keep it"
            return
        hudi, jvm = self.hudi, self.jvm
        columns = self._java_list(self._indexed_columns())
        schema = hudi.common.table.TableSchemaResolver(self.meta).getTableSchema()
        struct = hudi.HoodieSchemaConversionUtils.convertHoodieSchemaToStructType(schema)
        support = hudi.PartitionStatsIndexSupport(self.spark._jsparkSession, struct, schema, self.mdt_config, self.meta, False)
        seq = jvm.scala.collection.JavaConverters.asScalaBufferConverter(columns).asScala().toSeq()
        stored = {(r.getFileName(), r.getColumnName()): r
                  for r in support.loadColumnStatsIndexRecords(seq, jvm.scala.Option.empty(), True).collectAsList()}
        expected = {(p, column): pair for p in partitions for column, pair in self._aggregated(p, columns).items()}
        for key in sorted(stored.keys() | expected.keys()):
            self.compared[PARTITION_STATS] += 1
            partition, column = key
            where = f"{partition or '.'} column {column}"
            ours = stored.get(key)
            aggregated, record = expected.get(key, (None, None))
            if record is None:
                self._diff(PARTITION_STATS, where, f"the metadata table has {ours.toString()}; the latest slices "
                                                   "with a base file aggregate to none")
            elif ours is None:
                self._diff(PARTITION_STATS, where, f"no record in the metadata table; the latest slices aggregate "
                                                   f"to {record.toString()}")
            elif not self._covers(ours, aggregated) or not _same_java(ours.getValueType(), record.getValueType()):
                # the range is what Java keeps true (counts and sizes it sums across commits:
                # docs/metadata-table.md, "How it is checked against Java")
                self._diff(PARTITION_STATS, where, f"metadata table {ours.toString()} does not hold the "
                                                   f"aggregate {record.toString()}")

    def run(self) -> dict:
        try:
            partitions = self.partitions()
            self.file_slices(partitions)
            self.column_stats(partitions)
            self.partition_stats(partitions)
        finally:
            self.mdt_view.close()
            self.storage_view.close()
            self.mdt.close()
        return {"differences": self.differences, "compared": self.compared, "skipped": self.skipped}


def _counts_nothing(stats) -> bool:
    """A column range of no values: no minimum, maximum, null, value or size."""
    return (stats.getMinValue() is None and stats.getMaxValue() is None and stats.getNullCount() == 0
            and stats.getValueCount() == 0 and stats.getTotalSize() == 0 and stats.getTotalUncompressedSize() == 0)


def _same_java(x, y) -> bool:
    """Java's ``Objects.equals`` for two values py4j handed over (None for null)."""
    return (x is None and y is None) or (x is not None and y is not None and x.equals(y))
