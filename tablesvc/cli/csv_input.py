"""CSV input for ``tablesvc write``: every value is text, cast to the table's column type only where
the text says exactly a value of that type.

On the driver, before Spark starts (``plan_csv``): each file's header and first block
(``SAMPLE_BYTES``, read as text with pyarrow) decide each column.  A column the table has is read
as the table's type when every sampled value is that type's exact text (``column_type``,
``fits``): ``12.34`` into ``decimal(10,2)``, ``2024-02-29`` into a date,
``2024-01-02 03:04:05.123456`` or ``…T03:04:05Z`` into a timestamp, whole numbers into an int
or long that holds them, numbers into a float or double.  Anything else (``soon`` into a long, ``12.345`` into ``decimal(10,2)``,
a time of day into a date, sub-microsecond digits into a timestamp) is refused, exit 2, naming
the file, the column and the value.  A column the table does not have takes the type its sample
shows (whole numbers: long; other numbers: double; dates; timestamps; true/false; else string).

In Spark (``read_csv``): the files are read as text columns (no inference pass over the input),
and each column is cast by a SQL expression that checks the same rule on every row and fails the
job naming the column and the value (``raise_error``; the write is then undone before any file
is written, as for a blank record key).  A record with more or fewer fields than the header
fails the same way.  A timestamp without an offset is read in the Spark session's time zone
(``spark.sql.session.timeZone``), as Spark reads one.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Sequence

import pyarrow as pa

from tablesvc.errors import InvalidInputError

SAMPLE_BYTES = 1 << 20          # pyarrow's default block: the part of each file read on the driver
MALFORMED = "_tablesvc_malformed_record"   # Spark puts a record with a wrong field count here

BLANK = r"^\s*$"
_INT = r"^\s*[+-]?\d+\s*$"
_NUMBER = r"^\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|NaN|[+-]?Infinity)\s*$"
_BOOL = r"^\s*([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])\s*$"
_DATE = r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*$"
_ZONE = r"(Z|[+-]\d{2}:?\d{2})"


def _timestamp_rule(fraction_digits: int, zone: bool) -> str:
    """A date, or a date and a time of day (``T`` or a space between) with at most
    ``fraction_digits`` digits of seconds and (``zone``) an optional ``Z`` or ``±hh:mm`` offset."""
    fraction = r"(\.\d{1,%d})?" % fraction_digits if fraction_digits else ""
    offset = r"\s*" + _ZONE + "?" if zone else ""
    return r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})([T ](\d{1,2}):(\d{1,2})(:(\d{1,2})%s)?%s)?\s*$" % (fraction, offset)


def _decimal_rule(precision: int, scale: int) -> str:
    """Text that is exactly a decimal(precision, scale): a digit at least, at most
    precision - scale digits before the point (leading zeros aside) and scale after it (trailing
    zeros aside)."""
    return r"^\s*[+-]?(?=\.?\d)0*\d{0,%d}(\.\d{0,%d}0*)?\s*$" % (precision - scale, scale)


@dataclass(frozen=True)
class ColumnType:
    """How a CSV column is read: the Spark SQL type, the rule its text must match (None: any
    text), and the type's name in messages."""

    spark: str
    rule: str | None
    shown: str


STRING = ColumnType("STRING", None, "string")
LONG = ColumnType("BIGINT", _INT, "long")
DOUBLE = ColumnType("DOUBLE", _NUMBER, "double")
BOOLEAN = ColumnType("BOOLEAN", _BOOL, "boolean")
DATE = ColumnType("DATE", _DATE, "date")
TIMESTAMP = ColumnType("TIMESTAMP", _timestamp_rule(6, zone=True), "timestamp")
# Digits of seconds a timestamp column holds exactly (Spark's timestamps hold microseconds).
_FRACTION_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 6}
_INT_RANGES = {"INT": (-(1 << 31), (1 << 31) - 1), "BIGINT": (-(1 << 63), (1 << 63) - 1)}


def column_type(arrow: pa.DataType) -> ColumnType | None:
    """How CSV text goes into a table column of this Arrow type; None: no text does."""
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return STRING
    if pa.types.is_boolean(arrow):
        return BOOLEAN
    if pa.types.is_int32(arrow):
        return ColumnType("INT", _INT, "int")
    if pa.types.is_int64(arrow):
        return LONG
    if pa.types.is_float32(arrow):
        return ColumnType("FLOAT", _NUMBER, "float")
    if pa.types.is_float64(arrow):
        return DOUBLE
    if pa.types.is_decimal(arrow):
        return ColumnType(f"DECIMAL({arrow.precision},{arrow.scale})", _decimal_rule(arrow.precision, arrow.scale),
                          f"decimal({arrow.precision},{arrow.scale})")
    if pa.types.is_date32(arrow):
        return DATE
    if pa.types.is_timestamp(arrow):
        digits = _FRACTION_DIGITS[arrow.unit]
        if arrow.tz is None:
            return ColumnType("TIMESTAMP_NTZ", _timestamp_rule(digits, zone=False), "timestamp without time zone")
        return TIMESTAMP if digits == 6 else ColumnType("TIMESTAMP", _timestamp_rule(digits, zone=True),
                                                        f"timestamp ({arrow.unit})")
    return None


def fits(value: str, kind: ColumnType) -> bool:
    """``value`` (not null) is exactly a value of ``kind``: its rule, and the range or calendar
    the rule cannot say (Spark checks the same with ``try_cast``)."""
    if kind.rule is None:
        return True
    match = re.match(kind.rule, value)
    if not match:
        return False
    if kind.spark in _INT_RANGES:
        low, high = _INT_RANGES[kind.spark]
        return low <= int(value) <= high
    if kind.rule == _DATE or kind.spark.startswith("TIMESTAMP"):
        try:
            date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
            if kind.spark.startswith("TIMESTAMP") and match.group(4):
                datetime(2000, 1, 1, int(match.group(5)), int(match.group(6)), int(match.group(8) or 0))
        except ValueError:
            return False
    return True


# A new column (the table has none of that name) takes the first of these its sample fits.
_NEW_COLUMN_TYPES = (BOOLEAN, LONG, DOUBLE, DATE, TIMESTAMP)


def _new_column_type(values: Sequence[str]) -> ColumnType:
    """The type of a column the table does not have, from its sampled values: no value, or
    whole numbers too large for a long (a double would round them), make it a string."""
    if not values:
        return STRING
    if all(re.match(_INT, v) for v in values) and not all(fits(v, LONG) for v in values):
        return STRING
    return next((k for k in _NEW_COLUMN_TYPES if all(fits(v, k) for v in values)), STRING)


@dataclass(frozen=True)
class CsvColumn:
    name: str
    kind: ColumnType
    new: bool          # not a column of the table: typed from the sample


@dataclass(frozen=True)
class CsvPlan:
    """The header every file shares and how each column is read."""

    columns: tuple[CsvColumn, ...]


def _header(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:     # a byte order mark is no part of a name
            header = next(csv.reader(f, escapechar="\\"), None)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InvalidInputError(f"{path}: cannot read the CSV header ({e})") from None
    if not header:
        raise InvalidInputError(f"{path}: the CSV file has no header line (input format csv: a header, then records)")
    blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
    if blank:
        raise InvalidInputError(f"{path}: column {blank[0]} of the CSV header has no name")
    twice = sorted({n for n in header if header.count(n) > 1})
    if twice:
        raise InvalidInputError(f"{path}: the CSV header names column {twice[0]!r} more than once")
    return header


def _sample(path: str, header: Sequence[str]) -> pa.RecordBatch:
    """The file's first block, every column as text (empty fields are null, as Spark reads them)."""
    import pyarrow.csv as pa_csv

    try:
        reader = pa_csv.open_csv(
            path, read_options=pa_csv.ReadOptions(block_size=SAMPLE_BYTES, use_threads=False),
            parse_options=pa_csv.ParseOptions(escape_char="\\"),
            convert_options=pa_csv.ConvertOptions(column_types={n: pa.string() for n in header}, null_values=[""],
                                                  strings_can_be_null=True, quoted_strings_can_be_null=True))
        try:
            return reader.read_next_batch()
        except StopIteration:     # a header and no record
            return pa.RecordBatch.from_pylist([], schema=reader.schema)
    except (pa.ArrowInvalid, OSError) as e:
        raise InvalidInputError(f"{path}: not readable as CSV ({str(e).splitlines()[0]})") from None


def _values(batch: pa.RecordBatch, name: str) -> list[str]:
    """The sampled values of a column; blank ones are nulls (``column_sql`` reads them so)."""
    return [v for v in batch.column(batch.schema.get_field_index(name)).to_pylist()
            if v is not None and not re.match(BLANK, v)]


def _refuse(path: str, name: str, value: str, kind: ColumnType, new: bool) -> InvalidInputError:
    whose = "the type the file's first block gave this new column" if new else "the table's type of the column"
    return InvalidInputError(f"{path}: column {name!r}: {value[:60]!r} cannot be cast to {kind.shown} without loss "
                             f"({whose})")


def plan_csv(files: Sequence[str], table_columns: pa.Schema | None) -> CsvPlan:
    """How to read ``files`` (one header for all) into a table whose columns are
    ``table_columns`` (None: the table has no schema yet); refuses what cannot be cast exactly."""
    header: list[str] | None = None
    samples: list[tuple[str, pa.RecordBatch]] = []
    for path in files:
        names = _header(path)
        if header is None:
            header = names
        elif names != header:
            raise InvalidInputError(f"{path}: its CSV header differs from {files[0]}'s "
                                    f"({','.join(names)} against {','.join(header)})")
        samples.append((path, _sample(path, names)))
    known = {f.name: f.type for f in table_columns} if table_columns is not None else {}
    columns = []
    for name in header or ():
        if name in known:
            kind = column_type(known[name])
            if kind is None:
                raise InvalidInputError(f"{files[0]}: column {name!r}: the table's {known[name]} column takes no "
                                        "CSV text")
            for path, batch in samples:
                wrong = next((v for v in _values(batch, name) if not fits(v, kind)), None)
                if wrong is not None:
                    raise _refuse(path, name, wrong, kind, new=False)
            columns.append(CsvColumn(name, kind, new=False))
        else:
            values = [v for _path, batch in samples for v in _values(batch, name)]
            columns.append(CsvColumn(name, _new_column_type(values), new=True))
    return CsvPlan(tuple(columns))


# -- Spark ---------------------------------------------------------------------------------------

def _sql_string(text: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


_FILE = "regexp_replace(input_file_name(), '^file:(//)?', '')"
_ERROR = "tablesvc.errors.InvalidInputError: "


def _raise(*parts: str) -> str:
    """SQL: fail the task with ``InvalidInputError`` (``spark.errors.translate_task_error``
    turns the message back into one); ``parts`` are SQL expressions, concatenated."""
    return f"raise_error(concat({_sql_string(_ERROR)}, {', '.join(parts)}))"


def column_sql(column: CsvColumn) -> str:
    """The column's value, cast, as a SQL expression that fails the job on text that is not
    exactly a value of its type, and on a record with a wrong number of fields."""
    v = _quoted(column.name)
    malformed = (f"WHEN {_quoted(MALFORMED)} IS NOT NULL THEN "
                 + _raise(_FILE, _sql_string(": a CSV record has more or fewer fields than the header: "),
                          f"substring({_quoted(MALFORMED)}, 1, 80)"))
    if column.kind.rule is None:
        return f"CASE {malformed} ELSE {v} END"
    whose = "the type the file's first block gave this new column" if column.new else "the table's type of the column"
    refuse = _raise(_FILE, _sql_string(f": column {column.name!r}: '"), f"substring({v}, 1, 60)",
                    _sql_string(f"' cannot be cast to {column.kind.shown} without loss ({whose})"))
    # Spark's casts from text skip surrounding white space, as the rules do.
    return (f"CASE {malformed} WHEN {v} IS NULL OR {v} rlike {_sql_string(BLANK)} THEN NULL "
            f"WHEN {v} rlike {_sql_string(column.kind.rule)} "
            f"THEN coalesce(try_cast({v} AS {column.kind.spark}), {refuse}) ELSE {refuse} END")


def read_csv(spark, path: str, plan: CsvPlan):
    """``path`` (a file or a folder of CSV files with the planned header) as a DataFrame of the
    planned types; nothing is read until an action runs."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    text = StructType([StructField(c.name, StringType()) for c in plan.columns]
                      + [StructField(MALFORMED, StringType())])
    # The header line is skipped, the schema applied by position (every file's header was compared).
    raw = (spark.read.format("csv").schema(text).option("header", "true").option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", MALFORMED).load(path))
    return raw.select(*[F.expr(column_sql(c)).alias(c.name) for c in plan.columns])


def table_columns(schema_json: str | None) -> pa.Schema | None:
    """The table's data columns as Arrow types (None: no schema yet)."""
    if not schema_json:
        return None
    from tablesvc.logformat import avro_schema_to_arrow

    return avro_schema_to_arrow(schema_json)


__all__ = ["CsvColumn", "CsvPlan", "MALFORMED", "SAMPLE_BYTES", "column_sql", "column_type", "fits", "plan_csv",
           "read_csv", "table_columns"]
