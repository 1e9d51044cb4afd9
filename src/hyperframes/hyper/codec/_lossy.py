"""The lossy tiers: each frame's difference to the base, quantised as coarsely as its PSNR
target allows (``"psnr"``), or the base alone for every frame (``"keyframe"``)."""

from __future__ import annotations

import math

import numpy as np
import zstandard as zstd

from ..distance import peak_of
from ..quality import mse
from . import group_header
from ._pixels import as_uint, planes


def encode_lossy(
    arr: np.ndarray,
    b: int,
    tier: str,
    target: float,
    cctx: zstd.ZstdCompressor,
    *,
    predictor: str,
) -> tuple[list[group_header.Record], list[bytes], list[float]]:
    base = arr[b]
    base_blob = cctx.compress(planes(as_uint(base), predictor))
    records = [group_header.Record("copy", b, 0, 0)] * arr.shape[0]
    records[b] = group_header.Record("raw", -1, 0, len(base_blob))
    parts, scores, offset = [base_blob], [math.inf] * arr.shape[0], len(base_blob)
    for i in range(arr.shape[0]):
        if i == b:
            continue
        if tier == "keyframe":
            scores[i] = _psnr(base, arr[i])
            continue
        step, q = _quantise(arr[i], base, target)
        if q is None and step > 0:  # nothing to store: the base meets the target
            scores[i] = _psnr(base, arr[i])
            continue
        if q is None:  # pragma: no cover - no step met the target: store it exactly
            blob = cctx.compress(planes(as_uint(arr[i]) - as_uint(base)))
            records[i] = group_header.Record("delta", b, offset, len(blob))
            parts.append(blob)
            offset += len(blob)
            continue
        qtype = _smallest_int(q)
        blob = cctx.compress(planes(q.astype(qtype)))
        records[i] = group_header.Record("quant", b, offset, len(blob), step, np.dtype(qtype).str)
        scores[i] = _psnr(dequantise(base, q, step), arr[i])
        parts.append(blob)
        offset += len(blob)
    return records, parts, scores


def _psnr(decoded: np.ndarray, original: np.ndarray) -> float:
    err = mse(decoded, original)
    return math.inf if err == 0 else -10.0 * math.log10(err)


def _quantise(
    frame: np.ndarray, base: np.ndarray, target: float
) -> tuple[float, np.ndarray | None]:
    """The coarsest step whose decoded frame meets ``target`` dB, and the quantised delta."""
    peak = peak_of(frame.dtype)
    if _psnr(base, frame) >= target:
        return 1.0, None
    mse_px = peak**2 * 10 ** (-target / 10)
    step = math.sqrt(12 * mse_px)  # a uniform quantiser's error is step**2 / 12
    if frame.dtype.kind == "u":
        step = float(max(1, math.floor(step)))
    delta = frame.astype(np.float64) - base.astype(np.float64)
    for _ in range(64):
        q = np.rint(delta / step)
        if step == 1.0 and frame.dtype.kind == "u":
            return step, q  # exact
        if _psnr(dequantise(base, q, step), frame) >= target:
            return step, q
        step = float(max(1, math.floor(step * 0.7))) if frame.dtype.kind == "u" else step / 2
    return 0.0, None  # pragma: no cover - caller stores the frame losslessly


def dequantise(base: np.ndarray, q: np.ndarray, step: float) -> np.ndarray:
    value = base.astype(np.float64) + q * step
    if base.dtype.kind == "u":
        value = np.clip(np.rint(value), 0, np.iinfo(base.dtype).max)
    return value.astype(base.dtype)


def _smallest_int(q: np.ndarray) -> type[np.signedinteger]:
    lo, hi = (float(q.min()), float(q.max())) if q.size else (0.0, 0.0)
    for kind in (np.int8, np.int16, np.int32):
        info = np.iinfo(kind)
        if info.min <= lo and hi <= info.max:
            return kind
    return np.int64


# -- decoding ---------------------------------------------------------------------------
