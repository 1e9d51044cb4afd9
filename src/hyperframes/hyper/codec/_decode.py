"""Decoding an encoded group: records along their reference chains, band by band.

A banded group (see ``codec``) decodes each band on its own: on the thread pool the
caller passes (a :class:`~hyperframes.store.FrameStore` owns one for its lifetime), or
one band after another in the caller's thread. The codec starts no threads of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np
import zstandard as zstd

from ...errors import StoreCorrupt
from . import group_header
from ._lossy import dequantise
from ._pixels import as_uint, from_zigzag, join_bytes, ungradient, unrct, webp_decode


def each_band(fn: Callable[[int], None], bands: int, pool: Executor | None = None) -> None:
    """``fn(band)`` for every band: on ``pool`` when given (zstd, OpenCV and numpy release
    the GIL, so bands decode in parallel), else in this thread. The first error is raised."""
    if pool is None or bands == 1:
        for band in range(bands):
            fn(band)
        return
    for done in [pool.submit(fn, band) for band in range(bands)]:
        done.result()


def decode_rows(
    view: memoryview, header: group_header.Header, chain: list[int], band: int
) -> np.ndarray:
    """Band ``band`` of frame ``chain[-1]``, decoded along its chain (bands stand alone)."""
    dctx = zstd.ZstdDecompressor()
    value: np.ndarray | None = None
    for j in chain:
        value = _decode_record(view, header, j, value, dctx, band)
    assert value is not None
    start, stop = header.band_rows(band)
    rows = value.reshape(stop - start, *header.shape[1:])
    return unrct(rows) if header.transform == "rct" else rows


def decode_group_rows(view: memoryview, header: group_header.Header, band: int) -> np.ndarray:
    """Band ``band`` of every frame of the group, each record decoded once."""
    dctx = zstd.ZstdDecompressor()
    start, stop = header.band_rows(band)
    shape = (stop - start, *header.shape[1:])
    out = np.empty((header.count, math.prod(shape)), dtype=header.dtype)
    done = np.zeros(header.count, dtype=bool)
    for i in range(header.count):
        for j in header.chain(i):
            if not done[j]:
                ref = header.records[j].ref
                value = _decode_record(view, header, j, out[ref] if ref >= 0 else None, dctx, band)
                out[j] = value
                done[j] = True
    frames = out.reshape(header.count, *shape)
    return unrct(frames) if header.transform == "rct" else frames


def _decode_record(
    view: memoryview,
    header: group_header.Header,
    j: int,
    ref: np.ndarray | None,
    dctx: zstd.ZstdDecompressor,
    band: int = 0,
) -> np.ndarray:
    """Band ``band`` of record ``j`` (flat), given its reference's band ``ref``."""
    rec = header.records[j]
    start, stop = header.band_rows(band)
    shape = (stop - start, *header.shape[1:])
    n = math.prod(shape)
    if rec.kind == "copy":
        assert ref is not None
        return ref.copy()
    if rec.kind == "quant":
        assert ref is not None
        if header.dtype.str not in ("|u1", "<u2", "<f4", "<f8"):
            raise StoreCorrupt(f"frame {j}: quantised records need uint8/16 or float frames")
        q = _read(view, header.part(rec, band), np.dtype(rec.qdtype), n, dctx)
        return dequantise(ref, q.astype(np.float64), rec.step)
    if rec.kind == "raw" and header.predictor == "webp":  # never banded
        at, length = header.part(rec, band)
        return webp_decode(view[at : at + length], header.shape)
    values = _read(view, header.part(rec, band), np.dtype(f"<u{header.dtype.itemsize}"), n, dctx)
    if header.zigzag:
        values = from_zigzag(values)
    if rec.kind == "raw" and header.predictor == "gradient":
        values = ungradient(values.reshape(shape)).reshape(-1)
    if rec.kind == "delta":
        assert ref is not None
        values = values + as_uint(ref)
    return values.view(header.dtype)


def _read(
    view: memoryview,
    part: tuple[int, int],
    dtype: np.dtype,
    n: int,
    dctx: zstd.ZstdDecompressor,
) -> np.ndarray:
    start, length = part
    blob = view[start : start + length]
    expected = n * dtype.itemsize
    try:
        if zstd.frame_content_size(blob) != expected:
            raise StoreCorrupt(f"a record does not hold {expected} bytes")
        raw = dctx.decompress(blob)
    except zstd.ZstdError as exc:
        raise StoreCorrupt(f"a record fails to decompress: {exc}") from None
    if len(raw) != expected:
        raise StoreCorrupt(f"a record decompressed to {len(raw)} bytes, expected {expected}")
    return join_bytes(raw, dtype, n)
