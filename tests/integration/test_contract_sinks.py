"""What every Sink promises (``io.base.Sink``), held for each one the package ships that
takes frames.

Each sink is driven as a run drives it (``footprint``, ``grant``, ``open``, ``write`` per
batch, ``close``) with real frames of a real clip. The contract: a batch's frames are a
view valid only during ``write`` (the pool reuses the slot at once, so what is kept must be
a copy: the test scribbles over each batch after the call); ``close(ok=True)`` commits what
a reader gives back frame for frame (lossless sinks); ``close(ok=False)`` leaves nothing
where the output was to be (a store keeps its finished hyperframes, marked unfinished,
for a rerun to resume); ``notes`` is a dict after either; ``footprint`` is a
:class:`Footprint` and ``grant`` takes what it wants.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hyperframes.frames import FrameSpec
from hyperframes.io.base import Footprint, Sink
from hyperframes.io.callbacks import CallbackSink, CollectSink, NullSink
from hyperframes.io.image_sink import ImageSequenceSink
from hyperframes.io.images import ImageSequenceSource
from hyperframes.io.video import VideoSource
from hyperframes.io.video_sink import VideoSink
from hyperframes.store import FrameStore, StoreSink

FRAMES = 21
BATCH = 4


def clip_frames(clip: Path) -> np.ndarray:
    with VideoSource(clip, stop=FRAMES) as source:
        out = np.empty((FRAMES, *source.spec.shape), np.uint8)
        assert len(source.read_into(out)) == FRAMES
    return out


def read_video(path: Path) -> np.ndarray:
    return np.stack(list(VideoSource(path)))


def read_images(folder: Path) -> np.ndarray:
    return np.stack(list(ImageSequenceSource(folder)))


def read_store(path: Path) -> np.ndarray:
    with FrameStore(path) as store:
        return np.stack([store[i] for i in range(len(store))])


class Case:
    """A sink, where it writes (``None``: nothing on disk) and how to read back what it
    committed (given what ``close`` returned)."""

    def __init__(self, sink: Sink, out: Path | None, read: Callable[[Any], np.ndarray] | None):
        self.sink, self.out, self.read = sink, out, read


def _collected(seen: list[np.ndarray]) -> Case:
    sink = CallbackSink(lambda index, frames: seen.append(frames.copy()), batched=True)
    return Case(sink, None, lambda result: np.concatenate(seen))


MAKERS: dict[str, Callable[[Path], Case]] = {
    "video (ffv1)": lambda tmp: Case(
        VideoSink(tmp / "o.mkv", codec="ffv1"),
        tmp / "o.mkv",
        lambda result: read_video(tmp / "o.mkv"),
    ),
    "images (png)": lambda tmp: Case(
        ImageSequenceSink(tmp / "png"), tmp / "png", lambda result: read_images(tmp / "png")
    ),
    "store": lambda tmp: Case(
        StoreSink(tmp / "s.hfs"), tmp / "s.hfs", lambda result: read_store(tmp / "s.hfs")
    ),
    "callback": lambda tmp: _collected([]),
    "collect": lambda tmp: Case(CollectSink(), None, lambda result: result),
    "null": lambda tmp: Case(NullSink(), None, None),
}
"""Every sink the package ships that takes frames (a results file takes answers: its own
suite, ``tests/reliability/test_results_trust.py``)."""


RESUMABLE = {"store"}
"""Sinks that keep what a failed run finished, marked unfinished, for a rerun to resume."""


@pytest.fixture(params=sorted(MAKERS))
def case(request, clip_path, tmp_path) -> tuple[str, Case, np.ndarray]:
    return request.param, MAKERS[request.param](tmp_path), clip_frames(clip_path("bikes.mp4"))


def drive(sink: Sink, frames: np.ndarray, *, upto: int | None = None) -> None:
    """Open ``sink`` and write ``frames`` a batch at a time, as a run does, from one reused
    slot that is scribbled over after each call; stop after ``upto`` frames."""
    spec = FrameSpec(frames.shape[1:], frames.dtype)
    tag = {  # one hyperframe of every frame, as .group() tags them
        "hyperframe": np.zeros(FRAMES, np.int64),
        "hf_pos": np.arange(FRAMES),
        "hf_len": np.full(FRAMES, FRAMES),
    }
    footprint = sink.footprint(spec, {})
    assert isinstance(footprint, Footprint)
    sink.grant(max(footprint.wants, footprint.least))
    sink.open(spec, {"fps": 25.0})
    slot = np.empty((BATCH, *spec.shape), spec.dtype)
    for a in range(0, FRAMES if upto is None else upto, BATCH):
        n = min(BATCH, FRAMES - a)
        slot[:n] = frames[a : a + n]
        pts = np.arange(a, a + n) / 25.0
        meta: dict[str, Any] = {"pts": pts, **{k: v[a : a + n] for k, v in tag.items()}}
        sink.write(slot[:n], np.arange(a, a + n), meta)
        slot[:] = 255 - slot  # the pool hands the slot to the next batch
    return None


def test_what_it_commits_reads_back_frame_for_frame(case):
    name, made, frames = case
    drive(made.sink, frames)
    result = made.sink.close(ok=True)
    assert isinstance(made.sink.notes(), dict), name
    if made.read is None:
        return  # a sink that keeps nothing
    np.testing.assert_array_equal(made.read(result), frames, err_msg=name)


def test_a_failed_run_leaves_nothing_behind(case):
    name, made, frames = case
    drive(made.sink, frames, upto=2 * BATCH)
    made.sink.close(ok=False)
    assert isinstance(made.sink.notes(), dict), name
    if name in RESUMABLE:
        with FrameStore(made.out) as store:  # kept for a rerun to resume, marked so
            assert not store.complete and len(store) == 0  # the open hyperframe is not kept
    elif made.out is not None:
        assert not made.out.exists(), f"{name}: {made.out} left after a failed run"
        leftovers = [p.name for p in made.out.parent.iterdir()]
        assert leftovers == [], f"{name}: {leftovers} left beside the output"


def test_an_empty_run_closes_cleanly(case):
    """No frame at all (an empty range): ``open`` then ``close`` commits or refuses in one
    clear error, and leaves no half-written output either way."""
    name, made, frames = case
    spec = FrameSpec(frames.shape[1:], frames.dtype)
    made.sink.grant(made.sink.footprint(spec, {}).wants)
    made.sink.open(spec, {"fps": 25.0})
    try:
        made.sink.close(ok=True)
    except ValueError as exc:  # a format that cannot hold no frames says so
        assert len(str(exc).splitlines()) == 1, exc
        assert made.out is None or not made.out.exists(), name
