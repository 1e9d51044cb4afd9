"""The hyperframe codec: one group of frames to bytes and back, with random access.

A group is stored as a base frame plus, for every other frame, a record that
decodes from one reference frame (see :mod:`.group_header` for the bytes). Lossless
records hold the difference modulo ``2**bits`` of the frames' unsigned integer
views (floats included), so decoding is bit-exact for every integer and float
dtype, NaN and -0.0 included. Multi-byte values are split into byte planes
before zstd.

Layouts (lossless):

- ``"auto"`` (default): the codec's one reference rule, the one a video's planes
  use too (``_records.reference``): base in the middle; every 8th frame from it an
  anchor, a delta to the base; every other frame a delta to its neighbour towards
  its nearest anchor, so a frame decodes from at most 6 records at any group length;
  a delta that compresses worse than the frame alone is replaced by the frame alone.
  Groups written before 0.3.3 hold chains with every 8th frame hopping 8 (up to
  ``n/16 + 8`` records); records name their references, so they decode as before.
- ``"base"``: deltas against the base frame (``base="first"`` or ``"middle"``).
- ``"chain"``: each frame against its neighbour towards the base; smallest on
  slow motion, but a frame may need every record between it and the base.
- ``"independent"``: every frame compressed alone.

Colour transform: lossless RGB uint8 groups are coded as (G, R - G, B - G) modulo 256
(the reversible colour transform), which zstd packs 3-15 % smaller on the real clips; it is
linear modulo 256, so chains are decoded in its space and inverted once per frame.

Spatial prediction: for uint8 frames every raw record (bases, frames stored alone) holds
its 2-D gradient residual (value - left - up + up-left, modulo 256), which zstd packs far
better than the values (a 720p bigbuckbunny frame: 77 % -> 50 % of raw; a store of the whole
clip: 37 % -> 29 %). Deltas stay as they are: the residual of a delta gained ~5 % and doubled
the decoding time of a frame. Decoding a raw record costs one 2-D prefix sum (~10 ms at
720p). The header names the predictor; groups written without one decode as before.

Integers wider than a byte: the residuals of their records are zigzagged
(``"residuals": "zigzag"``), so a small negative residual is not 0xFF in every byte plane:
a 2,000-frame 512x512 uint16 simulation stored 12 % smaller (443.7 -> 391.8 MB) and read
1.2x faster in order (``benchmarks/store_read.py``). Rows less the rows above made it 13 %
smaller again, but 30 % slower to read in order, so they are left out. 16-bit frames of
(H, W) or (H, W, C) are coded alone against a smooth surface fitted to them
(``"predictor": "surface"``, ``_surface``) where that codes the group's base smaller than
its plain values: a smooth field's noise then costs about its own entropy, and such frames
usually code alone smaller than as a delta, so they read back from one record.

``intra="webp"`` codes the raw records of lossless uint8 RGB groups as lossless WebP
(through OpenCV) instead: WebP's own predictors, colour transforms and context coding make
them 20-30 % smaller than the gradient + zstd records on the real clips, at 3-10x the
encoding time and about 2x the decoding time (``benchmarks/store.py``). Deltas stay zstd.

Bands: a lossless uint8 group whose frames are at least :data:`BAND_BYTES` x 2 is cut into
up to :data:`MAX_BANDS` horizontal bands of rows, each coded on its own (its gradient
starts afresh at its first row), so one frame decodes band by band on several cores: a
random 720p frame decodes about 1.8x faster on 2 cores, at the same size within 0.5 %.

Planar groups (``planes=``: a video's native Y, U, V or gray planes, see ``_planes``) are
coded plane by plane: each plane's rows are predicted only from the same plane (gradient +
zstd, or with ``intra="ffv1"`` frames stored whole are FFV1 keyframes through PyAV), and
frames reference their neighbours towards anchors that reference the base, so that any
frame decodes from at most 6 records whatever the group's length.

Lossy tiers: ``"psnr"`` quantises each frame's difference to the base with the
coarsest step that still meets the ``psnr`` target, checked on the decoded
frame; ``"keyframe"`` stores the base only and every frame decodes to it.
Every result reports per-frame PSNR.

Example:
    >>> group = encode_group(frames)
    >>> np.array_equal(decode_frame(group.data, 5), frames[5])
    True

Longer than 300 lines: the codec's public encode and decode functions and the layout
choices they share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ...choices import INTRAS, TIERS, Intra, Tier, check_gop
from ...errors import FrameError
from ..distance import check_finite, peak_of
from . import group_header
from ._decode import decode_group_rows, decode_rows, each_band
from ._ffv1 import ffv1_format
from ._lossless import bands_for, compressor, encode_lossless, surface_or_plain, zigzags
from ._lossy import encode_lossy
from ._pixels import WEBP_MAX_SIDE, rct
from ._planes import decode_planar, encode_planar
from ._x264 import X264_FORMATS, encode_x264_group

Layout = Literal["auto", "independent", "base", "chain"]

BasePosition = Literal["first", "middle"]


@dataclass(frozen=True)
class EncodedGroup:
    """An encoded group and what it cost.

    Attributes:
        data: the bytes (decode with :func:`decode_frame` / :func:`decode_group`).
        count: frames in the group.
        shape: shape of one frame.
        dtype: dtype of the frames.
        tier: ``"lossless"``, ``"psnr"`` or ``"keyframe"``.
        layout: the layout used.
        frame_psnr: PSNR of each decoded frame against its input (``inf`` when exact).
    """

    data: bytes
    count: int
    shape: tuple[int, ...]
    dtype: np.dtype
    tier: str
    layout: str
    frame_psnr: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.frame_psnr) != self.count:
            raise ValueError("frame_psnr must have one value per frame")

    @property
    def raw_nbytes(self) -> int:
        return self.count * math.prod(self.shape) * self.dtype.itemsize

    @property
    def ratio(self) -> float:
        """Encoded size as a fraction of the raw frames' size."""
        return len(self.data) / self.raw_nbytes

    @property
    def psnr_min(self) -> float:
        return min(self.frame_psnr)

    @property
    def psnr_mean(self) -> float:
        """PSNR of the group's mean MSE (``inf`` when lossless)."""
        errors = [0.0 if p == math.inf else 10 ** (-p / 10) for p in self.frame_psnr]
        mean = sum(errors) / len(errors)
        return math.inf if mean == 0 else -10 * math.log10(mean)

    def __repr__(self) -> str:
        return (
            f"EncodedGroup(count={self.count}, shape={self.shape}, dtype={self.dtype}, "
            f"tier={self.tier!r}, layout={self.layout!r}, nbytes={len(self.data)}, "
            f"ratio={self.ratio:.3f}, psnr_min={self.psnr_min:.2f})"
        )


@dataclass(frozen=True)
class GroupInfo:
    """What an encoded group's header says (validated)."""

    count: int
    shape: tuple[int, ...]
    dtype: np.dtype
    base: int
    layout: str
    tier: str
    frames_touched: tuple[int, ...]
    """Per frame: how many records decoding it reads (itself and its references)."""


def encode_group(
    frames: np.ndarray | Sequence[np.ndarray],
    *,
    tier: Tier = "lossless",
    psnr: float = 45.0,
    layout: Layout = "auto",
    base: BasePosition = "middle",
    level: int = 3,
    intra: Intra = "gradient",
    planes: Sequence[tuple[int, int]] | None = None,
    pix_fmt: str | None = None,
    gop: int | None = None,
) -> EncodedGroup:
    """Encode a group of frames of one shape and dtype.

    Args:
        frames: an ``(n, *shape)`` array or a sequence of same-shaped frames.
        tier: ``"lossless"``, ``"psnr"`` (meet ``psnr`` dB on every frame) or ``"keyframe"``.
        psnr: the target for ``tier="psnr"``, in dB.
        layout: how lossless frames reference each other (see the module docstring);
            lossy tiers always reference the base.
        base: the base frame's position, ``"first"`` or ``"middle"``.
        level: zstd level, 1..22.
        intra: how frames stored whole are coded: ``"gradient"`` (gradient residual +
            zstd, fast) or ``"webp"`` (lossless WebP, smaller and slower; lossless uint8
            RGB groups only, others use the gradient) or ``"ffv1"`` (planar groups only:
            FFV1 keyframes through PyAV; others use the gradient) or ``"x264"`` (planar
            groups only: the whole group as lossless H.264, smallest on moving video and
            slowest to read a random frame).
        planes: each plane's ``(rows, width)`` when every frame is a video's native planes
            one after another (see :class:`~hyperframes.io.layouts.Layout`): lossless
            groups are then coded plane by plane (lossy tiers ignore it).
        pix_fmt: the planes' pixel format (``"yuv420p"``...), which ``intra="ffv1"`` and
            ``"x264"`` need.
        gop: with ``intra="x264"`` (only), a keyframe every ``gop`` frames from the group's
            first (default 32).

    Raises:
        FrameError: no frames, mismatched frames, an unsupported dtype, or (lossy tiers)
            NaN or infinity in a float frame.
        ValueError: a bad option.
    """
    arr = _as_group(frames)
    _check_options(tier, psnr, layout, base, level)
    if intra not in INTRAS:
        raise ValueError(f"intra must be one of {', '.join(INTRAS)}, got {intra!r}")
    keyframes = check_gop(gop, intra)
    n = arr.shape[0]
    if planes is not None and tier == "lossless":
        return _encode_planar(arr, planes, layout, level, intra, pix_fmt, keyframes or 1)
    b = 0 if base == "first" or layout == "independent" else n // 2
    transform = _transform_for(arr, tier)
    predictor = _predictor_for(arr, intra if transform == "rct" else "gradient")
    bands = bands_for(arr, tier, predictor)
    cctx = compressor(level, arr[0].nbytes if bands > 1 else None)
    if zigzags(arr, tier) and group_header.surface_frames(arr.shape[1:], arr.dtype):
        predictor, cctx = surface_or_plain(arr[b], level, cctx)
    if tier == "lossless":
        used: str = layout
        coded = rct(arr) if transform == "rct" else arr
        records, parts = encode_lossless(
            coded, b, used, cctx, fallback=layout == "auto", predictor=predictor, bands=bands
        )
        scores = (math.inf,) * n
    else:
        peak_of(arr.dtype)  # lossy tiers need a known peak
        for i in range(n):
            check_finite(arr[i], name=f"frame {i}")
        used = "keyframe" if tier == "keyframe" else "base"
        records, parts, scores = encode_lossy(arr, b, tier, psnr, cctx, predictor=predictor)
    meta = {"dtype": arr.dtype.str, "shape": list(arr.shape[1:]), "base": b}
    meta.update(layout=used, tier=tier)
    if predictor != "none":
        meta["predictor"] = predictor
    if transform != "none":
        meta["transform"] = transform
    if zigzags(arr, tier):
        meta["residuals"] = "zigzag"
    if bands > 1:
        meta["bands"] = bands
    data = group_header.pack(meta, records, b"".join(parts))
    return EncodedGroup(data, n, tuple(arr.shape[1:]), arr.dtype, tier, used, tuple(scores))


def read_group_info(data: bytes | bytearray | memoryview) -> GroupInfo:
    """Validate an encoded group's header and describe it, without decoding pixels.

    Raises:
        StoreCorrupt: the header does not check out.
    """
    h = group_header.parse_header(data)
    touched = tuple(len(h.chain(i)) for i in range(h.count))
    return GroupInfo(h.count, h.shape, h.dtype, h.base, h.layout, h.tier, touched)


def decode_frame(
    data: bytes | bytearray | memoryview,
    index: int,
    *,
    header: group_header.Header | None = None,
    pool: Executor | None = None,
) -> np.ndarray:
    """Decode one frame, reading only its own record and its references'.

    ``header`` is ``data``'s header when the caller parsed it already (it must come from
    these very bytes: a store keeps it beside the checksummed record). ``pool`` decodes
    the bands of a banded group in parallel, or the records of an unbanded one (else one
    after another in this thread).

    Raises:
        IndexError: ``index`` is outside the group.
        StoreCorrupt: the bytes do not check out.
    """
    header = header or group_header.parse_header(data)
    if isinstance(index, bool) or not isinstance(index, int | np.integer):
        raise TypeError(f"index must be an int, got {index!r}")
    if not 0 <= index < header.count:
        raise IndexError(f"frame {index} is outside this group of {header.count} frames")
    view, chain = memoryview(data), header.chain(int(index))
    if header.planes:
        return decode_planar(view, header, [int(index)], pool)[0]
    if header.bands == 1:
        return decode_rows(view, header, chain, 0, pool)
    out = np.empty(header.shape, header.dtype)

    def fill(band: int) -> None:
        start, stop = header.band_rows(band)
        decode_rows(view, header, chain, band, out=out[start:stop])

    each_band(fill, header.bands, pool)
    return out


def decode_group(
    data: bytes | bytearray | memoryview,
    *,
    header: group_header.Header | None = None,
    pool: Executor | None = None,
    out: np.ndarray | None = None,
    frames: range | None = None,
) -> np.ndarray:
    """Decode every frame of a group, or its ``frames`` (a range of its indices), into one
    ``(len(frames), *shape)`` array (``header`` and ``pool``: as for :func:`decode_frame`):
    ``out``, where given (of that shape and dtype), else a new one. Each record the frames
    need is decoded once, the references of ``frames`` outside them included
    (``Header.within`` says whether there are any).

    Raises:
        StoreCorrupt: the bytes do not check out.
        ValueError: ``frames`` outside the group, or ``out`` of another shape.
    """
    header = header or group_header.parse_header(data)
    view = memoryview(data)
    wanted = range(header.count) if frames is None else frames
    if wanted.step != 1 or not 0 <= wanted.start <= wanted.stop <= header.count:
        raise ValueError(f"frames must be a range within 0..{header.count}, got {frames!r}")
    shape = (len(wanted), *header.shape)
    if out is not None and (out.shape != shape or out.dtype != header.dtype):
        raise ValueError(f"out is {out.shape} {out.dtype}; the frames are "
                         f"{shape} {header.dtype}")  # fmt: skip
    if header.planes:
        decoded = decode_planar(view, header, wanted, pool)
        if out is None:
            return decoded
        out[...] = decoded
        return out
    if header.bands == 1:
        return decode_group_rows(view, header, 0, pool, out=out, frames=wanted)
    if out is None:
        out = np.empty(shape, header.dtype)

    def fill(band: int) -> None:
        start, stop = header.band_rows(band)
        decode_group_rows(view, header, band, out=out[:, start:stop], frames=wanted)

    each_band(fill, header.bands, pool)
    return out


# -- encoding ---------------------------------------------------------------------------


def _encode_planar(
    arr: np.ndarray,
    planes: Sequence[tuple[int, int]],
    layout: str,
    level: int,
    intra: str,
    pix_fmt: str | None,
    gop: int,
) -> EncodedGroup:
    shapes = [(int(h), int(w)) for h, w in planes]
    if arr.dtype not in (np.uint8, np.uint16) or sum(h * w for h, w in shapes) != arr[0].size:
        raise FrameError(
            f"planes {shapes} do not add up to frames of {arr.shape[1:]} {arr.dtype} "
            "(planar groups are uint8 or uint16)"
        )
    if intra in ("ffv1", "x264") and pix_fmt is None:
        raise ValueError(f"intra={intra!r} needs the planes' pix_fmt, e.g. 'yuv420p'")
    if intra == "x264" and pix_fmt is not None:
        if ffv1_format(pix_fmt) not in X264_FORMATS:
            raise ValueError(f"intra='x264' codes {', '.join(sorted(X264_FORMATS))}, not {pix_fmt}")
        meta, records, parts = encode_x264_group(
            arr.reshape(arr.shape[0], -1), shapes, ffv1_format(pix_fmt), gop
        )
    else:
        meta, records, parts = encode_planar(
            arr, shapes, level=level, intra=intra, pix_fmt=pix_fmt,
            layout="independent" if layout == "independent" else "anchors",
        )  # fmt: skip
    head = {"dtype": arr.dtype.str, "shape": list(arr.shape[1:]), "tier": "lossless", **meta}
    data = group_header.pack(head, records, b"".join(parts))
    n, used = arr.shape[0], str(meta["layout"])
    return EncodedGroup(data, n, tuple(arr.shape[1:]), arr.dtype, "lossless", used, (math.inf,) * n)


def _as_group(frames: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    if not isinstance(frames, np.ndarray):
        shapes = {(np.shape(f), np.asarray(f).dtype) for f in frames}
        if len(shapes) > 1:
            raise FrameError(f"a group's frames must share shape and dtype, got {shapes}")
        frames = np.stack(frames) if shapes else np.empty((0, 1))
    if frames.ndim < 2 or frames.shape[0] == 0 or frames[0].size == 0:
        raise FrameError(f"a group needs an (n, *shape) array with n >= 1, got {frames.shape}")
    kind = frames.dtype.newbyteorder("<") if frames.dtype.byteorder == ">" else frames.dtype
    if kind.str not in group_header.FRAME_DTYPES:
        raise FrameError(
            f"the codec stores integer and float frames, got {frames.dtype}; "
            "convert to uint8, uint16, float32 or float64"
        )
    return np.ascontiguousarray(frames, dtype=kind)


def _check_options(tier: str, psnr: float, layout: str, base: str, level: int) -> None:
    if tier not in TIERS:
        raise ValueError(f"tier must be 'lossless', 'psnr' or 'keyframe', got {tier!r}")
    if layout not in ("auto", "independent", "base", "chain"):
        raise ValueError(f"layout must be auto, independent, base or chain, got {layout!r}")
    if base not in ("first", "middle"):
        raise ValueError(f"base must be 'first' or 'middle', got {base!r}")
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 22:
        raise ValueError(f"level must be an int in 1..22, got {level!r}; try 3")
    if isinstance(psnr, bool) or not isinstance(psnr, int | float) or not 0 < psnr <= 200:
        raise ValueError(f"psnr must be a number of dB in (0, 200], got {psnr!r}; try 45")


def _transform_for(arr: np.ndarray, tier: str) -> str:
    return "rct" if tier == "lossless" and arr.dtype == np.uint8 and arr.shape[-1] == 3 else "none"


def _predictor_for(arr: np.ndarray, intra: str) -> str:
    if arr.dtype != np.uint8 or arr.ndim < 3:  # (wider integers: rows less the rows above
        return "none"  # made them 13 % smaller and their reading 30 % slower; left out)
    rgb = arr.ndim == 4 and arr.shape[-1] == 3  # (n, H, W, 3)
    if intra == "webp" and rgb and max(arr.shape[1:3]) <= WEBP_MAX_SIDE:
        return "webp"
    return "gradient"
