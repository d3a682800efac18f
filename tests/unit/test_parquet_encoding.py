"""Which columns of a new base file get a dictionary (tablesvc/write/parquet_encoding.py), and
that a file written with that choice reads back identically through hudi-rs-compatible Parquet."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.write.parquet_encoding import SAMPLE_ROWS, dictionary_columns


def rows(n: int) -> pa.Table:
    return pa.table({
        "_hoodie_commit_time": ["20261122000000000"] * n,
        "_hoodie_commit_seqno": [f"20261122000000000_0_{i}" for i in range(n)],
        "_hoodie_record_key": [f"key-{i:07d}" for i in range(n)],
        "_hoodie_partition_path": ["city=paris"] * n,
        "uuid": [f"key-{i:07d}" for i in range(n)],
        "city": ["paris", "oslo", "rome"] * (n // 3) + ["paris"] * (n % 3),
        "fare": [float(i % 7) for i in range(n)],
        "score": [i * 0.37 for i in range(n)],
        "tags": [[1, 2]] * n,
    })


def test_unique_columns_go_plain_repeated_ones_keep_a_dictionary():
    t = rows(20_000)
    chosen = dictionary_columns(t.schema, t)
    assert "_hoodie_record_key" not in chosen and "_hoodie_commit_seqno" not in chosen
    assert "uuid" not in chosen and "score" not in chosen          # mostly distinct in the sample
    assert {"_hoodie_commit_time", "_hoodie_partition_path", "city", "fare", "tags"} <= set(chosen)


def test_without_a_sample_only_the_unique_meta_columns_go_plain():
    t = rows(10)
    assert dictionary_columns(t.schema, None) == [n for n in t.schema.names
                                                  if n not in ("_hoodie_record_key", "_hoodie_commit_seqno")]
    assert dictionary_columns(t.schema, t.slice(0, 0)) == dictionary_columns(t.schema, None)


def test_only_the_first_rows_are_judged():
    # distinct only after the sample: the choice is made on the sample (cost stays flat)
    n = SAMPLE_ROWS * 2
    t = pa.table({"late": ["same"] * SAMPLE_ROWS + [f"v{i}" for i in range(n - SAMPLE_ROWS)]})
    assert dictionary_columns(t.schema, t) == ["late"]


def test_the_file_reads_back_the_same_rows_with_the_chosen_encodings():
    t = rows(30_000)
    sink = io.BytesIO()
    pq.write_table(t, sink, compression="snappy", use_dictionary=dictionary_columns(t.schema, t))
    back = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert back.equals(t)
    meta = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: set(meta.column(i).encodings) for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" not in encodings["uuid"]
    assert "RLE_DICTIONARY" in encodings["city"]


def test_dictionary_arrays_are_judged_on_their_values():
    """Columns a reader took through their dictionary arrive as dictionary arrays: a repeated one
    keeps its dictionary, a mostly distinct one (read from small row groups) still goes plain."""
    t = rows(20_000)
    encoded = t.set_column(t.schema.get_field_index("city"), "city", t.column("city").dictionary_encode()) \
        .set_column(t.schema.get_field_index("uuid"), "uuid", t.column("uuid").dictionary_encode())
    chosen = dictionary_columns(encoded.schema, encoded)
    assert "city" in chosen and "uuid" not in chosen


def test_tables_of_one_file_keep_one_schema_with_their_encodings():
    """Base rows (dictionary-read city), then log records (plain city, no fare column): both come
    out in one Arrow schema, city encoded, values unchanged; a dictionary of another value type
    than the target's is not kept."""
    from tablesvc.write.parquet_encoding import align_keeping_encodings, encoded_columns

    schema_json = ('{"type": "record", "name": "r", "fields": [{"name": "city", "type": ["null", "string"]}, '
                   '{"name": "fare", "type": ["null", "double"]}]}')
    base = pa.table({"city": pa.array(["oslo", "rome", "oslo"]).dictionary_encode(), "fare": [1.0, 2.0, 3.0]})
    logs = pa.table({"city": ["paris", None]})
    target = pa.schema([pa.field("city", pa.string()), pa.field("fare", pa.float64())])
    encoded = encoded_columns(base.schema, target)
    assert encoded == {"city"}
    assert encoded_columns(pa.schema([pa.field("fare", pa.dictionary(pa.int32(), pa.string()))]), target) == set()
    first, second = (align_keeping_encodings(t, schema_json, encoded) for t in (base, logs))
    assert first.schema == second.schema and pa.types.is_dictionary(first.schema.field("city").type)
    assert pa.concat_tables([first, second]).column("city").cast(pa.string()).to_pylist() == \
        ["oslo", "rome", "oslo", "paris", None]
    assert second.column("fare").to_pylist() == [None, None]
