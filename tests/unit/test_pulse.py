"""``io.pulse``: a pipeline's source tells its open and every read in the process's beat
(a watched worker's job), and tells nothing where none was asked for."""

from __future__ import annotations

import time

import numpy as np

import hyperframes as hf
from hyperframes.io.base import Chunk, Source
from hyperframes.io.pulse import new_beat, read_state, tell_reads


class Watched(Source):
    """Three batches of eight frames; notes what the beat said inside each call."""

    def __init__(self, beat) -> None:
        self.spec, self.length, self.info, self.beat = (
            hf.FrameSpec((2, 2, 1), np.uint8),
            24,
            {},
            beat,
        )
        self.said: list[tuple[int, bool]] = []
        self._next = 0

    def open(self) -> None:
        self.said.append(read_state(self.beat))

    def read_into(self, out):
        self.said.append(read_state(self.beat))
        ids = np.arange(self._next, min(self._next + len(out), self.length))
        self._next += len(ids)
        return Chunk(ids)


def test_a_source_tells_its_open_and_each_read_while_it_runs():
    beat = new_beat(bytearray(24))
    source = Watched(beat)
    tell_reads(beat)
    try:
        hf.Pipeline.from_source(source, batch_size=8).run()
    finally:
        tell_reads(None)
    assert source.said == [(1, True), (2, True), (3, True), (4, True), (5, True)]
    assert read_state(beat) == (5, False)  # none runs after the run
    quiet = Watched(beat)
    hf.Pipeline.from_source(quiet, batch_size=8).run()
    assert read_state(beat) == (5, False)  # none asked for: nothing told


class Looping(Source):
    """A source whose read never ends and burns CPU all the while: a decoder's loop."""

    def __init__(self) -> None:
        self.spec, self.length, self.info = hf.FrameSpec((2, 2, 1), np.uint8), 8, {}

    def read_into(self, out):
        while True:
            pass


def looping_job(item: str) -> dict:
    hf.Pipeline.from_source(Looping(), batch_size=8).run()
    return {"item": item}


def busy_job(item: str) -> dict:  # as long, in its own work, not in a read
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        pass
    return {"item": item}


def test_a_watched_job_whose_read_loops_is_stopped_and_one_that_works_is_not():
    from hyperframes.cli.per_input import Watched

    with Watched(timeout=1.0) as watched:
        began = time.monotonic()
        kind, why = watched(looping_job, "loops.mp4")
        assert kind == "failed" and "nothing came of it in 1 s (the file timeout)" in why
        assert time.monotonic() - began < 15
        assert watched(busy_job, "works.mp4") == ("done", {"item": "works.mp4"})
