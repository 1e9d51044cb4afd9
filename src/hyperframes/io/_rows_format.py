"""How result rows lie on disk: JSON Lines (one object a line) or Parquet, written a part
at a time and joined a part at a time.

Values are checked as they come (:func:`plain`): numbers, strings, booleans, ``None``,
lists, dicts and numpy arrays are stored; anything else is refused at its frame. A row's
columns need not match the others': Parquet columns are learned from the rows and
**widened**, never narrowed (:func:`widen`): a new key adds a column (``null`` in the rows
without it), an integer column takes floats, a list column takes longer or wider lists,
and a column whose values mix kinds (a number, then ``"n/a"``) becomes a text column (the
strings as they are, other values as JSON text), which the join reports. JSON Lines keeps
each row as it came, except that ``inf``, ``-inf`` and ``NaN`` are written as ``null``
(JSON has no such numbers); Parquet keeps them as floats.

Example:
    >>> import pyarrow as pa
    >>> widen(pa.int64(), pa.float64()), widen(pa.int64(), pa.string())
    (DataType(double), DataType(string))
"""

from __future__ import annotations

import datetime
import json
import math
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

INT64 = (-(2**63), 2**64 - 1)
"""The integers a column can hold (Parquet's int64 and uint64)."""


class NotStorable(TypeError):
    """A value a results file cannot hold (an object, bytes, a complex number)."""


def plain(value: Any) -> Any:
    """``value`` as JSON and Arrow take it: arrays as (nested) lists, numpy scalars as Python
    numbers, tuples as lists, dict keys as strings; non-finite floats are kept.

    Raises:
        NotStorable: a value of another kind, or an integer wider than 64 bits.
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biufU":
            return value.tolist()
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool | float | str):
        return value
    if isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise NotStorable(f"the integer {value} is wider than 64 bits")
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    raise NotStorable(
        f"a value of type {type(value).__name__} cannot be stored; return numbers, strings, "
        "lists, dicts or arrays"
    )


def weight(value: Any) -> int:
    """About the bytes ``value`` takes once :func:`plain` made it Python objects (a list
    of numbers: a pointer and a number object each); arrays are weighed without a walk."""
    if isinstance(value, np.ndarray):
        small = value.dtype.itemsize == 1 and value.dtype.kind in "biu"  # cached small ints
        return 64 + value.size * (8 if small else 36)
    if isinstance(value, str | bytes):
        return 56 + len(value)
    if isinstance(value, dict):
        return 64 + sum(weight(k) + weight(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 56 + sum(8 + weight(v) for v in value)
    return 32


def json_line(row: dict[str, Any]) -> str:
    """``row`` as one line of JSON, ``inf``, ``-inf`` and ``NaN`` as ``null``, and what JSON
    has no type for (a manifest's dates, decimals) as its text, dates in ISO 8601."""
    try:
        return json.dumps(row, allow_nan=False, default=_as_text) + "\n"
    except ValueError:
        return json.dumps(_finite(row), allow_nan=False, default=_as_text) + "\n"


def _as_text(value: Any) -> str:
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return str(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_rows(rows: list[dict[str, Any]] | list[str], path: Path, fmt: str) -> None:
    """``rows`` into a new file at ``path``, as ``fmt``: JSON lines (already encoded by
    :func:`json_line`) or Parquet rows (dicts)."""
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(rows)  # type: ignore[arg-type]
        return
    import pyarrow.parquet as pq

    pq.write_table(table_of(rows), path)  # type: ignore[arg-type]


MIXED_KEY = b"hyperframes.mixed"
"""Where a part keeps the columns it had to hold as text (key-value metadata)."""


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows whose keys and kinds may vary as one table: a column for every key any row
    has (in the order first seen), each of the widest type its values need; the columns
    that had to become text are named in the table's metadata."""
    import pyarrow as pa

    names = list(dict.fromkeys(key for row in rows for key in row))
    columns, mixed = {}, {}
    for name in names:
        columns[name], kinds = _column([row.get(name) for row in rows])
        if kinds:
            mixed[name] = kinds
    table = pa.table(columns)
    return table.replace_schema_metadata({MIXED_KEY: json.dumps(mixed)}) if mixed else table


def _column(values: list[Any]) -> tuple[pa.Array, list[str]]:
    """The values as one array, and the kinds they mix where that array is text."""
    import pyarrow as pa

    try:
        return pa.array(values), []
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        kind, seen = pa.null(), set()
        for value in values:
            if value is not None:
                one = pa.array([value]).type
                kind = widen(kind, one)
                seen.add(str(one))
        array = from_values(values, kind)
        return array, sorted(seen) if pa.types.is_string(array.type) else []


def from_values(values: list[Any], kind: pa.DataType) -> pa.Array:
    """An array of ``kind`` (a type :func:`widen` gave) from Python values: booleans among
    numbers as numbers, and text (strings as they are, other values as JSON) where Arrow
    cannot hold the values as ``kind``."""
    import pyarrow as pa

    if not pa.types.is_string(kind):
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            values = [int(v) if isinstance(v, bool) else v for v in values]
        try:
            return pa.array(values, kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            pass
    return pa.array([_text(v) for v in values], pa.string())


def widen(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The narrowest type that holds the values of both ``a`` and ``b``: a number type
    wide enough for both, lists and structs widened member by member (a struct takes the
    fields of both), and text where the kinds differ."""
    import pyarrow as pa
    import pyarrow.types as t

    if a == b or t.is_null(b):
        return a
    if t.is_null(a):
        return b
    numbers = (t.is_boolean, t.is_integer, t.is_floating)
    if any(f(a) for f in numbers) and any(f(b) for f in numbers):
        if t.is_floating(a) or t.is_floating(b):
            return pa.float64()
        if t.is_unsigned_integer(a) and t.is_unsigned_integer(b):
            return pa.uint64()
        return pa.int64()
    if _is_list(a) and _is_list(b):
        return pa.list_(widen(a.value_type, b.value_type))
    if t.is_struct(a) and t.is_struct(b):
        fields = {f.name: f.type for f in a}
        for f in b:
            fields[f.name] = widen(fields[f.name], f.type) if f.name in fields else f.type
        return pa.struct(list(fields.items()))
    return pa.string()


def _is_list(kind: pa.DataType) -> bool:
    import pyarrow.types as t

    return bool(t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind))


def as_type(column: pa.ChunkedArray, kind: pa.DataType) -> Any:
    """``column`` as ``kind`` (a type :func:`widen` gave): cast where Arrow can, else
    rebuilt from its values (:func:`from_values`)."""
    import pyarrow as pa

    if column.type == kind:
        return column
    if not pa.types.is_string(kind):
        try:
            return column.cast(kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
    return from_values(column.to_pylist(), kind)


def _text(value: Any) -> str | None:
    """A value of a text column: a string as it is, another value as JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def parquet_schema(parts: Iterable[Path]) -> tuple[pa.Schema, list[str]]:
    """The schema that holds every part's rows (the parts' own, widened), and a line for
    each column that became text because its values mix kinds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds: dict[str, pa.DataType] = {}  # in the rows' order: the input's, frame, time, ...
    mixed: dict[str, set[str]] = {}
    for part in parts:
        schema = pq.read_schema(part)
        for name, seen in json.loads((schema.metadata or {}).get(MIXED_KEY, b"{}")).items():
            mixed.setdefault(name, set()).update(seen)
        for f in schema:
            was = kinds.get(f.name, pa.null())
            kinds[f.name] = widened = widen(was, f.type)
            if pa.types.is_string(widened) and not pa.types.is_null(was):
                mixed.setdefault(f.name, set()).update({str(was), str(f.type)})
    for name, kind in (("frame", pa.int64()), ("time", pa.float64())):
        kinds[name] = widen(kinds.get(name, pa.null()), kind)  # an empty table has them too
    tail = [name for name in ("computed", "answer_of") if name in kinds]
    order = [name for name in kinds if name not in tail] + tail
    notes = [
        f"column {name!r} holds values of several kinds ({', '.join(sorted(seen))}): kept "
        "as text, the values that are not strings as JSON"
        for name, seen in mixed.items()
        if len(seen - {"null"}) > 1
    ]
    return pa.schema([(name, kinds[name]) for name in order]), notes


def join_parquet(parts: list[Path], out: Path, metadata: dict[str, str] | None = None) -> list[str]:
    """The parts, in order, into one new Parquet file at ``out`` under the schema that
    holds them all (memory: one part); returns the notes of :func:`parquet_schema`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema, notes = parquet_schema(parts)
    if metadata:
        schema = schema.with_metadata(metadata)
    with pq.ParquetWriter(out, schema) as writer:
        for part in parts:
            table = pq.read_table(part)
            columns = [
                as_type(table[f.name], f.type)
                if f.name in table.column_names
                else pa.nulls(len(table), f.type)
                for f in schema
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
    return notes


def join_parts(
    parts: list[Path], out: Path, fmt: str, metadata: dict[str, str] | None = None
) -> list[str]:
    """Finished results files of one format, in order, into one new file at ``out``
    (chunked runs' segments; a Parquet file keeps ``metadata``); returns what
    :func:`join_parquet` notes."""
    if fmt == "parquet":
        return join_parquet(parts, out, metadata)
    with open(out, "wb") as joined:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, joined)
    return []
