"""How a group's frames become records: the one choice and the one reference rule every
layout of the codec uses.

References (:func:`reference`): every :data:`ANCHOR_EVERY`-th frame from the base is an
*anchor* that references the base (an end frame more than 4 past the last anchor is one
too, referencing that anchor); every other frame references its neighbour towards its
nearest anchor. Deltas stay between neighbours, and any frame decodes from at most 6
records whatever the group's length. Arrays (``layout="auto"``) and a video's planes
(``"anchors"``) both follow it; arrays may also ask for another layout by name
(``"base"``, ``"chain"``, ``"independent"``: ``hyper.codec._lossless``).

Records: the base is coded alone. Every other frame is coded against its reference: as a
copy where it equals the reference, else as a delta; a delta that codes larger than
:data:`FALLBACK_RATIO` of the base is tried against the frame alone, and the smaller is
kept; a frame without a reference, or whose delta a quick look says will not pay, is coded
alone. The layout only says how a frame is coded alone and how a delta is (its planes, its
bands, its predictor).
"""

from __future__ import annotations

from collections.abc import Callable

from .group_header import Record

ANCHOR_EVERY = 8
"""Frames between anchors, the frames that reference the base (or, at a group's end, the
last anchor): a frame decodes from a bounded number of records whatever the group's length."""
FALLBACK_RATIO = 0.8
"""A delta under 0.8x the base's coded size is kept without also trying the frame alone."""
PROBE_ROWS, PROBE_EVERY = 8, 8
"""Where a quick look judges a delta before it is coded, it looks at bands of 8 rows, one
in every 8 (:func:`probe_bands`), compressed at zstd level 1."""

Blob = tuple[bytes, tuple[int, ...]]
"""A record's bytes and the lengths of its parts (bands or segments; empty: one part)."""


def probe_bands(height: int) -> list[slice] | None:
    """The rows a quick look at a delta samples (:data:`PROBE_ROWS`, one band in every
    :data:`PROBE_EVERY`); ``None`` where a frame has too few rows to judge by them."""
    if height < PROBE_ROWS * PROBE_EVERY:
        return None
    step = PROBE_ROWS * PROBE_EVERY
    return [slice(a, a + PROBE_ROWS) for a in range(0, height - PROBE_ROWS + 1, step)]


def reference(i: int, b: int, n: int) -> int:
    """Frame ``i``'s reference in a group of ``n`` with its base at ``b`` (-1: none).

    Anchors (every :data:`ANCHOR_EVERY`-th frame from the base) reference the base; every
    other frame references its neighbour one step towards its nearest anchor (ties: the
    one nearer the base). Where a group's end lies more than ``ANCHOR_EVERY / 2`` frames
    past its last anchor, the end frame is an anchor too (referencing that last anchor),
    so a frame decodes from at most 6 records whatever the group's length.
    """
    if i == b:
        return -1
    off = i - b
    if off % ANCHOR_EVERY == 0:
        return b
    below = b + ANCHOR_EVERY * (off // ANCHOR_EVERY)
    regular = [a for a in (below, below + ANCHOR_EVERY) if 0 <= a < n]
    anchor = min(regular, key=lambda a: (abs(a - i), abs(a - b)))
    if abs(i - anchor) > ANCHOR_EVERY // 2:  # a long tail: its end frame is an anchor too
        end = n - 1 if i > anchor else 0
        if i == end:
            return anchor
        anchor = end if abs(end - i) < abs(i - anchor) else anchor
    return i - 1 if anchor < i else i + 1


def choose_records(
    n: int,
    base: int,
    *,
    reference: Callable[[int], int],
    alone: Callable[[int], Blob],
    delta: Callable[[int, int], Blob],
    same: Callable[[int, int], bool],
    may_pay: Callable[[int, int, int], bool] | None = None,
    fallback: bool = True,
) -> tuple[list[Record], list[bytes]]:
    """The records of a group of ``n`` frames with its base at ``base``, and their bytes.

    Args:
        reference: frame ``i``'s reference (-1: none).
        alone: frame ``i`` coded alone (the base first, before any other).
        delta: frame ``i`` coded as its difference to frame ``ref``.
        same: whether frames ``i`` and ``ref`` are equal (a copy record).
        may_pay: whether a delta of ``i`` to ``ref`` may code smaller than the frame alone,
            given the base's coded bytes (``None``: always try it).
        fallback: try a large delta's frame alone too.
    """
    base_blob = alone(base)
    records: list[Record] = []
    parts: list[bytes] = []
    offset = 0
    for i in range(n):
        ref = reference(i)
        if i == base:
            kind, blob = "raw", base_blob
        elif ref >= 0 and same(i, ref):
            kind, blob = "copy", (b"", ())
        elif ref >= 0 and may_pay is not None and not may_pay(i, ref, len(base_blob[0])):
            kind, blob, ref = "raw", alone(i), -1
        elif ref >= 0:
            kind, blob = "delta", delta(i, ref)
            if fallback and len(blob[0]) > FALLBACK_RATIO * len(base_blob[0]):
                single = alone(i)
                if len(single[0]) < len(blob[0]):
                    kind, blob, ref = "raw", single, -1
        else:
            kind, blob = "raw", alone(i)
        data, lengths = blob
        records.append(Record(kind, ref, offset, len(data), parts=lengths))
        parts.append(data)
        offset += len(data)
    return records, parts
