"""Work on yuv420p frames directly (the layout of :func:`~hyperframes.io.video.i420_spec`).

Decoders produce yuv420p and most encoders take it, so a job that only resizes can skip
both colour conversions, which cost more than decoding itself on 720p H.264.

Example:
    >>> frames = np.zeros((4, 720 * 3 // 2, 1280), np.uint8)
    >>> resize_i420(frames, 640, 360).shape
    (4, 540, 640)
"""

from __future__ import annotations

import cv2
import numpy as np


def planes(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Y, U and V planes of one yuv420p frame, as views."""
    rows, width = frame.shape
    height = rows * 2 // 3
    quarter = height // 4
    y = frame[:height]
    u = frame[height : height + quarter].reshape(height // 2, width // 2)
    v = frame[height + quarter :].reshape(height // 2, width // 2)
    return y, u, v


def resize_i420(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize a batch of yuv420p frames plane by plane (OpenCV INTER_AREA).

    Raises:
        ValueError: an odd target size, which yuv420p cannot hold.
    """
    if width % 2 or height % 2:
        raise ValueError(f"yuv420p needs an even size, got {width}x{height}")
    out = np.empty((len(frames), height * 3 // 2, width), np.uint8)
    for src, dst in zip(frames, out, strict=True):
        for a, b in zip(planes(src), planes(dst), strict=True):
            cv2.resize(a, (b.shape[1], b.shape[0]), dst=b, interpolation=cv2.INTER_AREA)
    return out
