"""A small MOR table built without Spark, for the demo when no fixture tables are at hand.

It goes through the same pieces a real writer uses: ``Table.create``, the timeline
writer (requested → inflight → completed), base parquet files with the five meta
columns, Avro data and delete log blocks, and commit metadata.  The write path
proper (Spark, indexes, markers) replaces this for real data.
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.fsview.names import BaseFileName, LogFileName, PARTITION_METAFILE, new_file_id
from tablesvc.logformat import avro_data_block, avro_schema_to_arrow, delete_block, write_log_file
from tablesvc.api import Table, TableSpec
from tablesvc.table.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, META_FIELDS, PARTITION_PATH, RECORD_KEY
from timeline.instant import Action, TimelineLayout
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
from timeline.storage import join

CITIES = ("chennai", "san_francisco", "sao_paulo")

DATA_SCHEMA = {
    "type": "record", "name": "trips_record", "namespace": "hoodie.trips",
    "fields": [
        {"name": "ts", "type": ["long", "null"]},
        {"name": "uuid", "type": ["string", "null"]},
        {"name": "rider", "type": ["string", "null"]},
        {"name": "fare", "type": ["double", "null"]},
        {"name": "city", "type": ["string", "null"]},
    ],
}


def with_meta_fields(schema: dict) -> dict:
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    return dict(schema, fields=meta + list(schema["fields"]))


@dataclass(frozen=True)
class SampleTable:
    table: Table
    expected: dict[str, dict]  # record key -> latest data row, deletes applied


def _partition_metafile(table: Table, partition: str, instant: str) -> None:
    body = f"#partition metadata\ncommitTime={instant}\npartitionDepth=1\n".encode()
    path = join(table.base_path, partition, PARTITION_METAFILE)
    if not table.storage.exists(path):
        table.storage.write_new(path, body)


def build_sample_table(path: str, *, rows: int = 300, table_version: int = 8, seed: int = 7) -> SampleTable:
    """Two delta commits: inserts into one base file per city, then updates and deletes in logs."""
    rng = random.Random(seed)
    table = Table.create(path, TableSpec("trips", ("uuid",), "ts", ("city",), table_version=table_version))
    schema_json = json.dumps(DATA_SCHEMA)
    full_schema = json.dumps(with_meta_fields(DATA_SCHEMA))
    arrow_schema = avro_schema_to_arrow(full_schema)
    writer = table.timeline_writer
    layout = table.config.layout

    # -- instant 1: inserts --------------------------------------------------------------
    t1 = writer.request(Action.DELTA_COMMIT)
    writer.start(t1)
    expected: dict[str, dict] = {}
    stats: dict[str, list[WriteStat]] = {}
    groups: dict[str, tuple[str, str]] = {}
    for p_index, city in enumerate(CITIES):
        partition = f"city={city}"
        _partition_metafile(table, partition, t1.timestamp)
        file_id = new_file_id()
        base = BaseFileName(file_id, f"{p_index}-1-{p_index}", t1.timestamp)
        records = []
        for i in range(rows // len(CITIES)):
            key = f"{city[:3]}-{i:05d}"
            row = {"ts": 1_700_000_000_000 + rng.randrange(10_000), "uuid": key, "rider": f"rider-{i % 97}",
                   "fare": round(rng.uniform(5, 90), 2), "city": city}
            expected[key] = row
            records.append({COMMIT_TIME: t1.timestamp, COMMIT_SEQNO: f"{t1.timestamp}_{p_index}_{i}",
                            RECORD_KEY: key, PARTITION_PATH: partition, FILE_NAME: base.name, **row})
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(records, schema=arrow_schema), sink)
        data = sink.getvalue()
        table.storage.write_new(join(table.base_path, partition, base.name), data)
        groups[partition] = (file_id, base.name)
        stats[partition] = [WriteStat(file_id=file_id, path=f"{partition}/{base.name}", prev_commit="null",
                                      partition_path=partition, num_writes=len(records),
                                      num_inserts=len(records), total_write_bytes=len(data),
                                      file_size_in_bytes=len(data))]
    md = CommitMetadata(partition_to_write_stats={k: tuple(v) for k, v in stats.items()},
                        extra_metadata={"schema": schema_json}, operation_type="UPSERT")
    writer.complete(t1, encode_commit_metadata(md, layout))

    # -- instant 2: updates (san_francisco) and deletes (sao_paulo) in log files -------------
    t2 = writer.request(Action.DELTA_COMMIT)
    writer.start(t2)
    stats = {}
    for p_index, (city, kind) in enumerate((("san_francisco", "update"), ("sao_paulo", "delete"))):
        partition = f"city={city}"
        file_id, base_name = groups[partition]
        keys = sorted(k for k, r in expected.items() if r["city"] == city)[:10]
        log_instant = t1.timestamp if layout is TimelineLayout.V1 else t2.timestamp
        log = LogFileName(file_id, log_instant, 1, f"{p_index}-2-{p_index}")
        if kind == "update":
            records = []
            for n, key in enumerate(keys):
                row = dict(expected[key], fare=0.0, ts=expected[key]["ts"] + 1)
                expected[key] = row
                records.append({COMMIT_TIME: t2.timestamp, COMMIT_SEQNO: f"{t2.timestamp}_{p_index}_{n}",
                                RECORD_KEY: key, PARTITION_PATH: partition, FILE_NAME: file_id, **row})
            block = avro_data_block(t2.timestamp, full_schema, records)
            counts = {"num_writes": len(records), "num_update_writes": len(records)}
        else:
            block = delete_block(t2.timestamp, full_schema, [(k, partition) for k in keys])
            for key in keys:
                del expected[key]
            counts = {"num_writes": 0, "num_deletes": len(keys)}
        data = write_log_file(table.storage, join(table.base_path, partition, log.name), [block])
        prev = t1.timestamp if layout is TimelineLayout.V1 else t2.timestamp
        stats[partition] = [WriteStat(file_id=file_id, path=f"{partition}/{log.name}", prev_commit=prev,
                                      partition_path=partition, total_write_bytes=len(data),
                                      file_size_in_bytes=len(data), log_version=1, log_offset=0,
                                      base_file=base_name, log_files=(log.name,), total_log_blocks=1, **counts)]
    md = CommitMetadata(partition_to_write_stats={k: tuple(v) for k, v in stats.items()},
                        extra_metadata={"schema": schema_json}, operation_type="UPSERT")
    writer.complete(t2, encode_commit_metadata(md, layout))
    return SampleTable(table, expected)
