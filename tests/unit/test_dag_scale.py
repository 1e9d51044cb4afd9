"""The task graph schedules in time linear in its size, and keeps its errors."""

from __future__ import annotations

import threading
import time

import pytest

from hyperframes import CycleError
from hyperframes.engine.dag import TaskGraph


def chain(n: int) -> TaskGraph:
    g = TaskGraph()
    g.add(0, lambda: 0)
    for i in range(1, n):
        g.add(i, lambda prev: prev + 1, deps=[i - 1])
    return g


def test_a_long_chain_schedules_in_linear_time() -> None:
    # 20,000 chained tasks: scanning every task per completion took about 25 s on 2 cores;
    # with graphlib the run takes 1.5-2 s, nearly all of it handing tasks to the pool
    # thread. The bound is generous on purpose (a loaded machine must not fail it).
    g = chain(20_000)
    started = time.perf_counter()
    out = g.run(workers=4)
    elapsed = time.perf_counter() - started
    assert out[19_999] == 19_999 and len(out) == 20_000
    assert list(out) == list(range(20_000))
    assert elapsed < 8.0, f"20,000 chained tasks took {elapsed:.2f} s"


def test_a_wide_graph_keeps_order_and_bounds_parallelism() -> None:
    running, peak, lock = [0], [0], threading.Lock()

    def task(*deps: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.001)  # running long enough for others to start beside it
        with lock:
            running[0] -= 1
        return sum(deps) + 1

    g = TaskGraph()
    g.add("root", task)
    for i in range(2_000):
        g.add(i, task, deps=["root"])
    g.add("sink", lambda *xs: len(xs), deps=list(range(2_000)))
    started = time.perf_counter()
    out = g.run(workers=3)
    assert time.perf_counter() - started < 8.0
    assert out["sink"] == 2_000 and out[1_999] == 2
    assert list(out) == ["root", *range(2_000), "sink"]
    assert 2 <= peak[0] <= 3  # in parallel (the count sees it), and never past the workers


def test_a_cycle_in_a_long_chain_still_raises_before_anything_runs() -> None:
    ran: list[int] = []
    g = TaskGraph()
    g.add(0, lambda last: ran.append(0), deps=[9_999])  # closes the loop
    for i in range(1, 10_000):
        g.add(i, lambda prev, i=i: ran.append(i), deps=[i - 1])
    with pytest.raises(CycleError, match="tasks depend on each other in a cycle") as info:
        g.run(workers=2)
    assert len(info.value.cycle) == 10_000 and ran == []


def test_an_unknown_dependency_still_raises_key_error() -> None:
    g = chain(10)
    g.add("x", lambda y: y, deps=["missing"])
    with pytest.raises(KeyError, match="'missing', which was never added"):
        g.run()
