"""What a store's reads check before they return anything: a group's record against the
table (its size; its checksum where the whole record is verified) and its own header
against the store's (frames, shape, dtype: they decide what decoding allocates), then
every decoded frame against its checksum, which is what guarantees the pixels. A
failure is a :class:`~hyperframes.errors.StoreCorrupt` whose ``frames`` lists the damaged
frame ids; a wrong frame is never returned.
"""

from __future__ import annotations

import numpy as np

from ..errors import StoreCorrupt
from ..frames import FrameSpec, describe_shape
from ..hyper.codec import group_header
from . import format as fmt
from .table import GroupTable

ADVICE = "; the store is damaged: run verify, then re-pack or restore"


def corrupt(message: str, frames: range | list[int]) -> StoreCorrupt:
    """A :class:`StoreCorrupt` whose ``frames`` attribute lists the damaged frame ids."""
    exc = StoreCorrupt(message if message.endswith(ADVICE) else message + ADVICE)
    exc.frames = list(frames)  # type: ignore[attr-defined]
    return exc


def checked_record(
    data: bytes | memoryview | None,
    g: int,
    groups: GroupTable,
    spec: FrameSpec,
    *,
    hashed: bool = True,
    header: group_header.Header | None = None,
) -> tuple[bytes | memoryview, group_header.Header]:
    """Group ``g``'s record (``None``: missing) and its parsed header, checked against the
    table (its size, and its checksum where ``hashed``) and the store's frames;
    ``header``: the record's, parsed and checked before (not parsed again)."""
    first, stop = groups.span(g)
    where, span = f"group {g} (frames {first}..{stop - 1})", range(first, stop)
    if data is None or len(data) != int(groups.record_bytes[g]):
        raise corrupt(f"the record of {where} is missing or the wrong size", span)
    if hashed and fmt.checksum(data) != int(groups.record_hashes[g]):
        raise corrupt(f"the record of {where} fails its checksum", span)
    if header is not None:
        return data, header
    try:
        head = group_header.parse_header(data)
    except StoreCorrupt as exc:
        raise corrupt(f"the record of {where}: {exc}", span) from None
    if (head.count, head.shape, head.dtype) != (len(span), spec.shape, spec.dtype):
        got = f"{head.count} frames of {describe_shape(head.shape, head.dtype)}"
        raise corrupt(
            f"the record of {where} holds {got}, but the header says "
            f"{spec.describe()} and the table {len(span)} frames", span,
        )  # fmt: skip
    return data, head


def checked_frame(frame: np.ndarray, i: int, g: int, groups: GroupTable, spec: FrameSpec) -> (
    np.ndarray
):  # fmt: skip
    """Frame ``i`` (of group ``g``) as decoded, checked, read-only."""
    if frame.shape != spec.shape or frame.dtype != spec.dtype:
        raise corrupt(
            f"frame {i} (group {g}) decodes to {describe_shape(frame.shape, frame.dtype)}, "
            f"but the header says {spec.describe()}", [i],
        )  # fmt: skip
    if fmt.checksum(frame) != int(groups.checksums[i]):
        raise corrupt(f"frame {i} (group {g}) fails its checksum", [i])
    frame.flags.writeable = False
    return frame


def checked_group(
    frames: np.ndarray, g: int, groups: GroupTable, spec: FrameSpec, part: range | None = None
) -> np.ndarray:
    """Group ``g``'s frames as decoded (``part`` of them: indices within it), checked,
    read-only."""
    first, stop = groups.span(g)
    part = range(stop - first) if part is None else part
    if len(frames) != len(part):
        raise corrupt(
            f"group {g} decodes to {len(frames)} frames; the table says {len(part)}",
            range(first, stop),
        )  # fmt: skip
    if frames.shape[1:] != spec.shape or frames.dtype != spec.dtype:
        got = describe_shape(frames.shape[1:], frames.dtype)
        raise corrupt(
            f"group {g} decodes to frames of {got}, but the header says {spec.describe()}",
            range(first, stop),
        )  # fmt: skip
    at = first + part.start
    bad = [
        at + j
        for j in range(len(frames))
        if fmt.checksum(frames[j]) != int(groups.checksums[at + j])
    ]
    if bad:
        raise corrupt(f"frames {bad} (group {g}) fail their checksums", bad)
    frames.flags.writeable = False
    return frames
