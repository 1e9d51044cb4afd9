"""Reversible pixel transforms the codec applies before entropy coding, and back.

- :func:`gradient` / :func:`ungradient`: the 2-D gradient residual of a uint8 frame
  (value - left - up + up-left, modulo 256) and its inverse, one 2-D prefix sum.
- :func:`rct` / :func:`unrct`: RGB to (G, R - G, B - G) modulo 256, the reversible colour
  transform; linear modulo 256, so deltas can be taken and summed in its space.
- :func:`webp_encode` / :func:`webp_decode`: a frame in RCT space as a lossless WebP file
  (through OpenCV) and back; the file's own header is checked before OpenCV reads it.
- :func:`planes`: a frame's bytes for zstd (after the predictor), byte planes apart
  (:func:`split_bytes`; :func:`join_bytes` joins them again); residuals of wider integers
  zigzagged first (:func:`to_zigzag` / :func:`from_zigzag`).
"""

from __future__ import annotations

import cv2
import numpy as np

from ...errors import FrameError, StoreCorrupt

WEBP_MAX_SIDE = 16383


def gradient(x: np.ndarray) -> np.ndarray:
    """The 2-D gradient residual of a frame or plane (wrapping modulo ``2**bits`` of its
    unsigned dtype: 256 for uint8)."""
    r = x.copy()
    r[:, 1:] -= x[:, :-1]
    r[1:] -= x[:-1]
    r[1:, 1:] += x[:-1, :-1]
    return r


def ungradient(r: np.ndarray) -> np.ndarray:
    """The inverse of :func:`gradient`: a prefix sum down and across, modulo ``2**bits`` of
    its unsigned dtype.

    OpenCV's integral image does it in one pass for uint8 (2.5 ms for a 720p RGB frame)
    when the sums fit its int32; numpy (8.5 ms) takes the rest, 16-bit planes included.
    """
    h, w = r.shape[:2]
    small = r.ndim == 2 or (r.ndim == 3 and r.shape[2] <= 4)
    if r.dtype == np.uint8 and small and 255 * h * w < 2**31:
        total = cv2.integral(r, sdepth=cv2.CV_32S)
        return total[1:, 1:].astype(np.uint8).reshape(r.shape)  # wraps modulo 256
    return np.cumsum(np.cumsum(r, axis=1, dtype=r.dtype), axis=0, dtype=r.dtype)


def rct(frames: np.ndarray) -> np.ndarray:
    """RGB to (G, R - G, B - G) modulo 256, over the last axis: the reversible colour
    transform. It is linear modulo 256, so deltas can be taken and summed in its space."""
    out = np.empty_like(frames)
    g = frames[..., 1]
    out[..., 0] = g
    np.subtract(frames[..., 0], g, out=out[..., 1])
    np.subtract(frames[..., 2], g, out=out[..., 2])
    return out


def unrct(coded: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The inverse of :func:`rct`, into ``out`` (of ``coded``'s shape, each frame's rows
    contiguous) where given.

    OpenCV splits the channels into planes and merges them back: about 3 x numpy's adds
    over the strided channels (1.0 against 3.4 ms for 16 bands of 180 x 1280 pixels).
    """
    out = np.empty_like(coded) if out is None else out
    if coded.ndim not in (3, 4):  # (frames of other shapes: numpy, over the last axis)
        g = coded[..., 0]
        out[..., 1] = g
        np.add(coded[..., 1], g, out=out[..., 0])
        np.add(coded[..., 2], g, out=out[..., 2])
        return out
    for src, dst in zip(coded, out, strict=True) if coded.ndim == 4 else [(coded, out)]:
        g, r, b = cv2.split(np.ascontiguousarray(src))  # (a frame at a time: in the cache)
        np.add(r, g, out=r)
        np.add(b, g, out=b)
        if dst.flags.c_contiguous:  # (cv2 writes into it)
            cv2.merge((r, g, b), dst=dst)
        else:
            dst[...] = cv2.merge((r, g, b))
    return out


def webp_encode(coded: np.ndarray) -> bytes:
    """A uint8 (H, W, 3) frame in RCT space as a lossless WebP file."""
    bgr = np.ascontiguousarray(unrct(coded)[..., ::-1])
    ok, buffer = cv2.imencode(".webp", bgr, [cv2.IMWRITE_WEBP_QUALITY, 101])  # 101: lossless
    if not ok:  # pragma: no cover - OpenCV without WebP support
        raise FrameError("OpenCV could not encode WebP; pack with intra='gradient'")
    return bytes(buffer)


def webp_size(blob: memoryview) -> tuple[int, int] | None:
    """(height, width) from a lossless WebP's own header (RIFF, WEBP, VP8L), or ``None``."""
    head = bytes(blob[:25])
    if len(head) < 25 or head[:4] != b"RIFF" or head[8:16] != b"WEBPVP8L" or head[20] != 0x2F:
        return None
    bits = int.from_bytes(head[21:25], "little")
    return ((bits >> 14) & 0x3FFF) + 1, (bits & 0x3FFF) + 1


def webp_decode(blob: memoryview, shape: tuple[int, ...]) -> np.ndarray:
    """A raw WebP record back in the group's coded (RCT) space, flat. The record's own
    header must be a lossless WebP of the group's size before OpenCV sees it (any other
    format, or a size that would make OpenCV allocate more, is refused)."""
    if webp_size(blob) != shape[:2]:
        raise StoreCorrupt("a WebP record is not a lossless WebP of the group's frame size")
    try:
        bgr = cv2.imdecode(np.frombuffer(blob, np.uint8), cv2.IMREAD_UNCHANGED)
    except cv2.error as exc:
        raise StoreCorrupt(f"a WebP record fails to decode: {exc}") from None
    if bgr is None or bgr.shape != shape:
        raise StoreCorrupt("a WebP record does not decode to a frame of the group's shape")
    return rct(bgr[..., ::-1]).reshape(-1)


def planes(a: np.ndarray, predictor: str = "none", *, zigzag: bool = False) -> bytes:
    """The values' bytes (after the predictor, zigzagged where asked), split into byte
    planes when wider than one byte."""
    if predictor == "gradient":
        a = gradient(a)
    return split_bytes(to_zigzag(a) if zigzag else a)


def to_zigzag(r: np.ndarray) -> np.ndarray:
    """Residuals (unsigned, wrapping) as zigzag codes: 0, -1, 1, -2... become 0, 1, 2, 3...,
    so a small residual of either sign has high bytes of 0 (a wrapped -1 has 0xFF in every
    byte): byte planes of 16-bit residuals then pack 1.2-2x smaller."""
    bits = 8 * r.dtype.itemsize
    signed = r.view(f"<i{r.dtype.itemsize}")
    return ((signed << 1) ^ (signed >> (bits - 1))).view(r.dtype)


def from_zigzag(z: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_zigzag`."""
    return (z >> 1) ^ np.negative(z & 1)


def split_bytes(a: np.ndarray) -> bytes:
    """``a``'s values as bytes, byte plane after byte plane (all the lowest bytes, then the
    next...) when wider than one byte: what zstd packs best of multi-byte samples."""
    k = a.dtype.itemsize
    flat = a.reshape(-1)
    return flat.tobytes() if k == 1 else flat.view(np.uint8).reshape(-1, k).T.tobytes()


def join_bytes(raw: bytes, dtype: np.dtype, n: int) -> np.ndarray:
    """The ``n`` values of ``dtype`` that :func:`split_bytes` wrote as ``raw``, joined by
    shifts and ors, which numpy vectorises: a transpose of the planes took 28x as long
    for 512x512 uint16 samples (1.4 ms against 0.05), 2.5x for 4-byte ones."""
    k = dtype.itemsize
    if k == 1:
        return np.frombuffer(raw, dtype)
    planes = np.frombuffer(raw, np.uint8).reshape(k, n)
    out = planes[k - 1].astype(f"<u{k}")
    for b in range(k - 2, -1, -1):
        out <<= 8
        out |= planes[b]
    return out.view(dtype)


def as_uint(a: np.ndarray) -> np.ndarray:
    return a.view(f"<u{a.dtype.itemsize}")
