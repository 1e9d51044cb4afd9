"""``executors.worker.Worker``: one object in a child process, each call with a deadline."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from hyperframes.executors.worker import SharedBlocks, Worker, WorkerDied, WorkerStalled


class Target:
    """What a test worker keeps: a count, and ways to stall, die and raise."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, op: str, *args):
        self.calls += 1
        if op == "count":
            return self.calls
        if op == "sleep":
            time.sleep(args[0])
            return "woke"
        if op == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if op == "raise":
            raise KeyError(args[0])
        if op == "fill":  # writes into the parent's shared array, where it lies
            args[0][...] = args[1]
            return int(args[0].sum())
        raise ValueError(op)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


def test_a_worker_keeps_its_object_and_writes_into_shared_memory():
    worker = Worker(Target(), name="hf-test")
    try:
        assert [worker.call("count", timeout=30) for _ in range(3)] == [1, 2, 3]
        blocks = SharedBlocks()
        shared = np.frombuffer(blocks.create(64), np.uint8).reshape(8, 8)
        assert worker.call("fill", shared, 2, timeout=30) == 128
        assert int(shared.sum()) == 128  # the child wrote the parent's memory
        blocks.unlink_all()
    finally:
        worker.close()


def test_a_call_past_its_deadline_stops_the_child():
    worker = Worker(Target(), name="hf-test")
    worker.call("count", timeout=30)  # started
    pid = worker.pid
    began = time.monotonic()
    with pytest.raises(WorkerStalled, match=r"no answer in 0\.5 s"):
        worker.call("sleep", 60, timeout=0.5)
    assert time.monotonic() - began < 10
    assert pid is not None and not alive(pid)
    with pytest.raises(RuntimeError, match="closed"):
        worker.call("count", timeout=30)


def test_a_child_that_dies_is_said_and_errors_cross_as_themselves():
    worker = Worker(Target(), name="hf-test")
    with pytest.raises(KeyError, match="lost"):
        worker.call("raise", "lost", timeout=30)
    assert worker.call("count", timeout=30) == 2  # still there after an error
    with pytest.raises(WorkerDied, match="killed by signal 9"):
        worker.call("die", timeout=30)
    worker.close()  # twice is fine
    worker.close()


def test_a_target_that_cannot_be_sent_is_refused():
    with pytest.raises(TypeError, match="cannot be sent to worker processes"):
        Worker(lambda op: op, name="hf-test")


def test_a_call_that_does_nothing_is_stopped_and_one_that_works_is_not():
    from hyperframes.executors.idle import WorkerIdle, activity, call_until_idle

    sleeper = Worker(time.sleep, name="hf-test-idle")
    began = time.monotonic()
    with pytest.raises(WorkerIdle, match="nothing came of it in 1 s"):
        call_until_idle(sleeper, 30, idle=1.0)  # no CPU, no byte read or written
    assert time.monotonic() - began < 10 and sleeper.pid is None
    worker = Worker(sum, name="hf-test-busy")
    pid = worker.pid
    assert pid is not None and activity(pid) is not None
    began = time.monotonic()
    total = call_until_idle(worker, range(60_000_000), idle=0.3)  # CPU only, > 0.3 s
    assert total == sum(range(60_000_000)) and time.monotonic() - began > 0.3
    worker.close()
    assert activity(pid) is None


def spin(beat, seconds: float, in_a_read: bool) -> str:
    """Burn CPU for ``seconds``, inside a read told in ``beat`` or outside any."""
    import contextlib

    from hyperframes.io.pulse import reading, tell_reads

    tell_reads(beat)
    end = time.monotonic() + seconds
    with reading() if in_a_read else contextlib.nullcontext():
        while time.monotonic() < end:
            pass
    return "spun"


def test_a_read_that_runs_past_the_limit_is_stopped_though_it_burns_cpu():
    from hyperframes.executors.idle import WorkerIdle, call_until_idle
    from hyperframes.io.pulse import BEAT_BYTES, new_beat, read_state

    blocks = SharedBlocks()
    beat = new_beat(blocks.create(BEAT_BYTES))
    looping = Worker(spin, name="hf-test-loop")
    began = time.monotonic()
    with pytest.raises(WorkerIdle, match="nothing came of it in 1 s"):  # a decoder's loop
        call_until_idle(looping, beat, 60, True, idle=1.0, reads=lambda: read_state(beat))
    assert time.monotonic() - began < 10 and looping.pid is None
    beat[:] = (-1, 0, 0)  # (the stopped one died inside its read)
    working = Worker(spin, name="hf-test-work")  # as long, outside a read: left to finish
    assert call_until_idle(working, beat, 1.5, False, idle=0.5,
                           reads=lambda: read_state(beat)) == "spun"  # fmt: skip
    working.close()
    blocks.unlink_all()
