"""A pipeline is a description: runs of it (at once, from several threads, or sharing a
prefix with another) each get every frame, and an idle pipeline holds no pools."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.frames import FramePool

FRAMES = np.broadcast_to(np.arange(64, dtype=np.uint8).reshape(64, 1, 1, 1), (64, 4, 4, 3)).copy()


def overlapping(parties: int) -> tuple[threading.Barrier, object]:
    """A stage function that makes every run wait for the others at its first batch, so the
    runs are certainly in flight together."""
    barrier = threading.Barrier(parties, timeout=20)
    seen: set[int] = set()
    lock = threading.Lock()

    def meet(frames: np.ndarray) -> np.ndarray:
        key = threading.get_ident()
        with lock:
            first = key not in seen
            seen.add(key)
        if first:
            barrier.wait()
        return frames

    return barrier, meet


def run_in_threads(*jobs):
    results: list[object] = [None] * len(jobs)
    errors: list[BaseException] = []

    def call(k, job):
        try:
            results[k] = job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(k, job)) for k, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


def test_one_pipeline_from_two_threads_each_run_gets_every_frame():
    _, meet = overlapping(2)
    got: dict[int, list[int]] = {}

    def keep(i, frame):
        got.setdefault(threading.get_ident(), []).append(int(frame[0, 0, 0]))

    pipeline = hf.Pipeline.from_frames(FRAMES, batch_size=4).map(meet).for_each(keep)
    reports = run_in_threads(pipeline.run, pipeline.run)
    assert [r.frames for r in reports] == [64, 64]
    assert sorted(map(len, got.values())) == [64, 64]
    assert all(values == list(range(64)) for values in got.values())


def test_two_pipelines_sharing_a_prefix_run_at_once():
    _, meet = overlapping(2)
    prefix = hf.Pipeline.from_frames(FRAMES, batch_size=4).map(meet).map(np.copy, workers=2)
    plus_one = prefix.map(lambda f: f + 1, name="plus")
    doubled = prefix.map(lambda f: f * 2, name="double")
    one, two = run_in_threads(plus_one.collect, doubled.collect)
    assert np.array_equal(one, FRAMES + 1) and np.array_equal(two, FRAMES * 2)


def test_a_source_that_serves_one_run_at_a_time_is_refused_not_split():
    started, release = threading.Event(), threading.Event()

    def hold(frames):
        started.set()
        release.wait(20)
        return frames

    seen: list[int] = []
    pipeline = (
        hf.Pipeline.from_frames(iter(FRAMES), batch_size=4)  # a generator: read once
        .map(hold)
        .for_each(lambda i, frame: seen.append(i))
    )
    first = threading.Thread(target=pipeline.run)
    first.start()
    assert started.wait(20)
    try:
        with pytest.raises(RuntimeError, match="already in a run"):
            pipeline.run()
    finally:
        release.set()
        first.join(20)
    assert seen == list(range(64))


def test_an_idle_pipeline_holds_no_pools():
    pipeline = hf.Pipeline.from_frames(FRAMES, batch_size=4).map(
        lambda f: f[:, :2], name="crop-unique-7f3a"
    )
    out = pipeline.collect()
    assert out.shape == (64, 2, 4, 3)
    gc.collect()
    left = [o for o in gc.get_objects() if type(o) is FramePool and o.name == "crop-unique-7f3a"]
    assert left == []
    assert np.array_equal(pipeline.collect(), out)  # and it runs again
