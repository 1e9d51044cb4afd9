"""How result rows lie on disk: JSON Lines (one object a line) or Parquet, written a part
at a time and joined a part at a time (memory: one part)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np


def write_rows(rows: list[dict[str, Any]], path: Path, fmt: str) -> None:
    """``rows`` into a new file at ``path``, as ``fmt`` (``"jsonl"`` or ``"parquet"``)."""
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, allow_nan=False) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


def join_parts(parts: list[Path], out: Path, fmt: str) -> None:
    """The parts, in order, into one new file at ``out``. Parquet parts go under one
    schema: a part whose values were all empty lists or nulls takes the others' types."""
    if fmt == "jsonl":
        with open(out, "wb") as joined:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, joined)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.unify_schemas([pq.read_schema(p) for p in parts], promote_options="permissive")
    with pq.ParquetWriter(out, schema) as writer:
        for part in parts:
            writer.write_table(pq.read_table(part).cast(schema))


def plain(value: Any) -> Any:
    """A value as JSON and Arrow take it: arrays as (nested) lists, numpy scalars as Python
    numbers, NaN as None."""
    if isinstance(value, np.ndarray):
        return plain(value.tolist()) if value.dtype.kind == "f" else value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
