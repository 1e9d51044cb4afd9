import threading

import pytest


@pytest.fixture
def no_thread_leak():
    """Fails the test if it leaves pipeline threads running."""
    yield
    for t in threading.enumerate():
        if t.name.startswith("hf-"):
            t.join(5)  # a thread a test left inside user code on purpose, now released
    left = [t.name for t in threading.enumerate() if t.name.startswith("hf-")]
    assert not left, f"threads left running: {left}"
