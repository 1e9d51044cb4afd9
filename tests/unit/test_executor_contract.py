"""The same pipelines give the same output under every local executor (threads, processes).

Stage functions live at module level so process workers can import them by name.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from hyperframes import FrameSpec, Pipeline, Sink

pytestmark = pytest.mark.usefixtures("no_thread_leak")

EXECUTORS = ["threads", "processes"]


class Rows(Sink):
    """Keeps ids, frames and one meta column."""

    def __init__(self, key: str | None = None) -> None:
        self.key, self.ids, self.values, self.frames = key, [], [], []

    def write(self, frames, index, meta):
        self.ids += index.tolist()
        self.frames.append(frames.copy())
        if self.key:
            self.values += list(meta[self.key])


def frames_of(n: int = 40, shape: tuple[int, ...] = (6, 8, 3)) -> np.ndarray:
    return np.random.default_rng(n).integers(0, 256, (n, *shape), dtype=np.uint8)


def invert_in_place(frames: np.ndarray) -> np.ndarray:
    np.bitwise_not(frames, out=frames)
    return frames


def pid_per_frame(frames: np.ndarray) -> list[int]:
    return [os.getpid()] * len(frames)


def half_size_float(frames: np.ndarray) -> np.ndarray:
    return frames[:, ::2, ::2].astype(np.float32) / 255


def mean_per_frame(frames: np.ndarray) -> list[float]:
    return [float(f.mean()) for f in frames]


def temporal_max(windows: np.ndarray) -> np.ndarray:
    return windows.max(axis=1)


def render(i: int) -> np.ndarray:
    return np.full((6, 8, 3), i % 256, np.uint8)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_map_in_place(executor):
    frames = frames_of()
    out = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(invert_in_place, workers=2)
        .collect(executor=executor)
    )
    np.testing.assert_array_equal(out, 255 - frames)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_map_changing_shape_and_dtype(executor):
    frames = frames_of()
    out = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(invert_in_place)
        .map(half_size_float, workers=2)
        .collect(executor=executor)
    )
    np.testing.assert_array_equal(out, half_size_float(255 - frames))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_per_frame_values_into_meta(executor):
    frames = frames_of()
    sink = Rows("mean")
    Pipeline.from_frames(frames, batch_size=8).map(mean_per_frame, into="mean", workers=2).to(
        sink
    ).run(executor=executor)
    assert sink.ids == list(range(len(frames)))
    assert sink.values == [float(f.mean()) for f in frames]
    np.testing.assert_array_equal(np.concatenate(sink.frames), frames)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_windowed_stage(executor):
    frames = frames_of(37)
    out = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(temporal_max, window=(2, 1), workers=2)
        .collect(executor=executor)
    )
    padded = np.concatenate([frames[:1], frames[:1], frames, frames[-1:]])
    expected = np.stack([padded[i : i + 4].max(axis=0) for i in range(len(frames))])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_from_generator_render(executor):
    out = Pipeline.from_generator(
        render, count=50, spec=FrameSpec((6, 8, 3)), workers=2, batch_size=16
    ).collect(executor=executor)
    np.testing.assert_array_equal(out, np.stack([render(i) for i in range(50)]))


def test_process_stages_run_in_other_processes():
    sink = Rows("pid")
    Pipeline.from_frames(frames_of(16), batch_size=4).map(pid_per_frame, into="pid", workers=2).to(
        sink
    ).run(executor="processes")
    assert os.getpid() not in set(sink.values)
