"""The surface predictor: a 16-bit frame less a smooth surface fitted to it.

Simulation output and sensor frames are a smooth field plus noise. A neighbour predictor
(the gradient, a delta to the frame before) adds the neighbours' noise to the residual:
the gradient residual holds four pixels' noise, a delta two. Here each channel is fitted
by a cubic B-spline surface with knots every :data:`KNOT_SPACING` pixels (least squares,
on the encoder's side alone), and the record holds the knots and the frame less the
surface: on the benchmark's simulation the residual's entropy is within 0.2 % of the noise's
own, and the record 4.14 bits a pixel against 5.98 for the plain values and deltas.

The surface is evaluated in integers (:func:`surface`): integer weights summing to
``2**12`` a side, their products summed exactly in float64 (every partial sum a whole
number of ``2**-25`` below ``2**52``) and rounded by a power of two, so every machine gets the same
prediction bit for bit. Residuals wrap modulo ``2**16`` like the codec's deltas, so any
knots decode losslessly; only their size depends on the fit.

A record's bytes, zstd-compressed as one frame: the residuals zigzagged, a byte each
where every one is within -128..127 (else as two byte planes, low then high: the record's
content size says which), then the knots (int32, little-endian, channel by channel,
``knots_shape`` each). Knots first cost 2.5 % more: zstd's first block then mixes them
with the residuals. Residuals of a byte spare the decoder a plane of zeros (a 512x512
frame decodes in 0.27 ms on one thread).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import zstandard as zstd

from ...errors import StoreCorrupt
from ._pixels import as_uint, from_zigzag, join_bytes, split_bytes, to_zigzag
from .group_header import record_bytes

KNOT_SPACING = 32
"""Pixels between knots. On the simulation's 512x512 frames, 16 left the residual no
smaller and paid 2.6x the knots (0.055 bits a pixel against 0.021); 64 left 8 levels of
the waves' curvature in it (the root mean square, on its frames without noise)."""
WEIGHT_ONE = 1 << 12
"""The integer weights of a side sum to this; a pixel's weights to its square."""
KNOT_LIMIT = 1 << 26
"""Knots are clipped to +-this, so every sum of the surface stays exact in float64."""
RIDGE = 1e-6
"""Tikhonov weight of the fit: knots at the border that touch few pixels stay tame."""
MIN_MATCH = 6
"""zstd's shortest match in surface records: with its default of 5 at levels 3-15 it found
matches in the noise that cost more than they saved (4.26 against 4.11 bits a pixel)."""


def compressor(level: int) -> zstd.ZstdCompressor:
    """zstd at ``level`` for surface records (:data:`MIN_MATCH`), with a checksum."""
    params = zstd.ZstdCompressionParameters.from_level(
        level, min_match=MIN_MATCH, write_checksum=1, write_content_size=1
    )
    return zstd.ZstdCompressor(compression_params=params)


def knots_shape(height: int, width: int) -> tuple[int, int]:
    """Knots a side, down and across (worked out, not built: a forged header's size costs
    nothing before the record's own size is checked against it)."""
    return _knots(height), _knots(width)


def _knots(n: int) -> int:
    """Knots of a side of ``n`` pixels: the last pixel's first knot and its four."""
    return math.floor((n - 1 - (KNOT_SPACING - 1) / 2) / KNOT_SPACING + 2) - 1 + SUPPORT


def encode(frame: np.ndarray, cctx: zstd.ZstdCompressor) -> bytes:
    """``frame`` (16-bit, (H, W) or (H, W, C)) as a surface record's bytes."""
    knots = fit(frame)
    codes = to_zigzag(as_uint(frame) - surface(knots, frame.shape))  # (modulo 2**16)
    residuals = codes.astype(np.uint8).tobytes() if codes.max() < 256 else split_bytes(codes)
    return cctx.compress(residuals + knots.astype("<i4").tobytes())


def decode(
    raw: memoryview,
    shape: tuple[int, ...],
    dctx: zstd.ZstdDecompressor,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """A surface record's frame, flat, in uint16 (the frames' unsigned view): into
    ``out`` (a flat uint16 array of its size) where given."""
    h, w = shape[:2]
    channels = shape[2] if len(shape) == 3 else 1
    kh, kw = knots_shape(h, w)
    n, k = h * w * channels, 4 * channels * kh * kw
    data = record_bytes(raw, (n + k, 2 * n + k), dctx, "a surface record")
    size = len(data)
    wide = size == 2 * n + k
    knots = np.frombuffer(data, "<i4", offset=size - k).reshape(channels, kh, kw)
    if np.abs(knots.astype(np.int64)).max() > KNOT_LIMIT:
        raise StoreCorrupt("a surface record's knots are out of range")
    flat = np.empty(n, np.uint16) if out is None else out
    surface(knots, shape, flat.reshape(h, w, channels))
    if wide:
        flat += from_zigzag(join_bytes(data[: 2 * n], np.dtype("<u2"), n))
        return flat
    codes = np.frombuffer(data, np.uint8, n)
    small = np.right_shift(codes, 1).view(np.int8)
    small ^= np.negative(codes & 1).view(np.int8)
    np.add(flat.view(np.int16), small, out=flat.view(np.int16))  # (modulo 2**16)
    return flat


def fit(frame: np.ndarray) -> np.ndarray:
    """The knots (int64, (C, kh, kw)) of each channel's least-squares surface: the
    normal equations' right side by the weights' runs, as :func:`surface` evaluates (one
    dense product of a frame took two BLAS threads, and beside the other workers of a
    ``pack``, 12x the time), then the small Gram matrices' inverses."""
    h, w = frame.shape[:2]
    planes = frame.reshape(h, w, -1)
    down, across = _inverse_gram(h), _inverse_gram(w)
    knots = np.stack([
        down @ _weigh(_weigh(planes[..., c].astype(np.float64), h).T, w).T @ across
        for c in range(planes.shape[2])
    ])  # fmt: skip
    return np.clip(np.rint(knots), -KNOT_LIMIT, KNOT_LIMIT).astype(np.int64)


def _weigh(values: np.ndarray, n: int) -> np.ndarray:
    """``A.T @ values`` for a side's weights ``A`` ((n, knots), summing to one a pixel)
    and ``values`` (n, m), a run of rows over the same knots at a time."""
    out = np.zeros((_knots(n), values.shape[1]))
    for start, count, first, weights in _runs(n):
        block = values[start : start + count * len(weights)].reshape(count, len(weights), -1)
        part = np.matmul(weights.T, block)  # (count, SUPPORT, m)
        for j in range(SUPPORT):
            out[first + j : first + j + count] += part[:, j]
    return out / WEIGHT_ONE


def surface(knots: np.ndarray, shape: tuple[int, ...], out: np.ndarray | None = None) -> np.ndarray:
    """The surface of ``knots`` at every pixel of ``shape``, rounded, in uint16 (wrapped),
    the same on every machine: into ``out`` ((H, W, C) uint16) where given.

    Exact: the weights are integers and the knots within :data:`KNOT_LIMIT`; the columns'
    weights carry the division by ``2**24`` (a power of two) and the knots the half that
    rounds and an offset of ``KNOT_LIMIT`` (the weights sum to one), so every product and
    partial sum is a whole number of ``2**-25`` below ``2**52``, exact in float64 in any
    order of summation, and every total is positive, so that casting it to an integer is
    its floor; the offset is a multiple of ``2**16``.

    Evaluated a block of rows at a time, each row over the four knot rows it touches (the
    whole runs between a side's ends in one product, as their weights are the same): 5x
    fewer products than one dense product, and each small enough that BLAS keeps it on the
    calling thread (the dense one took two threads and, on two busy cores, 10x the time).
    """
    h, w = shape[:2]
    runs, cols = _runs(h), _across(w)
    if out is None:
        out = np.empty((h, w, knots.shape[0]), np.uint16)
    total = np.empty((h, w))
    for c, grid in enumerate(knots):
        across = (grid + (KNOT_LIMIT + 0.5)) @ cols  # (every total positive: see above)
        for start, count, first, weights in runs:  # (count runs of the same weights)
            windows = np.lib.stride_tricks.as_strided(
                across[first:], (count, SUPPORT, w), (across.strides[0], *across.strides)
            )  # (run r's knots: first + r ... first + r + 3)
            rows = total[start : start + count * len(weights)].reshape(count, len(weights), w)
            np.matmul(weights, windows, out=rows)
        out[..., c] = total.astype(np.int32)  # (a floor, and modulo 2**16 the offset is 0)
    return out.reshape(shape)


SUPPORT = 4
"""Knots that weigh on a pixel, a side: a cubic B-spline's."""


def _spline(n: int) -> list[tuple[int, np.ndarray]]:
    """Per pixel of a side of ``n``: its first knot and its :data:`SUPPORT` integer
    weights (cubic B-spline, summing to :data:`WEIGHT_ONE`); knot ``k`` lies at pixel
    ``(k - 2) * spacing + (spacing - 1) / 2``."""
    out = []
    for y in range(n):
        t = (y - (KNOT_SPACING - 1) / 2) / KNOT_SPACING + 2  # (> 1.5 at y = 0)
        f = t - np.floor(t)
        first = int(np.floor(t)) - 1
        exact = np.array([(1 - f) ** 3, 3 * f**3 - 6 * f * f + 4,
                          -3 * f**3 + 3 * f * f + 3 * f + 1, f**3]) / 6  # fmt: skip
        weights = np.rint(exact * WEIGHT_ONE)
        weights[1] += WEIGHT_ONE - weights.sum()
        out.append((first, weights))
    return out


@functools.lru_cache(maxsize=8)
def _weights(n: int) -> np.ndarray:
    """A side's weights as one (n, knots) matrix (float64 integers)."""
    spline = _spline(n)
    out = np.zeros((n, spline[-1][0] + SUPPORT))
    for y, (first, weights) in enumerate(spline):
        out[y, first : first + SUPPORT] = weights
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _runs(n: int) -> tuple[tuple[int, int, int, np.ndarray], ...]:
    """A side's pixels in runs over the same knots, the runs of the same weights one
    after another merged (every whole one between a side's ends): (first row, runs,
    first knot, a run's (rows, SUPPORT) weights)."""
    spline = _spline(n)
    runs: list[tuple[int, int, int, np.ndarray]] = []
    start = 0
    for y in range(1, n + 1):
        if y == n or spline[y][0] != spline[start][0]:
            weights = np.stack([w for _, w in spline[start:y]])
            last = runs[-1] if runs else None
            if (
                last is not None
                and np.array_equal(last[3], weights)
                and (last[2] + last[1] == spline[start][0])
            ):
                runs[-1] = (last[0], last[1] + 1, last[2], last[3])
            else:
                weights.setflags(write=False)
                runs.append((start, 1, spline[start][0], weights))
            start = y
    return tuple(runs)


@functools.lru_cache(maxsize=8)
def _across(n: int) -> np.ndarray:
    """A side's weights, transposed and divided by ``WEIGHT_ONE ** 2`` (exact)."""
    out = _weights(n).T / (WEIGHT_ONE * WEIGHT_ONE)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _inverse_gram(n: int) -> np.ndarray:
    """The inverse of a side's ``A.T @ A`` (ridge :data:`RIDGE`), ``A`` its weights
    summing to one a pixel: the least-squares knots of a side are it times ``A.T``."""
    a = _weights(n) / WEIGHT_ONE
    inverse = np.linalg.inv(a.T @ a + RIDGE * np.eye(a.shape[1]))
    inverse.setflags(write=False)
    return inverse
