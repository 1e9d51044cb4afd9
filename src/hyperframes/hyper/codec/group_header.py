"""The byte layout of one encoded group, and its validation (untrusted input).

::

    b"HFG\\x01"  magic and format version           4 bytes
    header_len   little-endian uint32               4 bytes
    header       UTF-8 JSON (never pickle)          header_len bytes
    payload      the frames' records, back to back

The header is ``{"dtype": "<u2", "shape": [H, W, C], "base": 3, "layout": "base",
"tier": "lossless", "frames": [[kind, ref, offset, length, step, qdtype], ...]}``,
one entry per frame, offsets relative to the payload. ``kind`` is ``"raw"``
(the frame itself), ``"delta"`` (difference modulo 2**bits to frame ``ref``),
``"quant"`` (a quantised difference to ``ref``: ``step`` and the stored integer
``qdtype``) or ``"copy"`` (the same pixels as ``ref``). Records are zstd frames
with their content size and checksum (a raw record of a ``"predictor": "surface"``
group holds its residuals, then its surface's knots: ``_surface``), except raw records of
``"predictor": "webp"`` groups, which are lossless WebP files (their size is checked
against the header before decoding; the store's checksums cover their bytes). Every
field is checked by :func:`parse_header` before use; failures raise :class:`StoreCorrupt`.

Optional keys: ``"predictor"`` and ``"transform"`` (see ``codec``), and ``"bands": k``
(2..64): every raw and delta record is then ``k`` zstd frames, one per horizontal band
of rows (:meth:`Header.band_rows`), coded on its own so bands decode in parallel; their
compressed lengths are a 7th field of the record's entry. ``"residuals": "zigzag"``
(lossless integers of 2-8 bytes): the values of raw and delta records are zigzag codes of
their residuals (0, -1, 1, -2... as 0, 1, 2, 3...), so that small residuals of either sign
have high byte planes of zeros; groups without it hold them plain.

Planar groups (a video's native planes, see ``_planes``) add ``"planes": [[h, w], ...]``
(1..4 planes whose samples add up to the frame), ``"segments": [[offset, rows, width],
...]`` (whole rows of one plane each, tiling the frame in order) and, with ``"predictor":
"ffv1"`` or ``"x264"``, ``"pix_fmt"`` and ``"extradata"`` (the FFV1 configuration record or
H.264's parameter sets, hex); their raw (gradient) and delta records list one compressed
length per segment as a 7th field; in an ``ffv1`` group a raw record of 6 fields is one
FFV1 packet. In an ``x264`` group (``"layout": "gop"``, base 0) every record is one H.264
packet of 6 fields: keyframes raw, every other frame a delta on the frame before it.

Longer than 300 lines: every field of a group's untrusted header is validated here, in one
place.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import zstandard as zstd

from ...choices import TIERS
from ...errors import StoreCorrupt

MAGIC = b"HFG\x01"
_LEN = struct.Struct("<I")
PREFIX = len(MAGIC) + _LEN.size
MAX_HEADER_BYTES = 16 << 20
MAX_FRAMES = 1 << 16
MAX_FRAME_BYTES = 1 << 31
FRAME_DTYPES = frozenset(
    {"|u1", "<u2", "<u4", "<u8", "|i1", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8"}
)
QUANT_DTYPES = frozenset({"|i1", "<i2", "<i4", "<i8"})
KINDS = frozenset({"raw", "delta", "quant", "copy"})
LAYOUTS = frozenset({"independent", "base", "chain", "auto", "keyframe", "anchors", "gop"})


@dataclass(frozen=True)
class Record:
    """Where one frame's bytes are and how they decode."""

    kind: str
    ref: int
    offset: int
    length: int
    step: float = 0.0
    qdtype: str = ""
    parts: tuple[int, ...] = ()
    """Compressed length of each band (banded groups); empty: one part of ``length``."""

    def to_json(self) -> list[Any]:
        fields = [self.kind, self.ref, self.offset, self.length, self.step, self.qdtype]
        return [*fields, list(self.parts)] if self.parts else fields


@dataclass(frozen=True)
class Header:
    """The parsed, validated header of an encoded group."""

    dtype: np.dtype
    shape: tuple[int, ...]
    base: int
    layout: str
    tier: str
    records: tuple[Record, ...]
    payload_start: int
    predictor: str = "none"
    transform: str = "none"
    bands: int = 1
    planes: tuple[tuple[int, int], ...] = ()
    """Planar groups: each plane's (rows, width); empty for others."""
    segments: tuple[tuple[int, int, int], ...] = ()
    """Planar groups: (flat offset, rows, width) of each separately coded segment."""
    pix_fmt: str = ""
    """Planar groups with FFV1 raw records: the planes' pixel format."""
    extradata: bytes = b""
    """Planar groups with FFV1 raw records: the coder's configuration record."""
    zigzag: bool = False
    """Raw and delta records hold their residuals zigzagged (``"residuals": "zigzag"``)."""

    @property
    def count(self) -> int:
        return len(self.records)

    def band_rows(self, band: int) -> tuple[int, int]:
        """The rows ``[start, stop)`` of band ``band``."""
        return band_rows(self.shape[0], self.bands, band)

    def part(self, rec: Record, band: int) -> tuple[int, int]:
        """Where band ``band`` of ``rec`` lies in the data: (start, length)."""
        start = self.payload_start + rec.offset
        if not rec.parts:
            return start, rec.length
        return start + sum(rec.parts[:band]), rec.parts[band]

    @property
    def frame_nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def within(self, frames: range) -> bool:
        """Whether ``frames`` decode from their own records alone (no reference outside)."""
        return all(self.records[j].ref < 0 or self.records[j].ref in frames for j in frames)

    def chain(self, index: int) -> list[int]:
        """Frame indices to decode for ``index``, root first (validated acyclic on parse)."""
        out = [index]
        while self.records[out[-1]].ref >= 0:
            out.append(self.records[out[-1]].ref)
        out.reverse()
        return out


PREDICTORS = ("none", "gradient", "webp", "ffv1", "x264", "surface")
"""How raw records are coded: as is or as gradient residuals (then zstd), as WebP, as FFV1
packets; ``"x264"``: every record is a lossless H.264 packet; ``"surface"``: knots and the
residual to their smooth surface (16-bit frames, ``_surface``)."""
TRANSFORMS = ("none", "rct")
"""Colour transforms applied to a whole lossless group before coding (see ``codec``)."""


MAX_HEADER_BANDS = 64


def surface_frames(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether frames of ``shape`` and ``dtype`` may hold surface records (``_surface``):
    16-bit integers, (H, W) or (H, W, C) with up to 4 channels."""
    channels = shape[2] if len(shape) == 3 else 1
    return dtype.kind in "ui" and dtype.itemsize == 2 and len(shape) in (2, 3) and channels <= 4


def record_bytes(
    blob: memoryview, sizes: tuple[int, ...], dctx: zstd.ZstdDecompressor, what: str = "a record"
) -> bytes:
    """A record's zstd frame decompressed, its content one of ``sizes`` bytes (checked on
    the frame's own claim before anything is allocated, and again after).

    Raises:
        StoreCorrupt: another size, or bytes that fail to decompress.
    """
    try:
        size = zstd.frame_content_size(blob)
        if size not in sizes:
            held = " or ".join(map(str, sizes))
            raise StoreCorrupt(f"{what} holds {size} bytes, not {held}")
        raw = dctx.decompress(blob)
    except zstd.ZstdError as exc:
        raise StoreCorrupt(f"a record fails to decompress: {exc}") from None
    if len(raw) != size:
        raise StoreCorrupt(f"a record decompressed to {len(raw)} bytes, expected {size}")
    return raw


def band_rows(height: int, bands: int, band: int) -> tuple[int, int]:
    """Rows ``[start, stop)`` of band ``band`` when ``height`` rows are cut in ``bands``."""
    return band * height // bands, (band + 1) * height // bands


def pack(meta: dict[str, Any], records: list[Record], payload: bytes) -> bytes:
    head = dict(meta, frames=[r.to_json() for r in records])
    text = json.dumps(head, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return MAGIC + _LEN.pack(len(text)) + text + payload


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StoreCorrupt(f"group header: {what} must be an int in {low}..{high}, got {value!r}")
    return value


def parse_header(data: bytes | bytearray | memoryview) -> Header:
    """Read and validate the header of an encoded group.

    Raises:
        StoreCorrupt: any field is missing, of the wrong type or out of range, offsets
            point outside the data, or references form a cycle.
        TypeError: ``data`` is not bytes-like.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"an encoded group is bytes, got {type(data).__name__}")
    view = memoryview(data)
    if len(view) < PREFIX or bytes(view[: len(MAGIC)]) != MAGIC:
        raise StoreCorrupt("not an encoded hyperframe group (bad magic or too short)")
    (size,) = _LEN.unpack(view[len(MAGIC) : PREFIX])
    if size > MAX_HEADER_BYTES or PREFIX + size > len(view):
        raise StoreCorrupt(f"group header claims {size} bytes; only {len(view) - PREFIX} exist")
    try:
        head = json.loads(bytes(view[PREFIX : PREFIX + size]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StoreCorrupt(f"group header is not valid JSON: {exc}") from None
    keys = {"dtype", "shape", "base", "layout", "tier", "frames"}
    optional = {"predictor", "transform", "bands", "planes", "segments", "pix_fmt", "extradata",
                "residuals"}  # fmt: skip
    if not isinstance(head, dict) or set(head) - optional != keys:
        raise StoreCorrupt(
            f"group header must have the keys {sorted(keys)}, and may have {sorted(optional)}"
        )
    predictor = head.get("predictor", "none")
    if predictor not in PREDICTORS:
        raise StoreCorrupt(f"group header: unknown predictor {predictor!r}")
    transform = head.get("transform", "none")
    if transform not in TRANSFORMS:
        raise StoreCorrupt(f"group header: unknown colour transform {transform!r}")
    if head["dtype"] not in FRAME_DTYPES:
        raise StoreCorrupt(f"group header: unsupported dtype {head['dtype']!r}")
    dtype = np.dtype(head["dtype"])
    shape_in = head["shape"]
    if not isinstance(shape_in, list) or not 1 <= len(shape_in) <= 8:
        raise StoreCorrupt("group header: shape must be a list of 1 to 8 ints")
    shape = tuple(_int(d, "a shape dimension", 1, MAX_FRAME_BYTES) for d in shape_in)
    if math.prod(shape) * dtype.itemsize > MAX_FRAME_BYTES:
        raise StoreCorrupt(f"group header: frames of {shape} {dtype} exceed the size limit")
    if head["layout"] not in LAYOUTS or head["tier"] not in TIERS:
        raise StoreCorrupt("group header: unknown layout or tier")
    frames = head["frames"]
    if not isinstance(frames, list) or not 1 <= len(frames) <= MAX_FRAMES:
        raise StoreCorrupt(f"group header: frames must be a list of 1..{MAX_FRAMES} entries")
    count = len(frames)
    base = _int(head["base"], "base", 0, count - 1)
    payload_len = len(view) - PREFIX - size
    bands = _int(head.get("bands", 1), "bands", 1, min(MAX_HEADER_BANDS, shape[0]))
    if bands > 1 and (dtype != np.uint8 or head["tier"] != "lossless" or predictor == "webp"):
        raise StoreCorrupt("group header: bands need lossless uint8 frames without WebP")
    planar = "planes" in head
    if planar:
        planes, segments, pix_fmt = _planar(head, shape, dtype, predictor)
        bands = len(segments)
    elif {"segments", "pix_fmt", "extradata"} & set(head) or predictor in ("ffv1", "x264"):
        raise StoreCorrupt(f"group header: segments, pix_fmt and {predictor} need planes")
    packets = predictor == "x264"
    whole_raw = planar and predictor == "ffv1"
    records = tuple(
        _record(entry, i, count, payload_len, 1 if packets else bands, whole_raw=whole_raw,
                planar=planar and not packets)
        for i, entry in enumerate(frames)
    )  # fmt: skip
    if packets and (head["layout"] != "gop" or base != 0 or not _gop_chain(records)):
        raise StoreCorrupt("group header: x264 records must run from keyframes, frame by frame")
    if head["tier"] == "lossless" and any(r.kind == "quant" for r in records):
        raise StoreCorrupt("group header: a lossless group holds a quantised record")
    _check_acyclic([r.ref for r in records])
    residuals = head.get("residuals", "plain")
    zigzag = residuals == "zigzag"
    wide_ints = dtype.kind in "ui" and dtype.itemsize > 1 and head["tier"] == "lossless"
    if residuals not in ("plain", "zigzag") or (zigzag and (planar or not wide_ints)):
        raise StoreCorrupt("group header: zigzagged residuals need lossless 2- to 8-byte integers")
    if predictor == "surface":
        if not (zigzag and not planar and surface_frames(shape, dtype)):
            raise StoreCorrupt("group header: surface records need lossless 16-bit frames "
                               "(H, W) or (H, W, C), zigzagged")  # fmt: skip
    elif predictor != "none" and not planar and (dtype != np.uint8 or len(shape) < 2):
        raise StoreCorrupt(f"group header: the {predictor} predictor needs uint8 frames of 2+ dims")
    if transform != "none" and (dtype != np.uint8 or shape[-1] != 3 or head["tier"] != "lossless"):
        raise StoreCorrupt("group header: the colour transform needs lossless uint8 RGB frames")
    if predictor == "webp" and (len(shape) != 3 or transform != "rct"):
        raise StoreCorrupt("group header: WebP records need lossless uint8 RGB frames")
    header = Header(
        dtype,
        shape,
        base,
        head["layout"],
        head["tier"],
        records,
        PREFIX + size,
        predictor,
        transform,
        bands,
        zigzag=zigzag,
    )
    if not planar:
        return header
    extradata = head.get("extradata", "")
    if (
        not isinstance(extradata, str)
        or len(extradata) > 2 * MAX_EXTRADATA
        or (extradata and not pix_fmt)
    ):
        raise StoreCorrupt("group header: extradata must be a short hex string (ffv1, x264)")
    try:
        config = bytes.fromhex(extradata)
    except ValueError:
        raise StoreCorrupt("group header: extradata is not hex") from None
    return replace(header, planes=planes, segments=segments, pix_fmt=pix_fmt, extradata=config)


MAX_EXTRADATA = 4096


PLANAR_FORMATS = frozenset(
    {"yuv420p", "yuv422p", "yuv444p", "gray", "yuv420p10le", "yuv422p10le", "yuv444p10le",
     "gray10le"}
)  # fmt: skip


def _planar(
    head: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype, predictor: str
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int, int], ...], str]:
    """Validate a planar group's planes, segments and pixel format."""
    total = math.prod(shape)
    if dtype.str not in ("|u1", "<u2") or head["tier"] != "lossless" or predictor not in (
        "gradient", "ffv1",
    "x264",
    ) or "transform" in head or "bands" in head:  # fmt: skip
        raise StoreCorrupt("group header: planes need lossless uint8/uint16 gradient, ffv1, x264")
    raw_planes, raw_segs = head["planes"], head.get("segments")
    if not isinstance(raw_planes, list) or not 1 <= len(raw_planes) <= 4:
        raise StoreCorrupt("group header: planes must be a list of 1 to 4 [rows, width]")
    planes = tuple(_pair(p, "a plane", total) for p in raw_planes)
    if sum(h * w for h, w in planes) != total:
        raise StoreCorrupt("group header: the planes do not add up to the frame")
    if not isinstance(raw_segs, list) or not 1 <= len(raw_segs) <= MAX_HEADER_BANDS:
        raise StoreCorrupt(f"group header: segments must be a list of 1..{MAX_HEADER_BANDS}")
    segments = []
    at, plane, plane_end = 0, 0, planes[0][0] * planes[0][1]
    for seg in raw_segs:
        if not isinstance(seg, list) or len(seg) != 3:
            raise StoreCorrupt("group header: a segment must be [offset, rows, width]")
        o = _int(seg[0], "a segment offset", 0, total)
        r, w = _pair(seg[1:], "a segment", total)
        if at == plane_end and plane + 1 < len(planes):
            plane += 1
            plane_end += planes[plane][0] * planes[plane][1]
        if o != at or w != planes[plane][1] or o + r * w > plane_end:
            raise StoreCorrupt("group header: segments must tile the planes' rows in order")
        segments.append((o, r, w))
        at = o + r * w
    if at != total:
        raise StoreCorrupt("group header: the segments do not cover the frame")
    pix_fmt = head.get("pix_fmt", "")
    if (predictor in ("ffv1", "x264")) != (pix_fmt != "") or (
        pix_fmt and pix_fmt not in PLANAR_FORMATS
    ):
        raise StoreCorrupt(f"group header: a bad pix_fmt {pix_fmt!r} for the {predictor} records")
    if pix_fmt:
        wide = "10le" in pix_fmt
        if wide != (dtype.itemsize == 2) or len(planes) != (1 if "gray" in pix_fmt else 3):
            raise StoreCorrupt(f"group header: pix_fmt {pix_fmt} does not match the planes")
    return planes, tuple(segments), pix_fmt


def _pair(value: Any, what: str, high: int) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise StoreCorrupt(f"group header: {what} must be [rows, width]")
    return _int(value[0], f"{what}'s rows", 1, high), _int(value[1], f"{what}'s width", 1, high)


def _gop_chain(records: tuple[Record, ...]) -> bool:
    """Whether every record is a keyframe (raw) or rests on the frame just before it, and
    the first is a keyframe: an x264 group's packets, decoded in frame order."""
    return records[0].kind == "raw" and all(
        r.kind == "raw" or (r.kind == "delta" and r.ref == i - 1) for i, r in enumerate(records)
    )


def _check_acyclic(refs: list[int]) -> None:
    """Refuse references that do not all lead to a raw frame (``ref`` -1), in linear time:
    a walk stops at a frame known to reach a raw one and marks the frames it passed; one
    that meets its own path has found a cycle, named by the walk's first frame (the lowest
    whose chain never ends). Raises :class:`StoreCorrupt`."""
    resolved = [ref < 0 for ref in refs]
    on_path = [False] * len(refs)
    path: list[int] = []
    for i in range(len(refs)):
        j = i
        while not resolved[j]:
            if on_path[j]:
                raise StoreCorrupt(f"group header: frame {i}'s references form a cycle")
            on_path[j] = True
            path.append(j)
            j = refs[j]
        for k in path:
            resolved[k] = True
        path.clear()


def _record(
    entry: Any,
    index: int,
    count: int,
    payload_len: int,
    bands: int,
    *,
    planar: bool = False,
    whole_raw: bool = False,
) -> Record:
    kinds = (["raw"], ["delta"])
    banded = (bands > 1 or planar) and isinstance(entry, list) and entry[:1] in kinds
    if whole_raw and banded and entry[0] == "raw" and len(entry) == 6:
        banded = False  # an FFV1 packet (a raw record with band lengths is gradient-coded)
    if not isinstance(entry, list) or len(entry) != (7 if banded else 6):
        size = 7 if banded else 6
        raise StoreCorrupt(f"group header: frame {index}'s entry must be a list of {size} fields")
    kind, ref, offset, length, step, qdtype = entry[:6]
    if kind not in KINDS:
        raise StoreCorrupt(f"group header: frame {index} has unknown kind {kind!r}")
    ref = _int(ref, f"frame {index}'s ref", -1, count - 1)
    if (ref == -1) != (kind == "raw") or ref == index:
        raise StoreCorrupt(f"group header: frame {index} ({kind}) has a bad ref {ref}")
    offset = _int(offset, f"frame {index}'s offset", 0, payload_len)
    length = _int(length, f"frame {index}'s length", 0, payload_len - offset)
    if banded:
        parts = entry[6]
        if not isinstance(parts, list) or len(parts) != bands:
            raise StoreCorrupt(f"group header: frame {index} must list {bands} band lengths")
        sizes = tuple(_int(n, f"frame {index}'s band length", 1, length) for n in parts)
        if sum(sizes) != length:
            raise StoreCorrupt(f"group header: frame {index}'s band lengths do not add up")
        return Record(kind, ref, offset, length, parts=sizes)
    if kind == "quant":
        if (
            isinstance(step, bool)
            or not isinstance(step, int | float)
            or not math.isfinite(step)
            or step <= 0
            or qdtype not in QUANT_DTYPES
        ):
            raise StoreCorrupt(f"group header: frame {index} has a bad step or qdtype")
        return Record(kind, ref, offset, length, float(step), qdtype)
    return Record(kind, ref, offset, length)
