"""Quality measures: normalised MSE and PSNR."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hyperframes.errors import FrameError
from hyperframes.hyper import mse, psnr


def test_mse_is_normalised_per_dtype() -> None:
    assert mse(np.zeros(4, np.uint8), np.full(4, 255, np.uint8)) == 1.0
    assert mse(np.zeros(4, np.uint16), np.full(4, 65535, np.uint16)) == 1.0
    assert mse(np.zeros(4, np.float32), np.full(4, 0.5, np.float32)) == 0.25


def test_psnr_known_values() -> None:
    a = np.zeros((8, 8), np.uint8)
    assert psnr(a, a) == math.inf
    assert psnr(a, a + 1) == pytest.approx(20 * math.log10(255))
    assert psnr(a, a + 1, peak=1.0) == pytest.approx(0.0)
    f = np.zeros(4, np.float64)
    assert psnr(f, f + 0.1) == pytest.approx(20.0)


def test_mse_is_exact_and_repeatable() -> None:
    rng = np.random.default_rng(2)
    a, b = (rng.integers(0, 256, (500, 600, 3), dtype=np.uint8) for _ in range(2))
    exact = int(((a.astype(np.int64) - b) ** 2).sum()) / (255**2 * a.size)
    assert mse(a, b) == exact == mse(a, b)


def test_bad_inputs() -> None:
    a = np.zeros(4, np.uint8)
    with pytest.raises(FrameError):
        mse(a, np.zeros(5, np.uint8))
    with pytest.raises(FrameError):
        mse(a, a.astype(np.uint16))
    with pytest.raises(FrameError):
        mse(np.zeros(4, np.int32), np.zeros(4, np.int32))
    with pytest.raises(FrameError, match="NaN"):
        mse(np.array([np.nan]), np.array([0.0]))
    with pytest.raises(ValueError, match="peak"):
        psnr(a, a, peak=0)
