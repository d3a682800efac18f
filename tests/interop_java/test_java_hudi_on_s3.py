"""Java Hudi and tablesvc on the same S3 table (issues #26 and #28; docs/interop.md, "Java Hudi on S3").

The endpoint is moto on loopback (the session fixture ``s3_endpoint``, tests/s3_server.py).  Java
Hudi reaches it through Hadoop's S3A connector (the jars ``make interop`` copies into
.cache/hudi/s3a) with the ``fs.s3a.*`` settings a Java user writes, and its paths are ``s3a://``
URLs.  tablesvc opens the same URL with the same S3A keys (``Table.open(..., options=)``), and
hudi-rs and tablesvc's checking reads take the endpoint in object_store's names.  Nothing of the
table is on local disk.

1. Java writes a MERGE_ON_READ table with its metadata table as its defaults keep it (table
   version 9, Hudi 1.2's default); tablesvc log-compacts, compacts and cleans it; Java reads every
   state back, and so do hudi-rs and tablesvc (``reader_agreement``), each equal to the model of
   what was written (``event_time_model``); at the end Java compares its metadata table with the
   objects (``metadata_validation``).
2. tablesvc creates a table on S3 (table version 8, with a metadata table, as ``tablesvc init``
   makes it) and writes it; Java reads every state, then upserts on it with the settings the
   table records, and the three readers agree again.

Not covered: a Java writer beside tablesvc on S3 (Hudi's storage-based lock provider is in
``hudi-aws``, which does not resolve here; docs/storage.md)."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest
from event_time_model import EventTimeModel
from java_hudi import COLUMNS, SCHEMA_DDL, JavaHudi, JavaHudiUnavailable, JavaTable
from metadata_validation import validate_metadata_table
from reader_agreement import ThreeReaders
from s3_server import ACCESS_KEY, REGION, SECRET_KEY
from scenario_rows import assert_ran, rows

from tablesvc.api import Table, TableSpec
from timeline.instant import Action

pytestmark = [pytest.mark.interop_java, pytest.mark.s3]

# what a default Hudi 1.2 Spark writer lists in hoodie.table.metadata.partitions
JAVA_DEFAULT_PARTITIONS = {"files", "column_stats", "partition_stats"}
NO_INLINE_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.compact.inline": "false",
                      "hoodie.log.compaction.inline": "false"}


def s3a_settings(server) -> dict[str, str]:
    """The endpoint in Hadoop S3A's keys, as a Java Hudi user configures it: path-style requests,
    plain HTTP, a region, and the credentials from these keys only (no environment, no instance
    metadata).  tablesvc takes the same keys (docs/storage.md, "Credentials and settings")."""
    return {"fs.s3a.endpoint": f"127.0.0.1:{server.port}", "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": REGION,
            "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            # Java's metadata-table validation opens many HFile streams at once (S3A's default pool is 96)
            "fs.s3a.connection.maximum": "1000"}


def fresh_table_url(server, name: str) -> str:
    return server.url("interop", uuid.uuid4().hex[:12], name).replace("s3://", "s3a://", 1)


@pytest.fixture(scope="module")
def java_on_s3(java_hudi_setup, s3_endpoint, tmp_path_factory):
    """One driver with S3A for both scenarios (the newest bundle writes v8 and v9 alike): its JVM,
    with the 280 MB AWS SDK on its class path, takes 20-40 s to start on a loaded machine."""
    try:
        driver = JavaHudi(java_hudi_setup, java_hudi_setup.bundle, tmp_path_factory.mktemp("java-s3"),
                          s3a=s3a_settings(s3_endpoint)).start()
    except JavaHudiUnavailable as exc:
        pytest.fail(f"Java Hudi could not start with S3A: {exc}", pytrace=False)
    yield driver
    driver.close()


def test_java_writes_on_s3_tablesvc_services(java_on_s3, s3_endpoint, spark):
    t0 = time.perf_counter()
    s3a = s3a_settings(s3_endpoint)
    java = java_on_s3
    path = fresh_table_url(s3_endpoint, "java_table")
    table = JavaTable(path, "java_on_s3", 9, java.bundle, default_metadata=True)
    readers = ThreeReaders(java, table, spark, storage_options=s3_endpoint.options())
    model = EventTimeModel()

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        readers.check(step, model.rows())

    def tablesvc_step(step: str, action: str, run):
        result = assert_ran(run(Table.open(path, options=s3a)), action)
        readers.check(step, model.rows())
        return result

    java_write("Java insert", "insert", rows(range(40), 1000, "a"))
    listed = set(Table.open(path, options=s3a).config.metadata_partitions)
    assert listed == JAVA_DEFAULT_PARTITIONS, f"a default Java 1.2 writer on S3 listed {sorted(listed)}"
    # stored keys only: Java routes new keys into a small file group by rewriting its base file, and
    # then the slice starts again with no log block for tablesvc's log compaction to fold
    java_write("Java upsert (updates, and older events that lose)", "upsert",
               rows(range(0, 20, 2), 2000, "b") + rows((1, 3, 7), 10, "old"))
    java_write("Java delete", "delete", rows((5, 13), 3000, "d"))
    t_java = time.perf_counter() - t0

    lc = tablesvc_step("tablesvc log compaction", "logcompaction", lambda t: t.log_compact(spark=spark))
    c = tablesvc_step("tablesvc compaction", "compaction", lambda t: t.compact(spark=spark))
    java_write("Java upsert after tablesvc's compaction", "upsert", rows((0, 1, 27, 40, 41), 5000, "e"))
    cl = tablesvc_step("tablesvc clean", "clean",
                       lambda t: t.clean(options={"hoodie.cleaner.commits.retained": "1"}))
    assert cl.metrics.files_deleted > 0, cl.render()

    timeline = Table.open(path, options=s3a).timeline()
    done = {i.timestamp for i in timeline.completed()}
    assert {lc.instant, c.instant, cl.instant} <= done, (lc.instant, c.instant, cl.instant)
    assert not timeline.pending(), f"left pending: {timeline.pending()}"
    found = validate_metadata_table(java, path)
    assert not found.differences, f"Java's metadata table validation on S3\n{found.render()}"
    print(f"Java on S3 (v9, metadata table on): {len(model)} rows; Java's writes and checks {t_java:.0f} s; "
          f"tablesvc {lc.instant} logcompaction, {c.instant} compaction, {cl.instant} clean "
          f"({cl.metrics.files_deleted} files deleted); {time.perf_counter() - t0:.0f} s in all")
    print("\n".join(readers.checked))
    print(found.render())


def test_tablesvc_writes_on_s3_java_reads_and_writes(java_on_s3, s3_endpoint, spark):
    t0 = time.perf_counter()
    s3a = s3a_settings(s3_endpoint)
    path = fresh_table_url(s3_endpoint, "tablesvc_table")
    tablesvc = Table.create(path, TableSpec("tablesvc_on_s3", ("id",), "ts", ("part",), table_version=8,
                                            metadata_table=True), options=s3a)
    assert tablesvc.config.metadata_partitions == ("files",), tablesvc.config.metadata_partitions
    java = java_on_s3
    # Java keeps the metadata table as it finds it (files only) and lists through it; told nothing
    # of it, Java's writer would delete it (test_metadata_drops_java.py)
    table = replace(JavaTable.existing(path, java.bundle, properties=dict(tablesvc.config.props)),
                    files_only_metadata=True)
    assert (table.record_key, table.ordering_field, table.partition_field) == ("id", "ts", "part")
    readers = ThreeReaders(java, table, spark, storage_options=s3_endpoint.options())
    model = EventTimeModel()

    def tablesvc_write(step: str, operation: str, batch: list[tuple]) -> None:
        df = spark.createDataFrame(batch, SCHEMA_DDL).select(*COLUMNS)
        Table.open(path, options=s3a).write(df, operation, options=NO_INLINE_SERVICES)
        model.apply(operation, batch)
        readers.check(step, model.rows())

    tablesvc_write("tablesvc insert", "insert", rows(range(24), 1000, "a"))
    tablesvc_write("tablesvc upsert (updates, inserts, older events that lose)", "upsert",
                   rows(range(0, 12, 2), 2000, "b") + rows(range(24, 27), 2000, "b") + rows((1, 3), 10, "old"))
    tablesvc_write("tablesvc delete", "delete", rows((5, 7, 25), 3000, "d"))

    java.write(table, "upsert", rows((0, 9, 11, 27), 4000, "j"))
    model.apply("upsert", rows((0, 9, 11, 27), 4000, "j"))
    readers.check("Java upsert on tablesvc's table", model.rows())
    timeline = Table.open(path, options=s3a).timeline()
    assert len(timeline.completed(Action.DELTA_COMMIT)) == 4 and not timeline.pending(), timeline.completed()
    print(f"tablesvc on S3 (v8, metadata table on), Java reads and upserts: {len(model)} rows; "
          f"{time.perf_counter() - t0:.0f} s in all")
    print("\n".join(readers.checked))
