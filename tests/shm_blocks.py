"""What a test leaves in ``/dev/shm``, told apart from what a test beside it holds.

Under ``pytest -n`` (``make test``) other tests run in processes beside this one and make
blocks of their own while it runs. Our blocks are named after the process that made them
(``hf_<pid>_...``), so those of this process, and those of processes that have ended (the
children a test started, a killed job's), count as left by this test; a live maker's
belong to a test beside it. Names that say no maker (a semaphore of multiprocessing's,
another library's block) count only where no test runs beside this one.

Example:
    >>> before = shm_names()
    >>> left_since(before)
    set()
"""

from __future__ import annotations

import os

from hyperframes.executors._shm import maker_of

SHM = "/dev/shm"


def shm_names() -> set[str]:
    """The names in ``/dev/shm`` now (none where there is no such folder)."""
    return set(os.listdir(SHM)) if os.path.isdir(SHM) else set()


def alone() -> bool:
    """Whether no other test process runs beside this one."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) <= 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = ""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return False
    return state not in ("Z", "X")


def left_since(before: set[str]) -> set[str]:
    """The names made since ``before`` that are still there and are this test's: blocks of
    ours made by this process or by one that has ended, and where no test runs beside this
    one, every other name too."""
    left = set()
    for name in shm_names() - before:
        maker = maker_of(name)
        if maker is None:
            if alone():
                left.add(name)
        elif maker == os.getpid() or not _alive(maker):
            left.add(name)
    return left
