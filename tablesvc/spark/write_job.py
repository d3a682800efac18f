"""The MOR write path as a Spark job: insert, upsert, delete.

Steps, and what a crash at each one leaves (docs/write-path.md has the full table):

1. Validate and reconcile the schema on the driver (nothing written yet; a bad batch is
   refused with exit code 2).
2. ``T.deltacommit.requested`` then ``.inflight``; a heartbeat starts beating for T.
3. Route: every row gets its partition path and file group.  Bucket index (and inserts,
   which go to new groups): Spark expressions where the key and partition fields allow
   (the bucket hash is Java's own ``String.hashCode``; the rows then carry only the hash of
   both), else an Arrow UDF over the key and partition columns only.  Lookup index: a
   ``mapInArrow`` tag pass adds the key too, then a join with the keys of the latest file
   slices.  Routing runs before the shuffle, so a null or empty record key fails the job
   there, before any task of step 4 starts.
4. Write: rows partitioned and sorted by a hash of (partition, file group), then
   ``mapInArrow`` — one file group at a time (``group_column``): it computes the record
   keys (routed in Spark, the rows carry the hash alone and the task finds partition and
   bucket again; routed in Python, it checks the routing), dedupes the batch by key and
   writes a base file (new group) or one log file (existing group); a marker is created
   before each file, each file appears whole.  Tasks return write stats only.
5. Check that no file group got two files (``_check_one_file_per_group``); reconcile:
   files that have a marker but no write stat (failed task attempts) are deleted.
6. Complete ``T`` under the table lock with commit metadata (every write stat and the
   table schema), then delete the heartbeat and the markers.  An input without rows, or
   any failure, removes ``T`` again instead (``InstantLifecycle.abort``).

Until step 6 readers see nothing of T: its files carry an instant that is not completed.

Step 1 is ``prepare_write``; steps 3-5 up to the check are ``write_rows`` (the Spark job;
``commit_metadata`` and ``write_result`` read its stats).  Steps 2, 6 and the orphans of step 5
are the instant's lifecycle, the one every action follows (``tablesvc/services/lifecycle``),
driven by the write as an action, with the eager rollback before and the inline services
after: ``tablesvc/services/write.py``.
"""

from __future__ import annotations

import enum
import json
import time
from dataclasses import asdict, dataclass, replace
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.config.values import registered_value
from tablesvc.errors import InvalidInputError, TablesvcError, UnsupportedTableError
from tablesvc.fsview.names import new_file_id
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.metadata.write_key_changes import FileGroupKeyChanges, group_key_changes
from tablesvc.spark.errors import translate_task_error
from tablesvc.spark.executor_env import prepare_executors
from tablesvc.spark.progress import TaskCounters, task_counters
from tablesvc.spark.progress import phase as progress_phase
from tablesvc.spark.read_job import pack_tasks, task_items
from tablesvc.spark.session import task_identity
from tablesvc.spark.write_groups import (FG_COLUMN, GROUP_COLUMN, consecutive_groups, group_column,
                                         split_file_groups, write_partitions)
from tablesvc.spark.worker_heap import freeze_worker_heap
from tablesvc.storage import storage_for_tasks, task_storage
from tablesvc.storage.object_store import is_object_store_url
from tablesvc.table.config import MergeMode
from tablesvc.table.writable import WRITE, require_writable
from tablesvc.table.meta_fields import PARTITION_PATH as PARTITION
from tablesvc.table.meta_fields import RECORD_KEY as KEY
from tablesvc.write import (DEFAULT_PARTITION_PATH, BucketSpec, FileGroupTarget, KeySpec, WriteContext,
                            add_key_columns, bucket_file_id, bucket_of_file_id, combine_in_batch, reconcile_schema,
                            write_file_group)
from tablesvc.write.existing_keys import PresentKeys
from tablesvc.write.keys import EMPTY_KEY_PLACEHOLDER, NULL_KEY_PLACEHOLDER
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata

NEW_GROUP = ""  # file-group column value for keys the lookup index did not find
_ROUTE = "_tablesvc_route"


class Operation(enum.Enum):
    INSERT = "insert"
    UPSERT = "upsert"
    DELETE = "delete"

    @classmethod
    def parse(cls, text: str) -> "Operation":
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise InvalidInputError(f"unknown operation {text!r}: use insert, upsert or delete") from None

    @property
    def hudi_name(self) -> str:
        return self.value.upper()


@dataclass(frozen=True)
class WriteResult:
    instant: str
    operation: str
    files_written: int
    records_written: int
    inserts: int
    updates: int
    deletes: int
    file_groups_created: int
    seconds: float
    services: tuple = ()      # ServiceResults of the inline services that ran after the commit

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["services"] = [r.as_dict() for r in self.services]
        return out


def _arrow_schema(df) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def check_input_schema(incoming: pa.Schema, table, operation: str | Operation, where: str = "input") -> None:
    """Refuse input the write cannot take, from its schema alone (``where`` names it in the message):
    a missing record key, partition or ordering field, or a record key field holding a struct, list
    or map (a key is one value; Hudi would key the record by the value's text form)."""
    op = operation if isinstance(operation, Operation) else Operation.parse(operation)
    cfg = table.config
    needed = list(cfg.record_key_fields) + list(cfg.partition_fields)
    if op is not Operation.DELETE and cfg.ordering_field:
        needed.append(cfg.ordering_field)
    # "a.b" reaches into struct a (as keys.py reads it)
    missing = [c for c in needed if c not in incoming.names and c.split(".", 1)[0] not in incoming.names]
    if missing:
        raise InvalidInputError(f"{where} lacks column(s) {', '.join(missing)} that table {cfg.name} needs "
                                f"(record key, partition{', ordering' if cfg.ordering_field else ''} fields)")
    for name in cfg.record_key_fields:
        if name not in incoming.names:
            continue
        kind = incoming.field(name).type
        if pa.types.is_nested(kind):
            raise InvalidInputError(f"{where}: record key field {name!r} is {kind}; a record key field must hold "
                                    "single values (string, number, date, ...)")


def _tagged(rows, key_spec: KeySpec, bucket: BucketSpec | None):
    """``rows`` plus their key, partition path and bucket (a null bucket without a bucket index:
    an insert, one new file group per partition)."""
    keyed = add_key_columns(rows, key_spec)
    if bucket is not None:
        fg = pc.cast(bucket.bucket_ids(keyed.column(KEY), key_spec.record_key_fields), pa.string())
    else:
        fg = pa.nulls(keyed.num_rows, pa.string())
    return keyed.append_column(FG_COLUMN, fg)


def _tag_batches(key_spec: KeySpec, bucket: BucketSpec | None):
    """``mapInArrow`` body: every row plus its key, partition path and bucket (lookup path, old Spark)."""
    def run(batches):
        freeze_worker_heap()
        for batch in batches:
            yield _tagged(batch, key_spec, bucket)
    return run


def _route_rows(key_spec: KeySpec, bucket: BucketSpec | None):
    """Arrow UDF body: the (partition path, bucket) of every row, from its key and partition fields
    only; the bucket is null without a bucket index (an insert: one new file group per partition)."""
    def run(fields: pa.Array) -> pa.Array:  # a struct of those columns -> a struct; Spark reads the hints
        freeze_worker_heap()
        keyed = add_key_columns(pa.RecordBatch.from_struct_array(fields), key_spec)
        if bucket is not None:
            fg = pc.cast(bucket.bucket_ids(keyed.column(KEY), key_spec.record_key_fields), pa.string())
        else:
            fg = pa.nulls(keyed.num_rows, pa.string())
        return pa.StructArray.from_arrays([keyed.column(PARTITION), fg], names=[PARTITION, FG_COLUMN])
    return run


def _routed(df, key_spec: KeySpec, bucket: BucketSpec | None):
    """``df`` with the partition path and file-group columns the write groups by, or None on a
    Spark without Arrow UDFs (before 4.1).

    Where the file group is a function of the key (bucket index, or an insert into new groups)
    but the JVM cannot compute it (``_jvm_route``): an Arrow UDF sees just the key and partition
    columns and returns two short strings, so whole rows cross to Python once, in the write
    tasks, instead of three times (tag pass out and back, then the write).  The write task
    computes the record keys again: cheaper than shipping them through the shuffle.
    """
    try:
        from pyspark.sql.functions import arrow_udf
    except ImportError:
        return None
    from pyspark.sql import functions as F

    tops = dict.fromkeys(f.split(".", 1)[0] for f in (*key_spec.record_key_fields, *key_spec.partition_fields))
    fields = F.struct(*[F.col("`" + name.replace("`", "``") + "`") for name in tops])
    route = arrow_udf(_route_rows(key_spec, bucket), f"`{PARTITION}` string, `{FG_COLUMN}` string")
    routed = df.withColumn(_ROUTE, route(fields))
    return routed.withColumns({PARTITION: F.col(f"{_ROUTE}.{PARTITION}"),
                               FG_COLUMN: F.col(f"{_ROUTE}.{FG_COLUMN}")}).drop(_ROUTE)


# -- routing in the JVM -----------------------------------------------------------------------
#
# Where the key and partition fields are strings, integers or booleans (their Spark and Java
# spellings agree), the partition path and the bucket are Spark expressions, and no row crosses
# to Python before the write tasks.  The bucket takes Java's ``String.hashCode`` from the JVM
# itself (``reflect`` of ``java.util.Objects.hashCode``); the ``List.hashCode`` around it is
# 64-bit integer arithmetic masked to 32 bits.  Only their hash crosses the shuffle
# (``_JvmRoute.group_hash``); the write task computes both again in Python and groups by
# those, and the driver refuses a commit that writes one file group twice
# (``_check_one_file_per_group``), so a difference can fail a write but never split a file
# group.

_JVM_KEY_TYPES = ("string", "tinyint", "smallint", "int", "bigint", "boolean")
_MASK32 = 0xFFFFFFFF


# What the routing columns raise (Spark's ``raise_error``) in the shuffle's map stage, before
# any file is written.  The first reads back as InvalidInputError (``translate_task_error``);
# the second makes the write route the batch in Python instead (``write_dataframe``).
_BLANK_KEY_ERROR = (f"tablesvc.errors.{InvalidInputError.__name__}: "
                    "input has records with a null record key or an empty one ({})")
INEXACT_ROUTE = "tablesvc: a record key Hudi reads as field:value pairs, routed in Python instead"


@dataclass(frozen=True)
class _JvmRoute:
    """The routing as Spark SQL text; each property parses one column from it."""
    partition_sql: str   # the partition path, as keys.partition_paths makes it
    file_group_sql: str  # the bucket (string), or a null string without a bucket index
    exact_sql: str       # false for a key Hudi's parsing could read otherwise
    blank_sql: str       # true for a key keys.record_keys refuses (null or empty)
    key_fields: tuple[str, ...]

    @property
    def partition(self):
        from pyspark.sql import functions as F

        return F.expr(self.partition_sql)

    @property
    def file_group(self):
        from pyspark.sql import functions as F

        return F.expr(self.file_group_sql)

    @property
    def exact(self):
        from pyspark.sql import functions as F

        return F.expr(self.exact_sql)

    def group_hash(self):
        """The write job's group column (``group_column``) of the checked partition path and file
        group: the rows cross the shuffle and into Python with this one long instead of both
        strings, and the write task computes partition and bucket again (``_tagged``)."""
        return group_column(*self.checked().values())

    def checked(self) -> dict:
        """The partition path and file-group columns that fail the job on a blank key or on a key
        whose bucket the JVM cannot compute.  The write groups by both, so Spark evaluates them
        for every row before the shuffle: the checks cost no scan of their own."""
        from pyspark.sql import functions as F

        blank = _sql_string(_BLANK_KEY_ERROR.format(", ".join(self.key_fields)))
        return {PARTITION: F.expr(f"CASE WHEN {self.blank_sql} THEN raise_error({blank}) "
                                  f"ELSE {self.partition_sql} END"),
                FG_COLUMN: F.expr(f"CASE WHEN NOT ({self.exact_sql}) THEN raise_error({_sql_string(INEXACT_ROUTE)}) "
                                  f"ELSE {self.file_group_sql} END")}


# The expressions are built as SQL text and parsed once per column (``F.expr``): building them
# from Column functions took ~120 py4j round trips, 0.09 s of every write.

def _sql_string(text: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _spark_column(schema, name: str):
    """``(SQL text, simple type name)`` for a key or partition field (``a.b`` reaches into
    structs, as keys.py does), or None when absent."""
    from pyspark.sql.types import StructType

    def quoted(parts):
        return ".".join("`" + p.replace("`", "``") + "`" for p in parts)

    if name in schema.names:
        return quoted([name]), schema[name].dataType.simpleString()
    parts, current = name.split("."), schema
    for part in parts:
        if not isinstance(current, StructType) or part not in current.names:
            return None
        current = current[part].dataType
    return quoted(parts), current.simpleString()


def _jvm_strings(schema, name: str) -> str | None:
    """The field's values as strings in Spark (SQL text), where they spell as keys.value_strings spells them."""
    found = _spark_column(schema, name)
    if found is None or found[1] not in _JVM_KEY_TYPES:
        return None
    return f"CAST({found[0]} AS STRING)"


def _java_string_hash(value: str) -> str:
    return f"CAST(reflect('java.util.Objects', 'hashCode', {value}) AS BIGINT)"


def _has(value: str, char: str) -> str:
    return f"(instr({value}, {_sql_string(char)}) > 0)"


def _jvm_partition_path(schema, spec: KeySpec) -> str | None:
    if not spec.partition_fields:
        return "''"
    if spec.url_encode:
        return None
    parts = []
    for field in spec.partition_fields:
        value = _jvm_strings(schema, field)
        if value is None:
            return None
        value = (f"CASE WHEN {value} IS NULL OR {value} = '' THEN {_sql_string(DEFAULT_PARTITION_PATH)} "
                 f"ELSE {value} END")
        parts.append(f"concat({_sql_string(field + '=')}, {value})" if spec.hive_style else value)
    return f"concat_ws('/', {', '.join(parts)})"


def _jvm_bucket(schema, spec: KeySpec, bucket: BucketSpec) -> tuple[str, str] | None:
    """``(bucket as a string, exact)`` as SQL text, or None for key types Spark spells differently."""
    fields = spec.record_key_fields
    values = [_jvm_strings(schema, f) for f in fields]
    if any(v is None for v in values) or any("," in f or ":" in f for f in fields):
        return None
    if len(fields) == 1 and not spec.encode_single_key_field_name:
        key = values[0]
        list_hash = f"(31 + {_java_string_hash(key)})"  # [key].hashCode()
        exact = f"NOT ({_has(key, ',')} AND {_has(key, ':')})"  # else Hudi reads field:value pairs
    elif len(fields) == 1:
        shown = (f"CASE WHEN {values[0]} IS NULL THEN {_sql_string(NULL_KEY_PLACEHOLDER)} "
                 f"WHEN {values[0]} = '' THEN {_sql_string(EMPTY_KEY_PLACEHOLDER)} ELSE {values[0]} END")
        prefixed = f"concat({_sql_string(fields[0] + ':')}, {shown})"
        list_hash = f"(31 + {_java_string_hash(prefixed)})"
        exact = f"NOT {_has(shown, ',')}"  # "f:v" without ',' is hashed whole
    else:
        # "f1:v1,f2:v2": Hudi hashes the hash fields' values, placeholders as null / "" (hash 0).
        wanted = set(bucket.hash_fields)
        take_all = not wanted or wanted == {""}
        list_hash = "CAST(1 AS BIGINT)"
        for field, value in zip(fields, values):
            if take_all or field in wanted:
                blanks = ", ".join(_sql_string(v) for v in ("", NULL_KEY_PLACEHOLDER, EMPTY_KEY_PLACEHOLDER))
                element = (f"CASE WHEN {value} IS NULL OR {value} IN ({blanks}) THEN CAST(0 AS BIGINT) "
                           f"ELSE {_java_string_hash(value)} END")
                list_hash = f"((({list_hash}) * 31 + {element}) & {_MASK32})"
        # a value holding ',' or ':' moves Hudi's split points
        exact = " AND ".join(f"NOT coalesce({_has(v, ',')} OR {_has(v, ':')}, false)" for v in values)
    ids = f"(({list_hash}) & {0x7FFFFFFF}) % {bucket.num_buckets}"
    return f"CAST({ids} AS STRING)", f"coalesce({exact}, true)"


def _jvm_blank_key(schema, spec: KeySpec) -> str | None:
    """SQL text: true where ``keys.record_keys`` refuses the key (one plain key field null or
    empty; several fields, or one with its name encoded, all null or empty)."""
    terms = []
    for field in spec.record_key_fields:
        value, found = _jvm_strings(schema, field), _spark_column(schema, field)
        if found is None:
            return None
        # other types (floating point, dates, ...) are never empty: null is the blank value
        terms.append(f"coalesce({value} = '', true)" if value is not None else f"({found[0]} IS NULL)")
    return " AND ".join(terms) if terms else None


def _jvm_route(schema, spec: KeySpec, bucket: BucketSpec | None) -> _JvmRoute | None:
    partition = _jvm_partition_path(schema, spec)
    blank = _jvm_blank_key(schema, spec)
    if partition is None or blank is None:
        return None
    fields = tuple(spec.record_key_fields)
    if bucket is None:
        return _JvmRoute(partition, "CAST(NULL AS STRING)", "true", blank, fields)
    found = _jvm_bucket(schema, spec, bucket)
    if found is None:
        return None
    return _JvmRoute(partition, found[0], found[1], blank, fields)


def _check_routing(records: pa.Table, partition: str, bucket_text: str | None, bucket: BucketSpec | None,
                   key_spec: KeySpec) -> None:
    """Every row of a group must belong to the group's file group; a row routed elsewhere would
    leave its file group written by two tasks."""
    wrong = pc.invert(pc.equal(records.column(PARTITION), partition))
    if bucket is not None:
        ids = bucket.bucket_ids(records.column(KEY), key_spec.record_key_fields)
        wrong = pc.or_(wrong, pc.not_equal(ids, int(bucket_text)))
    if pc.any(wrong).as_py():
        row = pc.index(wrong, True).as_py()
        raise TablesvcError(f"row {row} was routed to file group ({partition!r}, {bucket_text}) but belongs "
                            "elsewhere: Spark's partition path or bucket differs from tablesvc's")


def _write_groups(ctx: WriteContext, targets: dict, bucket: BucketSpec | None, ordering_field: str | None,
                  data_columns: tuple[str, ...], key_spec: KeySpec, hashed: bool = False, *,
                  present: PresentKeys | None = None, counters: TaskCounters | None = None,
                  key_changes: bool = False):
    """``mapInArrow`` body of the write job: the task's rows arrive sorted by ``GROUP_COLUMN``;
    each file group's rows are gathered (``consecutive_groups``) and written on their own (keys,
    routing check, dedupe, then ``write_file_group``); the task yields write stats only.

    ``present`` (bucket index): counts the keys an existing file group already holds, so that the
    write stat tells inserts from updates (``write.existing_keys``).  ``counters``: progress
    lines' accumulators (file groups, rows), when the CLI prints them.  ``key_changes``: each file
    group also reports the keys it inserted, updated and deleted (``metadata.write_key_changes``,
    for the metadata table's record index), in the ``keys`` column of its first row.

    ``hashed``: the rows carry the group hash but not the partition path and file group (routing
    in the JVM, ``_JvmRoute.group_hash``); the task computes keys, partition paths and buckets
    for each run and splits it by them.  Nothing then compares them with Spark's: should the
    two ever disagree, a file group could reach two runs, and the driver refuses a commit that
    writes one file group twice (``_check_one_file_per_group``)."""
    def write_one(group: pa.Table) -> pa.Table:
        partition = group.column(PARTITION)[0].as_py()
        fg = group.column(FG_COLUMN)[0].as_py()
        if bucket is not None:
            target = targets.get((partition, fg)) or FileGroupTarget.new(partition, bucket_file_id(int(fg)))
        elif fg:
            target = targets[(partition, fg)]
        else:  # keys the lookup did not find (or an insert): one new file group per partition
            target = FileGroupTarget.new(partition, new_file_id())
        if hashed:
            keyed = group.drop_columns([FG_COLUMN])     # the task keyed and split the run itself
        else:
            # Keys again (cheap, pyarrow): the routed path does not ship them, and an input column
            # named like a key column must never stand in for the key.
            keyed = add_key_columns(group.drop_columns([FG_COLUMN]), key_spec)
            if bucket is not None or not fg:  # routed by the key (not by the lookup join)
                _check_routing(keyed, partition, fg, bucket, key_spec)
        records = combine_in_batch(keyed, ordering_field)
        keep = [c for c in records.column_names if c in data_columns or c in (KEY, PARTITION)]
        task_partition, stage, attempt = task_identity()
        storage = task_storage(ctx.base_path, ctx.storage)
        found = None
        mask = None
        if present is not None and target.existing:
            if key_changes:   # which keys, not only how many
                mask = present.mask(storage, partition, target.file_id, records.column(KEY))
                found = pc.sum(mask).as_py() or 0
            else:
                found = present.count(storage, partition, target.file_id, records.column(KEY))
        changes = None
        if key_changes:
            # updates are left out: the record index needs only inserts and deletes, and an
            # upsert's updated keys would be most of its keys, all shipped to the driver
            changes = group_key_changes(partition, target.file_id, ctx.instant, target.existing,
                                        ctx.operation == "delete", records.column(KEY), mask,
                                        keep_updates=False).to_json()
        stats = write_file_group(storage, replace(ctx, stage_id=stage), target, records.select(keep), task_partition,
                                 attempt, present_keys=found)
        if counters is not None:
            counters.add(1, records.num_rows)
        # A group that wrote nothing (deletes of keys no file group holds) still answers, with a
        # null stat: the driver tells an input without rows from one whose rows changed nothing.
        rows = max(len(stats), 1)
        return pa.table({"partition": pa.array([partition] * rows, pa.string()),
                         "stat": pa.array([json.dumps(s.to_avro(), default=str) for s in stats] or [None],
                                          pa.string()),
                         "keys": pa.array([changes] + [None] * (rows - 1), pa.string())})

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        for rows in consecutive_groups(batches):
            rows = rows.drop_columns([GROUP_COLUMN])
            for group in split_file_groups(_tagged(rows, key_spec, bucket) if hashed else rows):
                yield from write_one(group).to_batches()
    return run


def rows_by_file_group(frame, hashed: bool = False):
    """The write job's shuffle: ``frame`` (rows with their partition path and file group, or
    ``hashed``: with ``GROUP_COLUMN`` already) plus ``GROUP_COLUMN``, partitioned and sorted by
    it, so that a ``mapInArrow`` over the result meets each file group's rows as one run
    (``consecutive_groups``).  The benchmark times this shuffle alone with a task that writes
    nothing (tests/benchmarks/test_bench_write.py)."""
    grouped = frame if hashed else frame.withColumn(GROUP_COLUMN, group_column())
    n = write_partitions(frame.sparkSession)
    spread = grouped.repartition(GROUP_COLUMN) if n is None else grouped.repartition(n, GROUP_COLUMN)
    return spread.sortWithinPartitions(GROUP_COLUMN)


def _slice_keys(ctx: ReadContext, groups: Sequence[bytes]):
    """Per slice: (partition, record key, file id) of every live record, for the lookup join."""
    def run(batches):
        storage = task_storage(ctx.base_path, ctx.storage)
        for spec in task_items(batches, groups):
            keys = read_file_slice(storage, spec, ctx).column(KEY).combine_chunks()
            n = len(keys)
            yield pa.RecordBatch.from_arrays(
                [pa.array([spec.partition] * n, pa.string()), keys, pa.array([spec.file_id] * n, pa.string())],
                names=["_lk_partition", "_lk_key", "_lk_fg"])
    return run


def _lookup_targets(spark, table, view_slices, keyed, partitions: set[str]):
    """Lookup index for tables without a bucket index: join the batch's keys with the keys of
    the latest slices of the partitions it touches; unmatched keys get ``NEW_GROUP``."""
    from pyspark.sql import functions as F

    slices = [s for s in view_slices if s.partition in partitions]
    if not slices:
        return keyed.withColumn(FG_COLUMN, F.lit(NEW_GROUP)), {}
    targets = {(s.partition, s.file_id): FileGroupTarget.from_slice(s) for s in slices}
    ctx = ReadContext.for_table(table, columns=(KEY,))
    tasks = pack_tasks(spark, [SliceSpec.from_file_slice(s) for s in slices], [s.total_size for s in slices])
    existing = tasks.frame.mapInArrow(_slice_keys(ctx, tasks.groups),
                                      "_lk_partition string, _lk_key string, _lk_fg string")
    base = keyed.drop(FG_COLUMN)
    joined = base.join(existing, (base[PARTITION] == existing["_lk_partition"]) & (base[KEY] == existing["_lk_key"]),
                       "left")
    return (joined.withColumn(FG_COLUMN, F.coalesce(F.col("_lk_fg"), F.lit(NEW_GROUP)))
            .drop("_lk_partition", "_lk_key", "_lk_fg")), targets


@dataclass(frozen=True)
class PreparedWrite:
    """A write checked and ready to run (``prepare_write``): nothing of the table changed yet."""
    table: object
    table_config: object        # table.config as the checks read it
    df: object                  # the input DataFrame
    op: Operation
    started: float              # time.monotonic() when the write began (WriteResult.seconds)
    config: object              # the ServiceConfig in force
    data_schema: str            # the table schema after this write (Avro JSON)
    data_columns: tuple[str, ...]
    key_spec: KeySpec
    bucket: BucketSpec | None
    jvm_route: object           # routing in Spark expressions, or None (routed in Python)
    log_block_format: str


def prepare_write(table, df, operation: str | Operation = Operation.UPSERT, *,
                  log_block_format: str | None = None, config=None) -> PreparedWrite | None:
    """Step 1 of a write, before any table change: the table and input schema checked, the
    schema reconciled, routing chosen, the executors checked.  ``None`` when a delete meets a
    table that was never written (nothing to do).

    ``log_block_format`` (avro or parquet) defaults to ``hoodie.logfile.data.block.format``
    in ``config``; ``config`` defaults to the table's ``.hoodie/tablesvc.yaml`` over the
    built-in defaults.  The write as an action (eager rollback, this, the instant's lifecycle
    around ``write_rows``, the inline services) is ``tablesvc/services/write.py``.
    """
    op = operation if isinstance(operation, Operation) else Operation.parse(operation)
    started = time.monotonic()
    spark = df.sparkSession
    require_writable(table, WRITE)
    cfg = table.config
    incoming = _arrow_schema(df)
    check_input_schema(incoming, table, op)
    timeline = table.timeline()
    old_schema = table.schema(timeline)
    if op is Operation.DELETE:
        if old_schema is None:
            return None  # nothing was ever written: nothing to delete
        data_schema = old_schema
    else:
        data_schema = reconcile_schema(old_schema, incoming, cfg.record_key_fields, cfg.ordering_field,
                                       cfg.partition_fields, table_name=cfg.name)
    key_spec = KeySpec.from_config(cfg)
    bucket = BucketSpec.from_props(cfg.props)
    # No scan of the input ahead of the write: the routing columns refuse a blank key before
    # the shuffle (the write's own map stage), and an input without rows is found when the
    # write job returns no group (the instant is removed again).
    jvm_route = _jvm_route(df.schema, key_spec, bucket) if bucket is not None or op is Operation.INSERT else None
    if config is None:
        from tablesvc.config import load_config

        config = load_config(table.storage, table_path=table.base_path)
    data_columns = tuple(f["name"] for f in json.loads(data_schema)["fields"])
    if log_block_format is None:
        log_block_format = registered_value(config, "hoodie.logfile.data.block.format")

    # The executors must run this write's tasks (tablesvc's code shipped to them if they lack
    # it, and obstore for a table on an object store): known before the first table change, not
    # from a task failing mid-write.
    prepare_executors(spark, object_store=is_object_store_url(table.base_path))
    return PreparedWrite(table=table, table_config=cfg, df=df, op=op, started=started, config=config, data_schema=data_schema,
                         data_columns=data_columns, key_spec=key_spec, bucket=bucket, jvm_route=jvm_route,
                         log_block_format=log_block_format)


def write_rows(prepared: PreparedWrite, instant: str,
               v6_pending_compaction_targets, key_changes_out: list | None = None) -> dict[str, list[WriteStat]] | None:
    """Steps 3-5 of a write, the Spark job, for the started instant ``instant``: route, write
    the file groups, check that no file group got two files.  The write stats by partition, or
    None when the input has no row.  The instant's lifecycle around it (request, start, orphans,
    commit, abort) is the action's (``tablesvc/services/write.py``); an error of a Spark task
    comes back as tablesvc's own (``translate_task_error``).

    ``v6_pending_compaction_targets(table, targets)``: the compaction planner's rule for v6
    tables (a log joins the slice of a pending compaction plan), passed in by the action:
    spark/ sits below services/ (docs/architecture.md).

    ``key_changes_out``: when given, the tasks also report each file group's inserted, updated
    and deleted keys (``metadata.write_key_changes``), appended to it: the metadata table's
    record index needs them at the commit."""
    try:
        return _write_rows(prepared, instant, v6_pending_compaction_targets, key_changes_out)
    except BaseException as e:
        raise translate_task_error(e) from None


def _write_rows(prepared: PreparedWrite, instant: str,
                v6_pending_compaction_targets, key_changes_out: list | None = None) -> dict[str, list[WriteStat]] | None:
    table, df, op = prepared.table, prepared.df, prepared.op
    data_schema, data_columns, log_block_format = prepared.data_schema, prepared.data_columns, prepared.log_block_format
    key_spec, bucket, jvm_route = prepared.key_spec, prepared.bucket, prepared.jvm_route
    spark = df.sparkSession
    cfg = prepared.table_config
    view_timeline = table.timeline()
    view_slices = table.file_system_view(view_timeline).latest_file_slices(table.storage)
    from pyspark.sql.types import StringType, StructField, StructType

    tagged_schema = StructType(list(df.schema.fields) + [StructField(c, StringType()) for c in
                                                         (KEY, PARTITION, FG_COLUMN)])
    # a StructType, not DDL text: the text costs a round trip to the JVM's parser
    stats_schema = StructType([StructField("partition", StringType()), StructField("stat", StringType()),
                               StructField("keys", StringType())])
    want_keys = key_changes_out is not None

    def routed_in_python():
        keyed = _routed(df, key_spec, bucket) if bucket is not None or op is Operation.INSERT else None
        return keyed if keyed is not None else df.mapInArrow(_tag_batches(key_spec, bucket), tagged_schema)

    keyed = df.withColumn(GROUP_COLUMN, jvm_route.group_hash()) if jvm_route is not None else routed_in_python()
    if bucket is not None:
        targets = {}
        for s in view_slices:
            b = bucket_of_file_id(s.file_id)
            if b is not None:
                targets[(s.partition, str(b))] = FileGroupTarget.from_slice(s)
    elif op is Operation.INSERT:
        targets = {}
    else:
        with progress_phase(f"write {instant}"):    # a scan of the input: progress lines too
            partitions = {r[0] for r in keyed.select(PARTITION).distinct().collect()}
        keyed, targets = _lookup_targets(spark, table, view_slices, keyed, partitions)
    if cfg.version < 8:
        # Compaction, v6 only (docs/compaction.md): a file group in a pending compaction plan C
        # takes its new log into slice C (named with base instant C), or C's completion would hide
        # it.  v8/v9 need nothing: a log joins the slice its completion time falls into.
        targets = v6_pending_compaction_targets(table, targets)
    ctx = WriteContext(base_path=table.base_path, table_name=cfg.name, table_version=cfg.version,
                       instant=instant, data_schema_json=data_schema,
                       ordering_field=cfg.ordering_field, log_block_format=log_block_format,
                       operation=op.value, stage_id=0, storage=storage_for_tasks(table.storage))
    ordering = None if op is Operation.DELETE else cfg.ordering_field

    # The bucket index sends new keys into existing file groups too: the write tasks count
    # the keys each group held before, inserts and updates apart (write.existing_keys).
    # A table whose slices this reader cannot merge (CUSTOM merge mode) or that stores no record
    # keys (no meta fields) keeps Hudi's bucket-index count: every record an update.
    present = None
    if want_keys and bucket is not None and (not cfg.populate_meta_fields or cfg.merge_mode is MergeMode.CUSTOM):
        raise UnsupportedTableError(f"{table.base_path}: a bucket-index table without meta fields or with CUSTOM "
                                    "merge mode keeps a record index tablesvc cannot update (it cannot tell "
                                    "which keys a file group holds)")
    if bucket is not None and (op is not Operation.DELETE or want_keys) and cfg.populate_meta_fields \
            and cfg.merge_mode is not MergeMode.CUSTOM:
        present = PresentKeys(ReadContext.for_table(table, view_timeline, columns=(KEY,)),
                              {(s.partition, s.file_id): SliceSpec.from_file_slice(s) for s in view_slices})
    counters = task_counters(spark)

    def run_write_job(frame, hashed: bool) -> list:
        # One file group at a time in a task's memory (a shuffle partition may hold many);
        # the rows that come back are write stats only: a few hundred bytes per file group.
        write_group = _write_groups(ctx, targets, bucket, ordering, data_columns, key_spec, hashed,
                                    present=present, counters=counters, key_changes=want_keys)
        return rows_by_file_group(frame, hashed).mapInArrow(write_group, stats_schema).collect()

    with progress_phase(f"write {instant}"):
        try:
            rows = run_write_job(keyed, hashed=jvm_route is not None)
        except Exception as e:
            if jvm_route is None or INEXACT_ROUTE not in str(e):
                raise
            # Keys Hudi parses as field:value pairs: their bucket is Python's to compute.  The
            # job stopped in its map stage, before any file was written.
            rows = run_write_job(routed_in_python(), hashed=False)
    if not rows:
        return None     # the input has no row: nothing to do
    stats: dict[str, list[WriteStat]] = {}
    for row in rows:
        if row["stat"] is not None:
            stats.setdefault(row["partition"], []).append(WriteStat.from_avro(json.loads(row["stat"])))
        if want_keys and row["keys"] is not None:
            key_changes_out.append(FileGroupKeyChanges.from_json(row["keys"]))
    _check_one_file_per_group(instant, stats, bucket)
    return stats


def commit_metadata(prepared: PreparedWrite, stats: dict[str, list[WriteStat]]) -> bytes:
    """The write's commit metadata: every write stat and the table schema after the write."""
    metadata = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in stats.items()},
                              extra_metadata={"schema": prepared.data_schema}, operation_type=prepared.op.hudi_name)
    return encode_commit_metadata(metadata, prepared.table_config.layout)


def write_result(prepared: PreparedWrite, instant: str, stats: dict[str, list[WriteStat]]) -> WriteResult:
    """What a committed write reports; no services yet, and the seconds so far (the action adds both)."""
    all_stats = [s for v in stats.values() for s in v]
    return WriteResult(
        instant=instant, operation=prepared.op.hudi_name, files_written=len(all_stats),
        records_written=sum(s.num_writes or 0 for s in all_stats),
        inserts=sum(s.num_inserts or 0 for s in all_stats),
        updates=sum(s.num_update_writes or 0 for s in all_stats),
        deletes=sum(s.num_deletes or 0 for s in all_stats),
        file_groups_created=sum(1 for s in all_stats if s.prev_commit in (None, "null")),
        seconds=round(time.monotonic() - prepared.started, 3))


def _check_one_file_per_group(instant: str, stats: dict[str, list[WriteStat]], bucket: BucketSpec | None) -> None:
    """A write creates one file per file group, written by one task: two files for one file group
    (or, with the bucket index, for one bucket of a partition) mean its rows reached two groups
    of the write job, and the commit would leave it split.  The write is undone instead."""
    for partition, written in stats.items():
        seen: set = set()
        for stat in written:
            number = bucket_of_file_id(stat.file_id) if bucket is not None else None
            group = stat.file_id if number is None else number
            if group in seen:
                what = f"file group {stat.file_id}" if number is None else f"bucket {number}"
                raise TablesvcError(f"write {instant}: {what} of partition {partition!r} was written by two groups "
                                    "of the write job (Spark's routing and tablesvc's differ); nothing of this "
                                    "write is committed")
            seen.add(group)

