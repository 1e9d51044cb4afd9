"""The suite-wide thread-leak check (tests/conftest.py) sees any thread a test leaves."""

from __future__ import annotations

import threading
from collections.abc import Callable


def test_a_thread_left_running_is_reported_whatever_its_name(
    thread_leaks: Callable[..., list[str]],
) -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    worker = threading.Thread(target=release.wait, name="plain-worker", daemon=True)
    worker.start()
    try:
        left = thread_leaks(before, join_s=0.05)
        assert left == ["plain-worker (daemon, target Event.wait)"], left
    finally:
        release.set()
        worker.join()
    assert thread_leaks(before) == []  # a thread that has ended is no leak


def test_threads_that_end_within_the_join_are_not_reported(
    thread_leaks: Callable[..., list[str]],
) -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    worker = threading.Thread(target=release.wait, name="finishing", daemon=False)
    worker.start()
    release.set()  # it ends on its own, during the check's join
    assert thread_leaks(before) == []
    assert not worker.is_alive()
