"""Reading a store in order, a hyperframe's frames at a time: any range and any batch
size give exactly the stored frames (FrameStore.runs/frames and StoreSource; that each
record is read once is checked by test_observability_figures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store.source import StoreSource


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A store of 90 noisy 16-bit frames in several hyperframes (scenes every 30)."""
    rng = np.random.default_rng(4)
    frames = np.repeat(rng.integers(0, 4096, (3, 24, 32), np.uint16), 30, axis=0)
    frames = frames + rng.integers(0, 3, frames.shape, np.uint16)
    path = tmp_path_factory.mktemp("in-order") / "s.hfs"
    hf.Pipeline.from_frames(frames, batch_size=8).group().to(StoreSink(path)).run()
    return path, frames


@pytest.mark.parametrize(("start", "stop"), [(0, 90), (7, 61), (29, 31), (40, 40), (89, 90)])
def test_runs_and_frames_give_the_range(stored, start: int, stop: int) -> None:
    path, frames = stored
    with FrameStore(path) as store:
        assert len(store.groups) > 1
        runs = list(store.runs(start, stop))
        assert all(not run.flags.writeable for run in runs)
        got = np.concatenate(runs) if runs else frames[:0]
        np.testing.assert_array_equal(got, frames[start:stop])
        np.testing.assert_array_equal(np.array(list(store.frames(start, stop))).reshape(
            -1, 24, 32), frames[start:stop])  # fmt: skip
        with pytest.raises(IndexError, match=r"range 5..91 is not within 0..90"):
            store.runs(5, 91)  # refused when asked, not when first read


@pytest.mark.parametrize("batch", [1, 8, 16, 64])
def test_a_store_source_reads_every_frame_once_whatever_its_batches(stored, batch: int) -> None:
    path, frames = stored
    source = StoreSource(path, start=3, stop=88)
    got = hf.Pipeline.from_source(source, batch_size=batch).collect()
    np.testing.assert_array_equal(got, frames[3:88])
