"""What every Source promises (``io.base.Source``), held for each one the package ships.

Each source is read from real frames (a real clip, PNG files, a real store). The contract:
the spec is known before ``open``; ``read_into`` writes into the slots it is given and says
which frames they were, in order, with per-frame meta of the same length; the frames do
not depend on how many slots a call gets; the end is an empty chunk, and stays so; the
length, where known, is the count read; ``for_run`` gives a reader that reads the same
frames again; ``notes`` and ``figures`` answer after the read; ``close`` may come twice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from hyperframes import Pipeline
from hyperframes.frames import FrameSpec
from hyperframes.io.arrays import ArraySource, IndexSource, IterableSource
from hyperframes.io.base import Source, SourceFigures
from hyperframes.io.images import ImageSequenceSource
from hyperframes.io.inputs import Input
from hyperframes.io.loop import Looped
from hyperframes.io.video import VideoSource
from hyperframes.io.video_files import VideoFiles
from hyperframes.store import StoreSink
from hyperframes.store.source import StoreSource

FRAMES = 21
"""Frames each source gives: odd, so that most batch sizes end on a short batch."""


def clip_frames(clip: Path) -> np.ndarray:
    with VideoSource(clip, stop=FRAMES) as source:
        out = np.empty((FRAMES, *source.spec.shape), np.uint8)
        assert len(source.read_into(out)) == FRAMES
    return out


def write_pngs(frames: np.ndarray, folder: Path) -> Path:
    folder.mkdir()
    for i, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"f{i:04d}.png"), frame[..., ::-1])
    return folder


def write_store(frames: np.ndarray, path: Path) -> Path:
    Pipeline.from_frames(frames, batch_size=4).group().to(StoreSink(path)).run()
    return path


Maker = Callable[[np.ndarray, Path, Path], Source]

MAKERS: dict[str, Maker] = {
    "video": lambda frames, clip, tmp: VideoSource(clip, stop=FRAMES),
    "video, every 2nd": lambda frames, clip, tmp: VideoSource(clip, stop=2 * FRAMES, step=2),
    "array": lambda frames, clip, tmp: ArraySource(frames),
    "iterable": lambda frames, clip, tmp: IterableSource(iter(frames)),
    "index": lambda frames, clip, tmp: IndexSource(FRAMES, FrameSpec(frames.shape[1:])),
    "images": lambda frames, clip, tmp: ImageSequenceSource(write_pngs(frames, tmp / "png")),
    "store": lambda frames, clip, tmp: StoreSource(write_store(frames, tmp / "s.hfs")),
    "looped": lambda frames, clip, tmp: Looped(lambda: ArraySource(frames[:7]), times=3),
    "video files": lambda frames, clip, tmp: VideoFiles(
        [Input(str(clip), 0, 10), Input(str(clip), 10, FRAMES)]
    ),
}
"""Every source the package ships, each made to give :data:`FRAMES` frames."""

REREAD = {"iterable"}
"""Sources read once by design (an iterator is consumed): ``for_run`` gives no second read."""


@pytest.fixture(params=sorted(MAKERS))
def case(request, clip_path, tmp_path) -> tuple[str, Callable[[], Source], np.ndarray]:
    """``(name, make, frames)``: a maker of the source (called once for each read, but
    only once for the files it writes) and the frames it must give."""
    clip = clip_path("bikes.mp4")
    frames = clip_frames(clip)
    made = MAKERS[request.param](frames, clip, tmp_path)
    return request.param, lambda: made, frames


def read_all(source: Source, slots: int) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Every frame, id and meta of ``source``, read ``slots`` frames a call; the end is
    checked to stay the end."""
    out = np.full((slots, *source.spec.shape), 7, source.spec.dtype)
    frames, ids, metas = [], [], []
    with source:
        while True:
            chunk = source.read_into(out)
            if not len(chunk):
                break
            assert 0 < len(chunk) <= slots
            assert all(len(v) == len(chunk) for v in chunk.meta.values()), chunk.meta
            frames.append(out[: len(chunk)].copy())
            ids.append(chunk.index.copy())
            metas.append(chunk.meta)
        assert len(source.read_into(out)) == 0  # the end stays the end
    if not frames:
        return np.empty((0, *source.spec.shape)), np.empty(0, np.int64), metas
    return np.concatenate(frames), np.concatenate(ids), metas


def test_the_spec_is_known_before_open(case):
    name, make, frames = case
    source = make()
    assert isinstance(source.spec, FrameSpec)
    assert source.spec.shape == frames.shape[1:], name
    source.close()


@pytest.mark.parametrize("slots", [1, 4, 16])
def test_the_frames_are_the_same_whatever_the_batch(case, slots):
    name, make, frames = case
    source = make().for_run()
    length = source.length
    got, ids, _ = read_all(source, slots)
    assert len(got) == FRAMES, name
    assert (np.diff(ids) > 0).all(), f"{name}: ids not in order"
    if length is not None:
        assert length == FRAMES, name
    if name == "index":
        assert (ids == np.arange(FRAMES)).all()  # no pixels: the ids are the frames
    elif name == "video, every 2nd":
        assert (ids == np.arange(0, 2 * FRAMES, 2)).all()
    elif name == "looped":
        np.testing.assert_array_equal(got, np.concatenate([frames[:7]] * 3))
    else:
        np.testing.assert_array_equal(got, frames, err_msg=name)


def test_for_run_reads_the_same_frames_again(case):
    name, make, _ = case
    source = make()
    first, first_ids, _ = read_all(source.for_run(), 5)
    if name in REREAD:
        assert len(read_all(source.for_run(), 5)[0]) == 0  # consumed: says nothing more
        return
    again, again_ids, _ = read_all(source.for_run(), 8)
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(again_ids, first_ids)


def test_notes_and_figures_answer_after_the_read_and_close_may_come_twice(case):
    name, make, _ = case
    source = make().for_run()
    assert isinstance(source.figures(), SourceFigures)  # before open, too
    read_all(source, 6)
    assert isinstance(source.notes(), dict), name
    assert isinstance(source.figures(), SourceFigures), name
    assert isinstance(source.info, dict), name
    source.close()  # read_all closed it already


def test_a_slot_it_was_not_given_stays_untouched(case):
    """``read_into`` writes ``out[:len(chunk)]`` and nothing past it (a pool's other frames
    lie there)."""
    name, make, _ = case
    source = make().for_run()
    out = np.full((8, *source.spec.shape), 7, source.spec.dtype)
    with source:
        for _ in range(FRAMES // 8 + 1):
            chunk = source.read_into(out[:5])
            assert (out[5:] == 7).all(), name
            if not len(chunk):
                break
