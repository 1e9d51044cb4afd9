"""A stage that fails on one input's frames: the failing batch is tried frame by frame,
the sink meets the failure in order and asks the source (``Source.input_failed``) whether
the run goes on without that input; every frame before the failing one is written
whichever it answers, none of that input's after, whatever the batch size."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.io.base import Chunk, InputFailure, Sink, Source

FRAMES_PER_INPUT = 40


class Inputs(Source):
    """Three inputs of 40 frames each (a batch never holds two), every pixel its id; lists
    a failed input where ``lists`` says so."""

    def __init__(self, *, lists: bool) -> None:
        self.spec, self.length, self.info = hf.FrameSpec((2, 2, 1), np.int64), 120, {}
        self.lists, self.failures, self.skipped = lists, [], set()
        self._next = 0

    def read_into(self, out):
        while self._next < self.length and self._next // FRAMES_PER_INPUT in self.skipped:
            self._next = (self._next // FRAMES_PER_INPUT + 1) * FRAMES_PER_INPUT
        end = min(self._next + len(out), (self._next // FRAMES_PER_INPUT + 1) * FRAMES_PER_INPUT)
        ids = np.arange(self._next, min(end, self.length))
        out[: len(ids)] = ids[:, None, None, None]
        self._next += len(ids)
        return Chunk(ids, {"input": ids // FRAMES_PER_INPUT,
                           "input_frame": ids % FRAMES_PER_INPUT})  # fmt: skip

    def input_failed(self, failure: InputFailure) -> bool:
        self.failures.append(failure)
        self.skipped.add(failure.input)
        return self.lists


class Kept(Sink):
    def __init__(self) -> None:
        self.ids: list[int] = []

    def write(self, frames, index, meta):
        assert (frames[:, 0, 0, 0] == index).all()
        self.ids += index.tolist()


def failing_at(frame: int, seen: list[int]):
    """Fails on the batch holding ``frame``; the batches after it are slowed down so that
    the other worker finishes them first."""
    lock = threading.Lock()

    def fn(frames):
        ids = frames[:, 0, 0, 0]
        with lock:
            seen.extend(ids.tolist())
        if frame in ids:
            threading.Event().wait(0.2)  # the later batches are done before it fails
            raise ValueError(f"cannot take frame {frame}")
        return frames

    return fn


def test_the_source_lists_the_input_and_the_run_goes_on_without_its_later_frames():
    source, sink, seen = Inputs(lists=True), Kept(), []
    report = (
        hf.Pipeline.from_source(source, batch_size=8)
        .map(failing_at(52, seen), workers=2, name="model")
        .to(sink)
        .run()
    )
    assert sink.ids == list(range(52)) + list(range(80, 120))  # input 1 from frame 52 on
    assert report.frames == 92
    (failure,) = source.failures
    assert (failure.input, failure.frame, failure.stage, failure.kept) == (1, 12, "model", 12)
    assert failure.written == 52 and isinstance(failure.error, ValueError)
    assert any("frame 12 of its input alone" in note for note in failure.error.__notes__)


@pytest.mark.parametrize("batch_size", [1, 4, 16, 32])
def test_what_a_failed_input_keeps_does_not_depend_on_the_batch_size(batch_size):
    source, sink = Inputs(lists=True), Kept()
    line = hf.Pipeline.from_source(source, batch_size=batch_size)
    line.map(failing_at(61, []), workers=2, name="model").to(sink).run()
    assert sink.ids == list(range(61)) + list(range(80, 120))
    assert [(f.frame, f.kept) for f in source.failures] == [(21, 21)]


def test_the_frames_before_a_failure_go_through_the_later_stages_the_earliest_failure_counts():
    source, sink = Inputs(lists=True), Kept()

    def answers(frames):
        return [int(f[0, 0, 0]) * 10 for f in frames]

    (
        hf.Pipeline.from_source(source, batch_size=16)
        .map(failing_at(60, []), name="first")
        .map(failing_at(50, []), name="second")
        .map(answers, into="tenfold")
        .to(sink)
        .run()
    )
    assert sink.ids == list(range(50)) + list(range(80, 120))
    assert [(f.stage, f.frame) for f in source.failures] == [("second", 10)]


def test_a_batch_whose_frames_all_pass_alone_goes_on_whole():
    def fails_on_big_batches(frames):
        if len(frames) > 4:
            raise RuntimeError("too many at once")
        return frames

    source, sink = Inputs(lists=True), Kept()
    hf.Pipeline.from_source(source, batch_size=8).map(fails_on_big_batches).to(sink).run()
    assert sink.ids == list(range(120)) and not source.failures


def test_a_source_that_does_not_list_it_fails_the_run_with_every_batch_before_written():
    for _ in range(3):  # the later batches finish first; what is written never varies
        source, sink, seen = Inputs(lists=False), Kept(), []
        pipeline = hf.Pipeline.from_source(source, batch_size=8).map(
            failing_at(52, seen), workers=2
        )
        with pytest.raises(ValueError, match="cannot take frame 52"):
            pipeline.to(sink).run()
        assert sink.ids == list(range(52))
        assert len(source.failures) == 1


def test_frames_with_no_input_fail_the_run_as_they_always_did():
    def fails(frames):
        raise ValueError("no")

    with pytest.raises(ValueError, match="no") as caught:
        hf.Pipeline.from_frames(np.zeros((16, 2, 2, 3), np.uint8)).map(fails).to(Kept()).run()
    assert any("in stage" in note for note in caught.value.__notes__)
