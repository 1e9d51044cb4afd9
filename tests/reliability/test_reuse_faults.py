"""Faults in a stage with an accuracy target, whose frames compute on threads of its own
while the stage takes the next batches (``hyper.reuse.target``'s waves): a function that fails
for good, one that fails now and then, and Ctrl-C at random moments. Each must end the
run cleanly: the error said (or the failed frames listed), every other frame handed on
once and in order, no thread of the stage left running (the suite's fixture checks), no
slot held (the next run in the same pool sizes gets them all)."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from hyperframes import Pipeline
from hyperframes.modes import Retry, ReuseByHyperframe, ReuseTarget

N = 240


def frames_with_scenes(*, noise: bool) -> np.ndarray:
    """Frames whose top rows say their scene (a new one every 20 frames), the rest noise
    (so that the stage plans, refines and samples as on a real clip) or black (alike
    within a scene, for ``ReuseByHyperframe``)."""
    rng = np.random.default_rng(3)
    frames = np.zeros((N, 64, 64, 3), np.uint8)
    if noise:
        frames[:] = rng.integers(0, 256, frames.shape)
    frames[:, :8] = (np.arange(N) // 20 * 20).astype(np.uint8)[:, None, None, None]
    for i in range(N):
        frames[i, 0, 0, :2] = divmod(i, 16)  # the frame's number, faint, for the function
    return frames


def number_of(frame: np.ndarray) -> int:
    return int(frame[0, 0, 0]) * 16 + int(frame[0, 0, 1])


TARGET = ReuseTarget(0.9)


def run(fn, reuse=TARGET, **run_args):  # type: ignore[no-untyped-def]
    got: list[int] = []
    pipe = Pipeline.from_frames(frames_with_scenes(noise=reuse is TARGET), batch_size=8)
    if isinstance(reuse, ReuseByHyperframe):
        pipe = pipe.group()
    report = (
        pipe.map(fn, into="a", workers=2, name="f", reuse=reuse, **run_args.pop("map", {}))
        .for_each(lambda ids, _f, _m: got.extend(ids.tolist()), batched=True, meta=True)
        .run(**run_args)
    )
    return got, report


def scene(frames: np.ndarray) -> list[int]:
    return [int(f[4, 4, 0]) for f in frames]


def test_a_function_that_fails_mid_run_stops_it_with_its_error():
    calls = []

    def fn(frames: np.ndarray) -> list[int]:
        calls.append(len(frames))
        if len(calls) == 6:  # a call of a later wave, while the stage goes on
            raise ValueError("the model ran out of memory")
        return scene(frames)

    with pytest.raises(ValueError, match="ran out of memory") as failed:
        run(fn)
    assert "stage 'f'" in "\n".join(getattr(failed.value, "__notes__", []))
    got, report = run(scene)  # the same pools: nothing is held from the failed run
    assert got == list(range(N)) and report.frames == N


@pytest.mark.parametrize(
    "reuse", [TARGET, ReuseByHyperframe(verify_every=2)], ids=["target", "base"]
)
def test_frames_that_fail_for_good_are_listed_and_every_other_frame_comes_out_once(reuse):
    """A frame whose call fails for good is a dead letter, as in a plain stage: listed,
    and not handed on with another frame's answer (with ``ReuseByHyperframe`` that was so for
    a verification frame)."""
    dead = {37, 38, 150} if reuse is TARGET else {9, 10, 11, 12, 150, 151}
    tries: dict[int, int] = {}
    lock = threading.Lock()

    def fn(frames: np.ndarray) -> list[int]:
        numbers = [number_of(f) for f in frames]
        with lock:
            for i in numbers:
                tries[i] = tries.get(i, 0) + 1
        if dead.intersection(numbers):
            raise RuntimeError(f"cannot read frames {numbers}")
        return scene(frames)

    got, report = run(fn, reuse, allow_failures=10, map={"faults": Retry(1, backoff=0)})
    failed = {f["frame"] for f in report.failures}
    assert failed <= dead
    assert got == sorted(got) and len(set(got)) == len(got)
    assert sorted([*got, *failed]) == list(range(N))
    assert failed and all(tries[i] >= 2 for i in failed)  # retried, then given up


@pytest.mark.parametrize("seed", range(4))
def test_ctrl_c_at_a_random_moment_ends_the_run_and_leaves_no_thread(seed):
    def slow(frames: np.ndarray) -> list[int]:
        time.sleep(0.004 * len(frames))
        return scene(frames)

    _, whole = run(slow)
    delay = np.random.default_rng(seed).uniform(0.05, 0.6) * whole.wall_s
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    finished = []
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run(slow)
            finished.append(True)
            time.sleep(5)  # (for the signal to land in)
    finally:
        timer.cancel()
    assert not finished, "the signal landed after the run"
    got, report = run(scene)
    assert got == list(range(N)) and report.frames == N
