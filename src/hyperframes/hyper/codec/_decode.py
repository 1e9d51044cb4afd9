"""Decoding an encoded group: records along their reference chains, band by band.

A banded group (see ``codec``) decodes each band on its own: on the thread pool the
caller passes (a :class:`~hyperframes.store.FrameStore` owns one for its lifetime), or
one band after another in the caller's thread. An unbanded group's records are read
(decompressed, their predictor undone) side by side on that pool, then joined along their
references in order. The codec starts no threads of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

import numpy as np
import zstandard as zstd

from ...errors import StoreCorrupt
from . import _surface, group_header
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
    view: memoryview,
    header: group_header.Header,
    chain: list[int],
    band: int,
    pool: Executor | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Band ``band`` of frame ``chain[-1]``, decoded along its chain (bands stand alone),
    into ``out`` (the band's rows) where given. ``pool``: the chain's records are read on
    it side by side (an unbanded group's)."""
    start, stop = header.band_rows(band)
    n = math.prod((stop - start, *header.shape[1:]))
    frame = np.empty(n, header.dtype)  # (its own block: the references' go when done)
    rows = [*np.empty((len(chain) - 1, n), header.dtype), frame]
    decode_records(view, header, chain, band, rows, pool)
    return _finished(header, frame.reshape(stop - start, *header.shape[1:]), out)


def decode_group_rows(
    view: memoryview,
    header: group_header.Header,
    band: int,
    pool: Executor | None = None,
    out: np.ndarray | None = None,
    frames: range | None = None,
) -> np.ndarray:
    """Band ``band`` of the group's frames ``frames`` (default: all), each record they
    need decoded once (``pool``: as for :func:`decode_rows`): straight into ``out`` (their
    rows) where given, contiguous and of the group's own values (no colour transform),
    else into an array of their own, then into ``out`` where given."""
    start, stop = header.band_rows(band)
    wanted = range(header.count) if frames is None else frames
    shape = (len(wanted), stop - start, *header.shape[1:])
    direct = out is not None and header.transform == "none" and out.flags.c_contiguous
    coded = out if direct and out is not None else np.empty(shape, header.dtype)
    flat = coded.reshape(len(wanted), math.prod(shape[1:]))
    records = _references_first(header, wanted)
    rows = [flat[j - wanted.start] if j in wanted else np.empty(flat.shape[1], header.dtype)
            for j in records]  # fmt: skip
    decode_records(view, header, records, band, rows, pool)
    return coded if direct else _finished(header, coded, out)


def _finished(header: group_header.Header, coded: np.ndarray, out: np.ndarray | None) -> (
    np.ndarray
):  # fmt: skip
    """Decoded rows out of the group's colour transform, into ``out`` where given."""
    if header.transform == "rct":
        return unrct(coded, out)
    if out is None:
        return coded
    out[...] = coded
    return out


def decode_records(
    view: memoryview,
    header: group_header.Header,
    records: Sequence[int],
    band: int,
    out: list[np.ndarray],
    pool: Executor | None = None,
) -> None:
    """Band ``band`` of records ``records`` (each one's references among them) into
    ``out``, a flat row each, in two passes: each record's own values (its bytes
    decompressed, the raw frames' predictor undone), independent of each other and so on
    ``pool`` side by side where given; then along the references, in place (a delta's
    reference added, a copy's taken)."""
    start, stop = header.band_rows(band)
    n = math.prod((stop - start, *header.shape[1:]))
    row = {j: k for k, j in enumerate(records)}
    quantised: dict[int, np.ndarray] = {}

    def own(k: int) -> None:
        j = records[k]
        mine = as_uint(out[k])
        value = _own(view, header, j, band, n, zstd.ZstdDecompressor(), mine)
        if value is None or value is mine:  # (a copy; or decoded in place)
            return
        if header.records[j].kind == "quant":
            quantised[j] = value
        else:
            mine[:] = as_uint(value)

    if pool is None or len(records) == 1:
        for k in range(len(records)):
            own(k)
    else:
        for done in [pool.submit(own, k) for k in range(len(records))]:
            done.result()
    for j in _references_first(header, records):
        rec, k = header.records[j], row[j]
        if rec.kind == "raw":
            continue
        ref = out[row[rec.ref]]
        if rec.kind == "delta":
            np.add(as_uint(out[k]), as_uint(ref), out=as_uint(out[k]))
        elif rec.kind == "copy":
            out[k][:] = ref
        else:
            out[k][:] = dequantise(ref, quantised.pop(j).astype(np.float64), rec.step)


def _references_first(header: group_header.Header, records: Sequence[int]) -> list[int]:
    """``records`` in an order where every record's reference comes before it."""
    order: dict[int, None] = {}
    for j in records:
        order.update((c, None) for c in header.chain(j) if c not in order)
    return list(order)


def _own(
    view: memoryview,
    header: group_header.Header,
    j: int,
    band: int,
    n: int,
    dctx: zstd.ZstdDecompressor,
    row: np.ndarray | None = None,
) -> np.ndarray | None:
    """Band ``band`` of record ``j``'s own ``n`` values, before its reference: a raw
    frame whole, a delta's differences, a quantised record's integers; ``None`` for a
    copy. A surface record is decoded into ``row`` (its unsigned values), where given."""
    rec = header.records[j]
    if rec.kind == "copy":
        return None
    if rec.kind == "quant":
        if header.dtype.str not in ("|u1", "<u2", "<f4", "<f8"):
            raise StoreCorrupt(f"frame {j}: quantised records need uint8/16 or float frames")
        return _read(view, header.part(rec, band), np.dtype(rec.qdtype), n, dctx)
    if rec.kind == "raw" and header.predictor == "webp":  # never banded
        at, length = header.part(rec, band)
        return webp_decode(view[at : at + length], header.shape)
    if rec.kind == "raw" and header.predictor == "surface":  # never banded
        at, length = header.part(rec, band)
        return _surface.decode(view[at : at + length], header.shape, dctx, row)
    values = _read(view, header.part(rec, band), np.dtype(f"<u{header.dtype.itemsize}"), n, dctx)
    if header.zigzag:
        values = from_zigzag(values)
    if rec.kind == "raw" and header.predictor == "gradient":
        start, stop = header.band_rows(band)
        values = ungradient(values.reshape(stop - start, *header.shape[1:])).reshape(-1)
    return values


def _read(
    view: memoryview,
    part: tuple[int, int],
    dtype: np.dtype,
    n: int,
    dctx: zstd.ZstdDecompressor,
) -> np.ndarray:
    start, length = part
    raw = group_header.record_bytes(view[start : start + length], (n * dtype.itemsize,), dctx)
    return join_bytes(raw, dtype, n)
