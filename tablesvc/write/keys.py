"""Record keys and partition paths, computed the way Hudi's built-in key generators do.

* One record key field: the value as a string (``SimpleKeyGenerator``; also what
  ``ComplexKeyGenerator`` writes for a single field up to table version 8).  A null or
  empty value is an error.
* Several fields: ``f1:v1,f2:v2`` (``ComplexKeyGenerator``).  A null part is written
  ``__null__``, an empty one ``__empty__``; only a key whose every part is null or
  empty is an error.
* Partition path: each field's value (``field=value`` when hive style), joined with
  ``/``; a null or empty value becomes ``__HIVE_DEFAULT_PARTITION__``; with URL
  encoding the value is escaped as Hive escapes path names.  No partition fields: ``""``.

Values become strings as Java prints them: integers in decimal, booleans
``true``/``false``, dates ``yyyy-MM-dd``, decimals in plain notation, floating point
numbers as ``Double.toString`` does.  Other types (timestamps, binary, nested) are
refused: their Java spelling depends on writer settings we cannot see.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError, UnsupportedTableError
# The write's names for the two meta fields it computes from the data.
from tablesvc.table.meta_fields import PARTITION_PATH as PARTITION_PATH_COLUMN
from tablesvc.table.meta_fields import RECORD_KEY as RECORD_KEY_COLUMN

if TYPE_CHECKING:
    from tablesvc.table.config import TableConfig

DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PLACEHOLDER = "__null__"
EMPTY_KEY_PLACEHOLDER = "__empty__"

# Characters Hive (and Hudi's PartitionPathEncodeUtils) escape as %XX in partition values.
_ESCAPED = [chr(c) for c in range(1, 0x20)] + list("\"#'*/:=?\\\x7f{[]^")

Batch = Union[pa.RecordBatch, pa.Table]


@dataclass(frozen=True)
class KeySpec:
    """How a table builds ``_hoodie_record_key`` and ``_hoodie_partition_path``.

    ``encode_single_key_field_name``: write ``field:value`` even for one key field, which
    Hudi 1.1 (table version 9) does for tables whose key generator is COMPLEX.
    """

    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool
    url_encode: bool = False
    encode_single_key_field_name: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "record_key_fields", tuple(self.record_key_fields))
        object.__setattr__(self, "partition_fields", tuple(self.partition_fields))
        if not self.record_key_fields:
            raise InvalidInputError("a record key field is required")

    @classmethod
    def from_config(cls, config: "TableConfig") -> "KeySpec":
        """The key spec of a table; refuses key generators whose output we cannot reproduce."""
        keygen = (config.key_generator or "").strip()
        kind = keygen.rsplit(".", 1)[-1].upper().replace("AVROKEYGENERATOR", "").replace("KEYGENERATOR", "")
        kind = {"NONPARTITIONED": "NON_PARTITION", "": "INFERRED"}.get(kind, kind)
        if kind not in ("SIMPLE", "COMPLEX", "NON_PARTITION", "CUSTOM", "INFERRED"):
            raise UnsupportedTableError(f"key generator {keygen!r} is not supported for writing "
                                        "(SIMPLE, COMPLEX, NON_PARTITION only)")
        raw_parts = [p.strip() for p in config.props.get("hoodie.table.partition.fields", "").split(",") if p.strip()]
        for part in raw_parts:
            if ":" in part and part.split(":", 1)[1].strip().upper() != "SIMPLE":
                raise UnsupportedTableError(f"partition field {part!r}: only SIMPLE partition fields are supported")
        complex_keygen = kind == "COMPLEX"
        if not config.record_key_fields:
            raise InvalidInputError(f"table {config.name}: hoodie.table.recordkey.fields is not set in its "
                                    "hoodie.properties; a write needs the record key fields")
        return cls(
            record_key_fields=config.record_key_fields,
            partition_fields=config.partition_fields,
            hive_style=config.hive_style_partitioning,
            url_encode=config.url_encode_partitions,
            encode_single_key_field_name=complex_keygen and config.version >= 9 and len(config.record_key_fields) == 1,
        )


# -- value -> string -----------------------------------------------------------------------

def _java_double(value: float, single: bool = False) -> str:
    """``Double.toString`` / ``Float.toString`` (shortest round-trip digits, Java's plain or E form)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    mag = abs(value)
    digits, exp = _shortest_digits(_float32_repr(mag) if single else repr(mag))  # 0.d1d2.. * 10^exp
    if 1e-3 <= mag < 1e7:
        if exp <= 0:
            return f"{sign}0.{'0' * -exp}{digits}"
        int_part = digits[:exp].ljust(exp, "0")
        frac = digits[exp:] or "0"
        return f"{sign}{int_part}.{frac}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{exp - 1}"


def _float32_repr(mag: float) -> str:
    """The shortest decimal that reads back as the same float32."""
    target = struct.unpack("<f", struct.pack("<f", mag))[0]
    for precision in range(1, 10):
        text = f"{mag:.{precision}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == target:
                return text
        except OverflowError:  # rounded past float32's range
            continue
    return repr(mag)


def _shortest_digits(text: str) -> tuple[str, int]:
    """(digits, exp) with ``value == 0.<digits> * 10**exp`` for a shortest round-trip repr."""
    dec = Decimal(text)
    _, digit_tuple, exponent = dec.as_tuple()
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    exp = len(digits) + exponent
    return digits.rstrip("0") or "0", exp


def _field_array(data: Batch, name: str) -> pa.Array | pa.ChunkedArray:
    """A column by name; ``a.b`` reaches into struct columns."""
    names = data.schema.names
    if name in names:
        return data.column(names.index(name))
    head, _, rest = name.partition(".")
    if rest and head in names:
        column = data.column(names.index(head))
        for part in rest.split("."):
            if not pa.types.is_struct(column.type) or column.type.get_field_index(part) < 0:
                raise InvalidInputError(f"column {name!r} is missing from the incoming data")
            column = pc.struct_field(column, part)
        return column
    raise InvalidInputError(f"column {name!r} is missing from the incoming data")


def value_strings(data: Batch, name: str) -> pa.Array | pa.ChunkedArray:
    """The column's values as Java's key generators print them (nulls stay null)."""
    column = _field_array(data, name)
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
        return column.cast(pa.string())
    if (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date32(t)
            or pa.types.is_decimal(t)):
        return pc.cast(column, pa.string())
    if pa.types.is_floating(t):
        values = column.to_pylist()
        single = pa.types.is_float32(t) or pa.types.is_float16(t)
        return pa.array([None if v is None else _java_double(float(v), single) for v in values], pa.string())
    raise InvalidInputError(f"column {name!r} of type {t} cannot be a record key or partition field "
                            "(use string, integer, boolean, date, decimal or floating point)")


def _first_true(mask: pa.Array | pa.ChunkedArray) -> int | None:
    if not pc.any(mask).as_py():
        return None
    return pc.index(mask, True).as_py()


def _escape(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    # '%' first, so the escapes added afterwards are not escaped again.
    out = pc.replace_substring(values, "%", "%25")
    for ch in _ESCAPED:
        if ch == "%":
            continue
        out = pc.replace_substring(out, ch, f"%{ord(ch):02X}")
    return out


def record_keys(data: Batch, spec: KeySpec) -> pa.Array | pa.ChunkedArray:
    fields = spec.record_key_fields
    strings = [value_strings(data, f) for f in fields]
    if len(fields) == 1 and not spec.encode_single_key_field_name:
        values = strings[0]
        bad = pc.fill_null(pc.equal(values, ""), True)
        row = _first_true(bad)
        if row is not None:
            raise InvalidInputError(f"record key field {fields[0]!r} is null or empty at row {row}")
        return values
    parts, blank_all = [], None
    for field, values in zip(fields, strings):
        empty = pc.fill_null(pc.equal(values, ""), False)
        null = pc.is_null(values)
        shown = pc.if_else(null, NULL_KEY_PLACEHOLDER, pc.if_else(empty, EMPTY_KEY_PLACEHOLDER, values))
        parts.append(pc.binary_join_element_wise(field, shown, ":"))
        blank = pc.or_(null, empty)
        blank_all = blank if blank_all is None else pc.and_(blank_all, blank)
    row = _first_true(blank_all)
    if row is not None:
        raise InvalidInputError(f"record key fields {', '.join(fields)} are all null or empty at row {row}")
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, ",")


def partition_paths(data: Batch, spec: KeySpec) -> pa.Array | pa.ChunkedArray:
    if not spec.partition_fields:
        return pa.array([""] * data.num_rows, pa.string())
    parts = []
    for field in spec.partition_fields:
        values = value_strings(data, field)
        if spec.url_encode:
            values = _escape(values)
        blank = pc.fill_null(pc.equal(values, ""), True)
        values = pc.if_else(blank, DEFAULT_PARTITION_PATH, values)
        if spec.hive_style:
            values = pc.binary_join_element_wise(field, values, "=")
        parts.append(values)
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "/")


def add_key_columns(data: Batch, spec: KeySpec) -> Batch:
    """``data`` plus ``_hoodie_record_key`` and ``_hoodie_partition_path`` (string) columns.

    Existing columns of those names are replaced.  Errors name the column and a row
    index, never a value.
    """
    for name in (*spec.record_key_fields, *spec.partition_fields):
        _field_array(data, name)  # missing column -> InvalidInputError naming it
    keys = record_keys(data, spec)
    paths = partition_paths(data, spec)
    keep = [i for i, n in enumerate(data.schema.names) if n not in (RECORD_KEY_COLUMN, PARTITION_PATH_COLUMN)]
    names = [data.schema.names[i] for i in keep] + [RECORD_KEY_COLUMN, PARTITION_PATH_COLUMN]
    columns = [data.column(i) for i in keep]
    if isinstance(data, pa.RecordBatch):
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        paths = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
        return pa.RecordBatch.from_arrays(columns + [keys, paths], names=names)
    return pa.Table.from_arrays(columns + [keys, paths], names=names)


__all__ = [
    "DEFAULT_PARTITION_PATH", "KeySpec", "PARTITION_PATH_COLUMN", "RECORD_KEY_COLUMN", "add_key_columns",
    "partition_paths", "record_keys", "value_strings",
]
