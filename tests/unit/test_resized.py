"""A source resized as it is read (``io.loop.Resized``, what a store read at another size
goes through): OpenCV's area average of every frame, batches of any length filled across
its staged reads with their metadata, its staging in the footprint, bad sizes refused."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from hyperframes.io.arrays import ArraySource
from hyperframes.io.loop import STAGED, Resized


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((21, 30, 48, 3), np.uint8), ((21, 30, 48), np.uint16), ((21, 30, 48, 4), np.uint8)],
)
def test_every_frame_is_area_averaged_and_batches_fill_across_staged_reads(shape, dtype):
    frames = np.random.default_rng(2).integers(0, 4000, shape).astype(dtype)
    source = Resized(ArraySource(frames), (20, 14))
    assert source.spec.shape == (14, 20, *shape[3:]) and source.spec.dtype == dtype
    got, index = [], []
    out = np.empty((STAGED + 5, *source.spec.shape), dtype)  # (more than one staged read)
    source.open()
    while len(chunk := source.read_into(out)):
        got.append(out[: len(chunk)].copy())
        index.append(chunk.index)
    source.close()
    assert [len(i) for i in index] == [13, 8]  # (21 frames: a full batch, then the rest)
    assert np.array_equal(np.concatenate(index), np.arange(21))
    want = np.stack([cv2.resize(f, (20, 14), interpolation=cv2.INTER_AREA) for f in frames])
    assert np.array_equal(np.concatenate(got), want.reshape(21, *source.spec.shape))


def test_its_staging_is_in_its_footprint_and_bad_sizes_are_refused():
    frames = np.zeros((4, 30, 40, 3), np.uint8)
    inner = ArraySource(frames)
    resized = Resized(inner, (10, 10))
    assert resized.footprint().least == inner.footprint().least + STAGED * 30 * 40 * 3
    for size in ((0, 10), (10.5, 10), (-1, 4)):
        with pytest.raises(ValueError, match="two positive integers"):
            Resized(inner, size)
    with pytest.raises(ValueError, match="5 channels cannot be resized"):
        Resized(ArraySource(np.zeros((2, 8, 8, 5), np.uint8)), (4, 4))
