"""Planar groups: frames of a video's native planes (Y, U, V or gray), coded plane by plane.

A planar frame is one flat run of samples (``uint8``, or ``uint16`` for 10-bit), the
planes one after another (``"planes": [[h, w], ...]`` in the group header). It is cut into
*segments*: whole rows of one plane (``"segments": [[offset, rows, width], ...]``; the
luma plane of a large frame is cut into up to :data:`MAX_LUMA_SEGMENTS` row bands), each
coded on its own so that a frame decodes segment by segment on several cores, and no
plane's rows ever predict another's.

Records:

- raw, ``"predictor": "gradient"``: per segment, the 2-D gradient residual (value - left -
  up + up-left, modulo ``2**bits``), byte planes apart, one zstd frame each;
- raw, ``"predictor": "ffv1"``: the whole frame as one FFV1 keyframe packet (FFmpeg's
  context-modelled coder, through PyAV: version 3 with 4 slices, so that it decodes on
  several threads; ``"pix_fmt"`` names the planes' format, ``"extradata"`` holds the
  coder's configuration). Each group uses FFV1's Golomb-Rice coder (FFmpeg's default), or
  its range coder where that is at least 5 % smaller on the group's first frame coded
  alone (:data:`RANGE_GAIN`; the range coder takes 1.5-1.7x the CPU to decode). The
  gradient record is kept instead where it is smaller (tried on that first frame, and
  after it only where it came close: :data:`GRADIENT_TRY`);
- delta: per segment, the difference modulo ``2**bits`` to the reference, one zstd frame;
- copy: the reference's samples.

References (``"layout": "anchors"``): the codec's one rule (``_records.reference``),
with the base in the middle frame: any frame decodes from at most 6 records whatever the
group's length, and deltas stay between neighbours. Size cost against a chain of
neighbours with every 8th frame hopping 8 (up to ``n/16 + 8`` records: 11 in a 60-frame
group): 3.1 % on testvideo (the end anchors of its 60-frame groups), 0.0 % on bigbuckbunny
and bikes; deltas straight to the nearest anchor (at most 3 records) cost 23 %, 6 % and
0.3 % (testvideo, bigbuckbunny, bikes). A delta that codes larger than the
frame alone is replaced by the frame alone; one whose residual, sampled on a few luma
rows, promises clearly more bits than the gradient's is not coded at all
(:func:`delta_may_pay`).

Example:
    >>> segs = segments([(4, 8), (2, 4), (2, 4)], luma_bands=2)
    >>> [list(s) for s in segs]
    [[0, 2, 8], [16, 2, 8], [32, 2, 4], [40, 2, 4]]

Longer than 300 lines: the planar records' encoding and their decoding belong together (one
record format; the FFV1 coder itself is ``_ffv1``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor

import numpy as np
import zstandard as zstd

from . import group_header
from ._decode import each_band
from ._ffv1 import FFV1_FORMATS, Ffv1Planes, ffv1_format
from ._pixels import gradient, join_bytes, split_bytes, ungradient
from ._records import Blob, choose_records, probe_bands, reference
from ._x264 import decode_x264
from .group_header import Header, Record, record_bytes

MAX_LUMA_SEGMENTS = 4
"""The luma plane of a frame is cut into at most this many row bands..."""
SEGMENT_SAMPLES = 192 << 10
"""...one per this many luma samples."""
FFV1_OPTIONS = {"g": "1", "level": "3", "slices": "4"}
"""Keyframes only (each packet stands alone), version 3 with 4 slices (decoded on several
threads; FFmpeg's own count is 9 at 720p, 4 at 640x272: 4 is 0.9 % smaller at 720p), and
FFmpeg's default coder (Golomb-Rice), or with :data:`FFV1_RANGE` the range coder."""
FFV1_RANGE = {"coder": "1"}
"""The range coder with a state table: 2-9 % smaller than Golomb-Rice on most video (larger
on film grain), at 1.5-1.7x its CPU to decode and to encode."""
RANGE_GAIN = 0.05
"""A group's FFV1 records use the range coder where, on the group's first frame coded
alone (coded with both), it is at least 5 % smaller than Golomb-Rice; else Golomb-Rice."""
RAW_WINDOW_LOG = 17
"""Gradient residuals are compressed at zstd level ``level - 2`` (at least 1) with a 128 KiB
window: on residuals of bikes, bigbuckbunny and testvideo planes 3.6-6.3 % smaller than at
level 3 and twice as fast (LZ matches rarely pay on residuals); deltas stay at ``level``
(level 1 made them 1-2 % larger on two of the three)."""
GRADIENT_TRY = 16
"""With ``intra="ffv1"``, the first frame of a group coded alone (its base) is coded both
ways and the smaller kept; each later one is also coded by the gradient only where the
last frame coded both ways had a gradient record under :data:`GRADIENT_CLOSE` times its
FFV1 packet, or where its FFV1 packet is under 1/16 of its samples' bytes (near-flat
frames). Elsewhere FFV1 is the smaller and the gradient is not computed."""
GRADIENT_CLOSE = 1.1
PROBE_MARGIN = 1.0
"""Deltas are judged before coding on bands of luma rows (``_records.probe_bands``), and
not coded where the bands' delta is larger than their gradient residual. Against
coding every delta: the same sizes on bikes, bigbuckbunny and goldeneye (48 frames) and on
testvideo (240; 0.1 % smaller), in both intra modes; margins up to 1.5 gave the same
sizes, more slowly. (A cost proxy, the mean ``log2(1 + |r|)``, cost testvideo 12 % at a
margin of 1.2: still regions code far below it.)"""

Segment = tuple[int, int, int]
"""(flat offset, rows, width)."""


def segments(planes: Sequence[tuple[int, int]], *, luma_bands: int) -> list[Segment]:
    """The segments of a frame of ``planes``: the first plane in ``luma_bands`` row bands,
    every other plane whole."""
    out: list[Segment] = []
    at = 0
    for p, (h, w) in enumerate(planes):
        k = max(1, min(luma_bands, h)) if p == 0 else 1
        for band in range(k):
            start, stop = group_header.band_rows(h, k, band)
            out.append((at + start * w, stop - start, w))
        at += h * w
    return out


def luma_bands_for(planes: Sequence[tuple[int, int]]) -> int:
    h, w = planes[0]
    return max(1, min(MAX_LUMA_SEGMENTS, (h * w) // SEGMENT_SAMPLES, h))


# -- prediction -------------------------------------------------------------------------


# -- encoding ----------------------------------------------------------------------------


def encode_planar(
    arr: np.ndarray,
    planes: Sequence[tuple[int, int]],
    *,
    level: int,
    intra: str,
    pix_fmt: str | None,
    layout: str,
) -> tuple[dict[str, object], list[Record], list[bytes]]:
    """Code a lossless group of planar frames (``arr``: ``(n, ...)``, flattened per frame).

    Returns:
        The header keys, the records and their bytes.
    """
    n = arr.shape[0]
    flat = arr.reshape(n, -1)
    cctx = zstd.ZstdCompressor(level=level, write_checksum=True)
    params = zstd.ZstdCompressionParameters.from_level(
        max(1, level - 2), window_log=RAW_WINDOW_LOG, write_checksum=1, write_content_size=1
    )
    raw_cctx = zstd.ZstdCompressor(compression_params=params)
    probe = zstd.ZstdCompressor(level=1)
    segs = segments(planes, luma_bands=luma_bands_for(planes))
    use_ffv1 = intra == "ffv1" and pix_fmt is not None and ffv1_format(pix_fmt) in FFV1_FORMATS
    ffv1 = Ffv1Planes(pix_fmt, planes, options=FFV1_OPTIONS) if use_ffv1 and pix_fmt else None
    ranged = (
        Ffv1Planes(pix_fmt, planes, options=FFV1_OPTIONS | FFV1_RANGE) if ffv1 and pix_fmt else None
    )
    b = 0 if layout == "independent" else n // 2

    both = True  # code frames alone both ways (the first one always)

    def raw(i: int) -> Blob:
        nonlocal both, ffv1, ranged
        packet = b""
        if ffv1 is not None:
            packet = ffv1.encode(flat[i])
            if ranged is not None:  # the group's first: which FFV1 coder
                other = ranged.encode(flat[i])
                if len(other) <= (1 - RANGE_GAIN) * len(packet):
                    ffv1, packet = ranged, other
                ranged = None
            if not both and len(packet) * GRADIENT_TRY > flat[i].nbytes:
                return packet, ()  # the gradient would not be the smaller
        parts = [raw_cctx.compress(split_bytes(gradient(_seg(flat[i], s)))) for s in segs]
        coded = b"".join(parts), tuple(len(p) for p in parts)
        if not packet:
            return coded
        both = len(coded[0]) < GRADIENT_CLOSE * len(packet)
        return (packet, ()) if len(packet) < len(coded[0]) else coded

    def delta(i: int, ref: int) -> Blob:
        diff = flat[i] - flat[ref]
        parts = [cctx.compress(split_bytes(diff[o : o + r * w])) for o, r, w in segs]
        return b"".join(parts), tuple(len(p) for p in parts)

    records, blobs = choose_records(
        n,
        b,
        reference=lambda i: -1 if layout == "independent" else reference(i, b, n),
        alone=raw,
        delta=delta,
        same=lambda i, ref: np.array_equal(flat[i], flat[ref]),
        may_pay=lambda i, ref, _: delta_may_pay(flat[i], flat[ref], planes[0], probe.compress),
    )
    meta: dict[str, object] = {
        "base": b,
        "layout": "independent" if layout == "independent" else "anchors",
        "planes": [list(p) for p in planes],
        "segments": [list(s) for s in segs],
        "predictor": "ffv1" if ffv1 is not None else "gradient",
    }
    if ffv1 is not None:
        meta["pix_fmt"] = ffv1.pix_fmt
        meta["extradata"] = ffv1.extradata.hex()
    return meta, records, blobs


def delta_may_pay(
    frame: np.ndarray,
    ref: np.ndarray,
    luma: tuple[int, int],
    compress: Callable[[bytes], bytes],
    margin: float = PROBE_MARGIN,
) -> bool:
    """Whether a delta to ``ref`` may code smaller than ``frame`` alone, judged by
    ``compress`` on bands of luma rows (``_records.probe_bands``): False where the bands'
    delta codes larger than ``margin`` times their gradient residual (the frame alone is
    then coded without also coding the delta).
    """
    h, w = luma
    bands = probe_bands(h)
    if bands is None:
        return True
    y = frame[: h * w].reshape(h, w)
    r = ref[: h * w].reshape(h, w)
    diff = np.concatenate([y[b] - r[b] for b in bands])
    intra = np.concatenate([gradient(y[b]) for b in bands])
    return len(compress(split_bytes(diff))) <= margin * len(compress(split_bytes(intra)))


def _seg(frame: np.ndarray, seg: Segment) -> np.ndarray:
    o, r, w = seg
    return frame[o : o + r * w].reshape(r, w)


# -- decoding ----------------------------------------------------------------------------


def _read(view: memoryview, start: int, length: int, dtype: np.dtype, n: int) -> np.ndarray:
    blob = view[start : start + length]
    raw = record_bytes(blob, (n * dtype.itemsize,), zstd.ZstdDecompressor())
    return join_bytes(raw, dtype, n)


def decode_record(
    view: memoryview,
    header: Header,
    j: int,
    ref: np.ndarray | None,
    out: np.ndarray,
    pool: Executor | None,
) -> None:
    """Record ``j`` of a planar group into the flat ``out``, given its reference's samples."""
    rec = header.records[j]
    if rec.kind == "copy":
        assert ref is not None
        out[...] = ref
        return
    if rec.kind == "raw" and header.predictor == "ffv1" and not rec.parts:
        start = header.payload_start + rec.offset
        coder = Ffv1Planes(header.pix_fmt, header.planes, header.extradata)
        coder.decode(view[start : start + rec.length], out)
        return
    dtype = np.dtype(f"<u{header.dtype.itemsize}")
    samples = out.view(dtype)
    segs = header.segments

    def one(k: int) -> None:
        o, r, w = segs[k]
        at, length = header.part(rec, k)
        values = _read(view, at, length, dtype, r * w)
        if rec.kind == "raw":
            samples[o : o + r * w] = ungradient(values.reshape(r, w)).reshape(-1)
        else:
            assert ref is not None
            np.add(values, ref.view(dtype)[o : o + r * w], out=samples[o : o + r * w])

    each_band(one, len(segs), pool)


def decode_planar(
    view: memoryview, header: Header, frames: Sequence[int], pool: Executor | None
) -> np.ndarray:
    """Frames ``frames`` of a planar group, ``(len(frames), *shape)``; records shared by
    several are decoded once."""
    if header.predictor == "x264":
        return decode_x264(view, header, frames).reshape(len(frames), *header.shape)
    size = int(np.prod(header.shape))
    done: dict[int, np.ndarray] = {}
    out = np.empty((len(frames), size), header.dtype)
    for slot, i in enumerate(frames):
        for j in header.chain(i):
            if j not in done:
                ref = header.records[j].ref
                value = np.empty(size, header.dtype)
                decode_record(view, header, j, done[ref] if ref >= 0 else None, value, pool)
                done[j] = value
        out[slot] = done[i]
    return out.reshape(len(frames), *header.shape)
