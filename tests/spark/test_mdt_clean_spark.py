"""The metadata table's own clean inside tablesvc's commits: a copy of a Java-written v9 table
(metadata table keeping ``files``; one compaction by Java) upserted by tablesvc until the metadata
table has compacted twice more inside tablesvc commits and cleaned itself.  The table's own
configuration (``.hoodie/tablesvc.yaml``) keeps 1 file version, so the derived metadata policy keeps
2 (``ceil(1.2 x 1)``, as Java derives it).  After every upsert: the metadata table's listing equals
storage's, hudi-rs lists the same slices through the metadata table as tablesvc (through it and
from storage), and hudi-rs and tablesvc read the model's rows.  At the end the ``files`` partition
holds only the slices of the two newest compactions (and logs completed after the older of them),
every file an older slice had is gone, and each clean ran before the delta commit of the data
instant whose commit ran it, at a time of its own."""

from __future__ import annotations

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from fixture_tables import copy_table
from metadata_tables import check_listing_slices_and_rows, keep_only_files_partition
from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_compaction_plan import DEFAULT_MAX_DELTA_COMMITS
from timeline.instant import Action
from timeline.payloads import decode_clean_metadata

COLUMNS = ("txn_id", "txn_ts", "merchant_name")
# 2 compactions of 10 delta commits, 3 instants after the second before the clean is due, margin
MAX_UPSERTS = 2 * DEFAULT_MAX_DELTA_COMMITS + 8


def _mdt(path) -> MetadataTable:
    table = Table.open(str(path))
    return MetadataTable(table.storage, table.base_path, table.timeline())


def _files_folder(path):
    return path / ".hoodie" / "metadata" / "files"


@pytest.mark.spark
def test_the_metadata_table_cleans_itself_inside_tablesvc_commits(tmp_path, spark, fixture_root):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    keep_only_files_partition(path)
    (path / ".hoodie" / "tablesvc.yaml").write_text(
        "hoodie.cleaner.policy: KEEP_LATEST_FILE_VERSIONS\nhoodie.cleaner.fileversions.retained: 1\n"
        "hoodie.clean.automatic: false\nhoodie.compact.inline: false\n")
    model = {r[0]: r[1:] for r in hudi_rs_rows(path, COLUMNS)}
    java_compactions = {i.timestamp for i in _mdt(path).timeline.completed(Action.COMMIT)}
    assert len(java_compactions) == 1
    assert not _mdt(path).timeline.filter(actions=[Action.CLEAN])
    ever_listed: set[str] = set()
    cleans: dict[str, str] = {}          # metadata clean -> the data instant whose commit ran it
    writes = 0
    while True:
        ever_listed |= {f.name for f in _files_folder(path).iterdir()}
        table = Table.open(str(path))
        data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
        batch = (table.read().select(*data).orderBy("txn_id").limit(5)
                 .withColumn("txn_ts", F.col("txn_ts") + 1000 * (writes + 1))
                 .withColumn("merchant_name", F.lit(f"w{writes}")))
        for row in batch.select(*COLUMNS).collect():
            model[row["txn_id"]] = (row["txn_ts"], row["merchant_name"])
        known = {i.timestamp for i in _mdt(path).timeline.completed(Action.CLEAN)}
        instant = table.upsert(batch).instant
        writes += 1
        check_listing_slices_and_rows(Table.open(str(path)), path, model, COLUMNS, f"upsert {writes}")
        mdt = _mdt(path)
        cleans.update({i.timestamp: instant for i in mdt.timeline.completed(Action.CLEAN) if i.timestamp not in known})
        ours = sorted(i.timestamp for i in mdt.timeline.completed(Action.COMMIT) if i.timestamp not in java_compactions)
        if len(ours) >= 2 and any(k > ours[1] for k in cleans):
            break
        assert writes < MAX_UPSERTS, f"after {writes} upserts: compactions {ours}, cleans {sorted(cleans)}"

    mdt = _mdt(path)
    compactions = sorted(i.timestamp for i in mdt.timeline.completed(Action.COMMIT))
    newest_two = compactions[-2:]
    completion = mdt.timeline.completion_times()
    present = {f.name for f in _files_folder(path).iterdir() if f.name != ".hoodie_partition_metadata"}
    bases = {n.rsplit("_", 1)[1].split(".")[0] for n in present if n.endswith(".hfile")}
    assert bases == set(newest_two), (bases, compactions)
    for name in present:
        if ".log." in name:
            delta = name.split("_", 1)[1].split(".log.")[0]
            assert completion.get(delta, delta) >= newest_two[0], name
    # every file an older slice held is gone, and the cleans' metadata say so
    gone = {n for n in ever_listed - present if n != ".hoodie_partition_metadata"}
    deleted = set()
    for k in cleans:
        done = [f for f in mdt.timeline.files_of(k) if f.is_completed][0]
        md = decode_clean_metadata(mdt.storage.read_bytes(mdt.timeline.path_of(done)), k)
        deleted |= {n for p in md.partition_metadata.values() for n in p.success_delete_files}
    assert gone and gone <= deleted, (sorted(gone - deleted), sorted(deleted)[:5])
    assert all(n not in present for n in deleted)
    # each clean took a new time after the data instant and completed before its delta commit
    for k, data_instant in cleans.items():
        assert k > data_instant
        assert completion[k] < completion[data_instant], (k, data_instant)
    print(f"{writes} upserts; metadata compactions {compactions}; cleans {sorted(cleans)}; "
          f"{len(deleted)} files deleted")
