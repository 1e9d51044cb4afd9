"""Quality measures between a frame and its reconstruction: MSE and PSNR.

Example:
    >>> a = np.zeros((2, 2), np.uint8)
    >>> b = np.full((2, 2), 1, np.uint8)
    >>> round(psnr(a, b), 2)
    48.13
"""

from __future__ import annotations

import math

import numpy as np

from .distance import check_finite, frame_mse, peak_of


def mse(a: np.ndarray, b: np.ndarray) -> float:
    """Mean squared error with pixels normalised to 0..1 (the grouping distance).

    uint8 values are divided by 255, uint16 by 65535; floats are taken as 0..1.
    Integer inputs are computed exactly, so the result is the same on every run.

    Raises:
        FrameError: shapes or dtypes differ, an unsupported dtype, or NaN/inf in a float frame.
    """
    a, b = np.asarray(a), np.asarray(b)
    check_finite(a, name="the first frame")
    check_finite(b, name="the second frame")
    return frame_mse(a, b)


def psnr(a: np.ndarray, b: np.ndarray, *, peak: float | None = None) -> float:
    """Peak signal-to-noise ratio in dB; ``inf`` for identical frames.

    Args:
        a: a frame.
        b: a frame of the same shape and dtype.
        peak: the largest pixel value, in pixel units; defaults to the dtype's
            (255 for uint8, 65535 for uint16, 1.0 for floats).

    Raises:
        ValueError: ``peak`` is not a positive finite number.
        FrameError: see :func:`mse`.
    """
    if peak is not None and not (
        isinstance(peak, int | float) and not isinstance(peak, bool) and 0 < peak < math.inf
    ):
        raise ValueError(f"peak must be a positive finite number, got {peak!r}")
    err = mse(a, b)
    if err == 0:
        return math.inf
    scale = peak_of(np.asarray(a).dtype)
    ratio = 1.0 if peak is None else (peak / scale) ** 2
    return 10.0 * math.log10(ratio / err)
