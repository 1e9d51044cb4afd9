import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperframes import CycleError
from hyperframes.engine.dag import TaskGraph


def test_siblings_run_together_after_their_dependency():
    running, peak, lock = set(), [0], threading.Lock()
    both_started = threading.Barrier(2, timeout=10)

    def frame(i):
        def fn(*deps):
            with lock:
                running.add(i)
                peak[0] = max(peak[0], len(running))
            if i in (5, 6):
                both_started.wait()  # proves 5 and 6 run at the same time
            with lock:
                running.discard(i)
            return i + sum(deps)

        return fn

    g = TaskGraph()
    g.add(4, frame(4))
    g.add(5, frame(5), deps=[4])
    g.add(6, frame(6), deps=[4])
    g.add(7, frame(7), deps=[5, 6])
    assert g.run(workers=2) == {4: 4, 5: 9, 6: 10, 7: 26}
    assert peak[0] == 2


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 29), max_size=3), min_size=1, max_size=30), st.integers(1, 4)
)
def test_results_equal_a_serial_run(raw_deps, workers):
    g = TaskGraph()
    for i, deps in enumerate(raw_deps):
        g.add(i, lambda *xs, i=i: i * 7 + sum(xs) % 1000, deps=sorted({d for d in deps if d < i}))
    serial = {}
    for key in g.order():
        deps = g._deps[key]
        serial[key] = g._fns[key](*[serial[d] for d in deps])
    assert g.run(workers=workers) == serial


def test_cycle_is_named():
    g = TaskGraph()
    g.add("a", lambda: 1)
    g.add("b", lambda a, d: 1, deps=["a", "d"])
    g.add("c", lambda b: 1, deps=["b"])
    g.add("d", lambda c: 1, deps=["c"])
    with pytest.raises(CycleError, match="'b' -> 'd' -> 'c' -> 'b'") as info:
        g.run()
    assert set(info.value.cycle) == {"b", "c", "d"}


def test_missing_dependency_and_duplicates():
    g = TaskGraph()
    g.add(1, lambda x: x, deps=[0])
    with pytest.raises(KeyError, match="never added"):
        g.order()
    with pytest.raises(ValueError, match="twice"):
        g.add(1, lambda: 0)


def test_error_names_the_task_and_stops():
    g = TaskGraph()
    g.add(0, lambda: 1)
    g.add(1, lambda x: 1 / 0, deps=[0])
    g.add(2, lambda x: x, deps=[1])
    with pytest.raises(ZeroDivisionError) as info:
        g.run(workers=2)
    assert "in task 1" in " ".join(info.value.__notes__)
