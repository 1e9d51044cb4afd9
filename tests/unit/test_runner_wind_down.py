"""The runner winds down whatever fails: monitors stop, slots and sinks are released,
retries stop waiting, and an empty run tells the sink the shape its stages declare."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.engine.stage import Decided, Stage, Strategy
from hyperframes.io.base import Chunk, Sink, Source
from hyperframes.modes import Retry


class Watch:
    def __init__(self):
        self.started = self.stopped = 0

    def start(self, snapshot):
        self.started += 1

    def stop(self, report):
        self.stopped += 1


class BrokenOpen(Source):
    def __init__(self):
        self.spec, self.length, self.info = hf.FrameSpec((2, 2, 3)), 4, {}

    def open(self):
        raise OSError("the camera is unplugged")

    def read_into(self, out):
        return Chunk(np.arange(0))


def test_a_monitor_is_stopped_when_the_source_cannot_open():
    watch = Watch()
    with pytest.raises(OSError, match="unplugged"):
        hf.Pipeline.from_source(BrokenOpen()).run(monitor=watch)
    assert (watch.started, watch.stopped) == (1, 1)


class Recording(Sink):
    def __init__(self):
        self.spec = None
        self.closed: list[bool] = []

    def open(self, spec, info):
        self.spec = spec

    def write(self, frames, index, meta):
        pass

    def close(self, *, ok):
        self.closed.append(ok)


def test_a_failing_finish_still_releases_the_sink():
    class BadStrategy(Strategy):
        def run(self, batch, compute):
            return [(batch, compute(batch))]

        def finish(self, compute):
            return []

        def summary(self):
            return {}

        def close(self):
            raise RuntimeError("strategy could not stop")

    sink = Recording()
    stage = Stage("odd", lambda f: f, kind=Decided(BadStrategy))
    source = hf.Pipeline.from_frames(np.zeros((8, 2, 2, 3), np.uint8)).source
    with pytest.raises(RuntimeError, match="could not stop") as caught:
        hf.Pipeline(source, 4, (stage,), sink).run()
    assert "while stage 'odd' finished" in " ".join(caught.value.__notes__)
    assert sink.closed == [True]  # it had finished; nothing was left open


def test_a_retry_back_off_stops_when_the_run_fails():
    seen = threading.Event()

    def second_batch_fails(frames):
        if seen.is_set():
            raise KeyError("the other stage broke")
        seen.set()
        return frames

    def flaky(frames):
        raise ValueError("always")

    start = time.monotonic()
    with pytest.raises(KeyError, match="other stage"):
        hf.Pipeline.from_frames(np.zeros((4, 2, 2, 3), np.uint8), batch_size=2).map(
            second_batch_fails
        ).map(flaky, faults=Retry(3, backoff=30.0)).run()  # back-offs of 30, 60 and 120 s
    assert not any(t.name.startswith("hf-") for t in threading.enumerate())  # none left behind
    assert time.monotonic() - start < 5  # not STOP_GRACE_S (10 s) waiting on a sleeper


def test_an_empty_run_opens_the_sink_with_the_declared_shape():
    sink = Recording()
    spec = hf.FrameSpec((1, 1, 3))
    (
        hf.Pipeline.from_frames(np.zeros((0, 4, 4, 3), np.uint8))
        .map(lambda f: f[:, :1, :1], spec=spec)
        .to(sink)
        .run()
    )
    assert sink.spec == spec and sink.closed == [True]


class SlowSink(Sink):
    """Takes its time over every batch, so finished batches queue up before it."""

    def __init__(self):
        self.ids, self.closed = [], None

    def write(self, frames, index, meta):
        time.sleep(0.05)
        self.ids.extend(int(i) for i in index)

    def close(self, *, ok):
        self.closed = ok


def test_batches_finished_before_a_failure_still_reach_the_sink():
    """A function that fails at frame 20 of batches of 4: the five batches it finished
    before are written, in order, however far behind the sink was; then the run fails
    and the sink is closed as failed."""

    def fails_at_20(frames):
        if int(frames[:, 0, 0, 0].max()) >= 20:
            raise RuntimeError("stopped on purpose")
        return frames

    frames = np.arange(40, dtype=np.uint8)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)
    sink = SlowSink()
    pipeline = hf.Pipeline.from_frames(frames, batch_size=4).map(fails_at_20).to(sink)
    with pytest.raises(RuntimeError, match="stopped on purpose"):
        pipeline.run()
    assert sink.ids == list(range(20)) and sink.closed is False
