"""Suite-wide fixtures: every test is checked for threads it leaves running; the test
processes ``make test`` runs side by side (``pytest -n auto``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import pytest

MOST_TEST_PROCESSES = 4
"""``pytest -n auto`` runs a test process a core, this many at most: a test may hold a
4K pool, a local Ray cluster or a browser, each process its own."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """The test processes ``-n auto`` starts: a core each, :data:`MOST_TEST_PROCESSES` at
    most."""
    return max(1, min(len(os.sched_getaffinity(0)), MOST_TEST_PROCESSES))


JOIN_S = 5.0
"""How long, all threads together, a test's new threads get to finish after it: a thread a
test left inside user code on purpose and then released, or one that is closing its socket."""

LONG_LIVED: dict[str, str] = {
    # Starlette runs the viewer's sync routes in AnyIO's worker threads, which AnyIO keeps
    # for reuse (an idle one exits after 10 s). The server they serve belongs to a module-
    # or session-scoped fixture; the first request a test makes starts them.
    "AnyIO worker thread": "AnyIO's thread pool behind a served viewer (idle ones exit)",
}
"""Name prefix -> why: threads that live for the process on purpose (a library's own
background threads, started once). A test that starts one of these has not leaked it."""

KNOWN_LEAKS: dict[str, str] = {}
"""Name prefix -> the bug in ``src/`` and a test that shows it. These are leaks to fix, kept
here only so that the rest of the suite can run; remove an entry when its leak is fixed."""


def _excused(thread: threading.Thread) -> bool:
    return thread.name.startswith(tuple(LONG_LIVED) + tuple(KNOWN_LEAKS))


def leaked_threads(before: set[threading.Thread], *, join_s: float = JOIN_S) -> list[str]:
    """The threads started since ``before`` that are still running after up to ``join_s``
    seconds of joining (all of them together), less the excused ones."""
    new = [t for t in threading.enumerate() if t not in before and not _excused(t)]
    deadline = time.monotonic() + join_s
    for thread in new:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [
        f"{t.name} ({'daemon' if t.daemon else 'non-daemon'}, target "
        f"{getattr(getattr(t, '_target', None), '__qualname__', '?')})"
        for t in new
        if t.is_alive()
    ]


@pytest.fixture(autouse=True)
def no_thread_leak() -> Iterator[None]:
    """Fails the test if it leaves any thread running that it started (daemon or not).

    Threads of session- and module-scoped fixtures are already running when this snapshot
    is taken (pytest sets up wider scopes first), so they do not count against a test.
    """
    before = set(threading.enumerate())
    yield
    left = leaked_threads(before)
    if left:
        pytest.fail(f"threads left running by this test: {left}", pytrace=False)


@pytest.fixture
def thread_leaks() -> Callable[..., list[str]]:
    """:func:`leaked_threads`, for the tests of the check itself."""
    return leaked_threads
