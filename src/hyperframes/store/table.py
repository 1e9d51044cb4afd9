"""The group table of an open store: which frames each hyperframe holds, and their checksums.

Loaded from one read transaction (a consistent snapshot), validated row by row as
it is read: contiguous frames, sizes within bounds, and a record of the stated
length beside every row. Arrays grow with the rows actually present, never with a
count read from the file.

Example:
    >>> table.group_of(1234), table.span(7)  # doctest: +SKIP
    (301, (28, 33))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import StoreCorrupt
from . import format as fmt


@dataclass(frozen=True)
class GroupTable:
    """The hyperframes of a store, in order.

    Attributes:
        starts: first frame of each group, plus one past the last frame (length ``G + 1``).
        record_bytes: the stored size of each group's record.
        record_hashes: xxh3_64 of each group's record.
        checksums: xxh3_64 of each decoded frame.
        pts: each frame's timestamp in seconds (NaN when the source gave none).
    """

    starts: np.ndarray
    record_bytes: np.ndarray
    record_hashes: np.ndarray
    checksums: np.ndarray
    pts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts) - 1

    @property
    def frames(self) -> int:
        return int(self.starts[-1])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def span(self, group: int) -> tuple[int, int]:
        """The half-open frame range ``(start, stop)`` of ``group``."""
        return int(self.starts[group]), int(self.starts[group + 1])

    def group_of(self, frame: int) -> int:
        """The group holding ``frame`` (which must be in range)."""
        return int(np.searchsorted(self.starts, frame, side="right")) - 1

    def extended(self, rows: list[fmt.GroupEntry]) -> GroupTable:
        """This table with ``rows`` appended."""
        if not rows:
            return self
        ends = np.fromiter((r.stop for r in rows), np.int64, len(rows))
        return GroupTable(
            np.concatenate([self.starts, ends]),
            np.concatenate([self.record_bytes, [r.record_len for r in rows]]).astype(np.int64),
            np.concatenate(
                [self.record_hashes, np.array([r.record_hash for r in rows], np.uint64)]
            ),
            np.concatenate([self.checksums, np.fromiter(_flat(r.checksums for r in rows), "u8")]),
            np.concatenate([self.pts, np.fromiter(_flat(r.pts for r in rows), np.float64)]),
        )

    @classmethod
    def empty(cls) -> GroupTable:
        return cls(
            np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64),
            np.zeros(0, np.uint64), np.zeros(0, np.float64),
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"GroupTable(groups={len(self)}, frames={self.frames})"


def _flat(parts: Any) -> Any:
    for part in parts:
        yield from part


def read_rows(
    txn: Any, table_db: Any, records_db: Any, *, start: int, stop: int, first: int
) -> list[fmt.GroupEntry]:
    """Read and validate the table rows of groups ``start..stop-1``.

    ``first`` is the frame the row of group ``start`` must begin at. The records
    database must hold a record for every row; their sizes are checked when each is read
    (:func:`~hyperframes.store.checks.checked_record`). Looking at every record here cost
    0.6 ms a group on a freshly mapped store (LMDB touches pages of each large value),
    20 ms to open 34 groups of 60 frames (10 s, extrapolated, for a million such frames).

    Raises:
        StoreCorrupt: a missing or malformed row, a gap, or a missing record.
    """
    rows: list[fmt.GroupEntry] = []
    if start >= stop:
        return rows
    table = txn.cursor(db=table_db)
    if not table.set_key(fmt.group_key(start)):
        raise StoreCorrupt(f"group table entry {start} is missing")
    for group in range(start, stop):
        if group > start and not table.next():
            raise StoreCorrupt(f"the table entry of group {group} is missing")
        if fmt.key_group(bytes(table.key())) != group:
            raise StoreCorrupt(f"group {group}'s table entry is missing (keys out of order)")
        entry = fmt.parse_entry(table.value(), group=group, first=first)
        rows.append(entry)
        first = entry.stop
    if txn.stat(records_db)["entries"] < stop:  # (damage: name the first record missing)
        for group, entry in enumerate(rows, start):
            if txn.get(fmt.group_key(group), db=records_db) is None:
                raise StoreCorrupt(
                    f"the record of group {group} (frames {entry.first}..{entry.stop - 1}) "
                    "is missing"
                )  # fmt: skip
    return rows
