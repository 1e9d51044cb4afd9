"""The process executor: zero-copy pool views, errors, killed children, and cleanup.

After every run, successful or not, no shared block may be left in /dev/shm and no
worker process may be left running.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import psutil
import pytest

from hyperframes import Pipeline, StageError
from hyperframes.executors import get_executor
from hyperframes.executors.processes import ProcessExecutor

pytestmark = pytest.mark.usefixtures("no_thread_leak")


class Unpicklable(Exception):
    def __init__(self, message: str, handle: object) -> None:
        super().__init__(message)
        self.handle = handle


def invert_in_place(frames: np.ndarray) -> np.ndarray:
    np.bitwise_not(frames, out=frames)
    return frames


def top_rows(frames: np.ndarray) -> np.ndarray:
    return frames[:, :2]


def fail_at_frame_20(frames: np.ndarray) -> np.ndarray:
    if (frames[:, 0, 0, 0] == 20).any():
        raise ValueError("frame 20 is bad")
    return frames


def fail_unpicklably(frames: np.ndarray) -> np.ndarray:
    raise Unpicklable("cannot travel", handle=lambda: None)


def die_at_frame_20(frames: np.ndarray) -> np.ndarray:
    if (frames[:, 0, 0, 0] == 20).any():
        os.kill(os.getpid(), signal.SIGKILL)
    return frames


def numbered(n: int = 64) -> np.ndarray:
    frames = np.zeros((n, 4, 6, 3), np.uint8)
    frames[:, 0, 0, 0] = np.arange(n)
    return frames


def assert_clean(executor: ProcessExecutor) -> None:
    """Every block unlinked, every worker gone."""
    assert executor.blocks.created, "the run made no shared blocks"
    left = [name for name in executor.blocks.created if Path("/dev/shm", name).exists()]
    assert not left, f"shared blocks left in /dev/shm: {left}"
    alive = {p.pid for p in psutil.Process().children(recursive=True)}
    assert executor.pids()
    assert not alive & set(executor.pids()), "worker processes left running"


def test_get_executor_by_name():
    executor = get_executor("processes")
    assert isinstance(executor, ProcessExecutor)
    executor.close()


def test_pool_views_cross_without_copy_and_in_place_results_come_back_as_views():
    executor = ProcessExecutor()
    try:
        block = np.ndarray((4, 4, 6, 3), np.uint8, buffer=executor.allocate(4 * 72))
        block[:] = 7
        frames = block[1:3]
        run = executor.remote(invert_in_place, stage="map:invert", workers=1)
        result = run(frames)
        assert np.shares_memory(result, frames)
        assert result.__array_interface__ == frames.__array_interface__
        assert (block[1:3] == 248).all() and (block[0] == 7).all()
        rows = executor.remote(top_rows, stage="map:top", workers=1)(frames)
        assert np.shares_memory(rows, block) and rows.shape == (2, 2, 6, 3)
    finally:
        executor.close()
    assert_clean(executor)


def test_success_leaves_nothing_behind():
    executor = ProcessExecutor()
    out = (
        Pipeline.from_frames(numbered(), batch_size=8)
        .map(invert_in_place, workers=2)
        .collect(executor=executor)
    )
    np.testing.assert_array_equal(out, 255 - numbered())
    assert_clean(executor)


def test_stage_error_keeps_its_type_and_the_child_traceback():
    executor = ProcessExecutor()
    pipeline = Pipeline.from_frames(numbered(), batch_size=8).map(fail_at_frame_20, workers=2)
    with pytest.raises(ValueError, match="frame 20 is bad") as info:
        pipeline.run(executor=executor)
    notes = "\n".join(info.value.__notes__)
    assert "traceback in worker process" in notes and "fail_at_frame_20" in notes
    assert "map:fail_at_frame_20" in notes
    assert_clean(executor)


def test_an_exception_that_cannot_travel_becomes_stage_error():
    executor = ProcessExecutor()
    pipeline = Pipeline.from_frames(numbered(), batch_size=8).map(fail_unpicklably)
    with pytest.raises(StageError, match=r"Unpicklable: cannot travel"):
        pipeline.run(executor=executor)
    assert_clean(executor)


def test_a_killed_child_fails_the_run_cleanly():
    executor = ProcessExecutor()
    pipeline = Pipeline.from_frames(numbered(), batch_size=4).map(die_at_frame_20, workers=2)
    with pytest.raises(StageError, match=r"map:die_at_frame_20.*signal 9 \(exit code -9\)"):
        pipeline.run(executor=executor)
    assert_clean(executor)


def test_ctrl_c_in_the_parent_cleans_up():
    executor = ProcessExecutor()

    def interrupt(ids, frames):
        raise KeyboardInterrupt

    pipeline = Pipeline.from_frames(numbered(), batch_size=8).map(invert_in_place, workers=2)
    with pytest.raises(KeyboardInterrupt):
        pipeline.for_each(interrupt, batched=True).run(executor=executor)
    assert_clean(executor)


def test_children_ignore_sigint():
    executor = ProcessExecutor()
    try:
        run = executor.remote(invert_in_place, stage="map:invert", workers=1)
        frames = np.zeros((2, 4, 6, 3), np.uint8)
        run(frames)
        os.kill(executor.pids()[0], signal.SIGINT)
        np.testing.assert_array_equal(run(frames), 255 - frames)
    finally:
        executor.close()


@pytest.mark.parametrize("fn", [lambda f: f, np.frompyfunc(abs, 1, 1)], ids=["lambda", "ufunc"])
def test_a_function_that_cannot_be_pickled_is_a_type_error(fn):
    executor = ProcessExecutor()
    try:
        with pytest.raises(TypeError, match="define it at module level"):
            executor.remote(fn, stage="map:x", workers=1)
    finally:
        executor.close()
    assert executor.pids() == []


def test_a_nested_function_is_refused_before_the_run():
    def nested(frames):
        return frames

    with pytest.raises(TypeError, match=r"map:nested.*nested.*define it at module level"):
        Pipeline.from_frames(numbered(), batch_size=8).map(nested).run(executor="processes")


def test_unknown_start_method():
    with pytest.raises(ValueError, match="start_method must be one of"):
        ProcessExecutor(start_method="fork")  # type: ignore[arg-type]


def test_a_full_dev_shm_is_a_clear_error_not_a_crash(monkeypatch) -> None:
    import shutil as shutil_module

    from hyperframes.executors import _shm

    real = shutil_module.disk_usage
    monkeypatch.setattr(_shm.shutil, "disk_usage", lambda path: real(path)._replace(free=64 << 20))
    blocks = _shm.SharedBlocks()
    with pytest.raises(_shm.SharedMemoryFull, match=r"needs 100 MiB.*64 MiB free.*shm-size"):
        blocks.create(100 << 20)
    assert blocks.created == []
