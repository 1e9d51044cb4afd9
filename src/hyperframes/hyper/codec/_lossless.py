"""Lossless groups of arrays (RGB frames, any integer or float frames): frames coded
alone (gradient residual + zstd, lossless WebP, or a 16-bit frame less its fitted
surface: ``_surface``) and deltas along the layout's references,
band by band, chosen by ``_records.choose_records``. (A video's planes go through
``_planes``; lossy tiers through ``_lossy``.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import zstandard as zstd

from . import _surface, group_header
from ._pixels import as_uint, planes, webp_encode
from ._records import Blob, choose_records, probe_bands, reference

BAND_BYTES = 192 << 10
"""A lossless uint8 group is cut into one band per this many bytes of a frame..."""
MAX_BANDS = 4
"""...and at most this many bands."""
SURFACE_MARGIN = 1.1
"""In a group of surface records, a delta is coded only where a quick look at it
(``_records.probe_bands``) promises at most 1.1x the base's record: noise in two frames
adds up in their difference, so on noisy smooth fields (``benchmarks/store_read.py``'s
simulation) the frame alone won every time, and each delta coded first was time lost."""


def compressor(level: int, source_size: int | None) -> zstd.ZstdCompressor:
    """zstd at ``level``; bands are compressed with the settings zstd picks for the whole
    frame (``source_size``): left to their own smaller size, bands under 256 KiB got weaker
    settings and came out 2-3 % bigger (bikes)."""
    if source_size is None:
        return zstd.ZstdCompressor(level=level, write_checksum=True)
    params = zstd.ZstdCompressionParameters.from_level(
        level, source_size=source_size, write_checksum=1, write_content_size=1
    )
    return zstd.ZstdCompressor(compression_params=params)


def bands_for(arr: np.ndarray, tier: str, predictor: str) -> int:
    if tier != "lossless" or arr.dtype != np.uint8 or arr.ndim < 3 or predictor == "webp":
        return 1
    return max(1, min(MAX_BANDS, arr[0].nbytes // BAND_BYTES, arr.shape[1]))


def _compress(
    values: np.ndarray, predictor: str, cctx: zstd.ZstdCompressor, bands: int, zigzag: bool
) -> Blob:
    """``values`` (a frame's unsigned integer view) as zstd bytes, band by band."""
    if bands == 1:
        return cctx.compress(planes(values, predictor, zigzag=zigzag)), ()
    h = values.shape[0]
    rows = [group_header.band_rows(h, bands, b) for b in range(bands)]
    blobs = [cctx.compress(planes(values[start:stop], predictor, zigzag=zigzag))
             for start, stop in rows]  # fmt: skip
    return b"".join(blobs), tuple(len(b) for b in blobs)


def _raw_blob(
    coded: np.ndarray, predictor: str, cctx: zstd.ZstdCompressor, bands: int, zigzag: bool
) -> Blob:
    """A frame stored whole (in the group's coded space) as record bytes."""
    if predictor == "webp":
        return webp_encode(coded), ()
    if predictor == "surface":
        return _surface.encode(coded, cctx), ()
    return _compress(as_uint(coded), predictor, cctx, bands, zigzag)


def surface_or_plain(
    base: np.ndarray, level: int, cctx: zstd.ZstdCompressor
) -> tuple[str, zstd.ZstdCompressor]:
    """A 16-bit group's predictor and compressor: its frames coded against their fitted
    surface where that codes the base smaller than its plain values do (noisy smooth
    fields: simulations, sensors), else as they are (flat or sharp synthetic frames)."""
    surface = _surface.compressor(level)
    plain = _raw_blob(base, "none", cctx, 1, zigzag=True)[0]
    if len(_raw_blob(base, "surface", surface, 1, zigzag=True)[0]) < len(plain):
        return "surface", surface
    return "none", cctx


def surface_delta_may_pay(
    frame: np.ndarray, ref: np.ndarray, base_bytes: int, compress: Callable[[bytes], bytes]
) -> bool:
    """Whether a delta of ``frame`` to ``ref`` (16-bit) may code smaller than a frame alone
    against its surface, which the group's base took ``base_bytes``: False where the
    delta, sampled on bands of rows and compressed by ``compress``, promises more than
    :data:`SURFACE_MARGIN` times that."""
    bands = probe_bands(frame.shape[0])
    if bands is None:
        return True
    diff = np.concatenate([as_uint(frame[b]) - as_uint(ref[b]) for b in bands])
    sampled = len(compress(planes(diff, "none", zigzag=True))) * frame.shape[0] / len(diff)
    return sampled <= SURFACE_MARGIN * base_bytes


def zigzags(arr: np.ndarray, tier: str) -> bool:
    """Whether a group's residuals are zigzagged: lossless integers wider than a byte."""
    return tier == "lossless" and arr.dtype.kind in "ui" and arr.dtype.itemsize > 1


def _reference(i: int, b: int, n: int, layout: str) -> int:
    """Frame ``i``'s reference under ``layout``: ``"auto"`` is the codec's one rule
    (``_records.reference``); the others are what their names say."""
    if layout == "independent" or i == b:
        return -1
    if layout == "auto":
        return reference(i, b, n)
    if layout == "chain":
        return i - 1 if i > b else i + 1
    return b


def encode_lossless(
    arr: np.ndarray,
    b: int,
    layout: str,
    cctx: zstd.ZstdCompressor,
    *,
    fallback: bool,
    predictor: str,
    bands: int,
) -> tuple[list[group_header.Record], list[bytes]]:
    zz = zigzags(arr, "lossless")
    may_pay = None
    if predictor == "surface":
        probe = zstd.ZstdCompressor(level=1)

        def may_pay(i: int, ref: int, base_bytes: int) -> bool:
            return surface_delta_may_pay(arr[i], arr[ref], base_bytes, probe.compress)

    return choose_records(
        arr.shape[0],
        b,
        reference=lambda i: _reference(i, b, arr.shape[0], layout),
        alone=lambda i: _raw_blob(arr[i], predictor, cctx, bands, zz),
        delta=lambda i, ref: _compress(
            as_uint(arr[i]) - as_uint(arr[ref]), "none", cctx, bands, zz
        ),
        same=lambda i, ref: np.array_equal(as_uint(arr[i]), as_uint(arr[ref])),
        may_pay=may_pay,
        fallback=fallback,
    )
