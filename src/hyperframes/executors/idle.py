"""A call in a worker process, stopped when the process stops doing anything, or when one
read runs past the limit.

A job over one input (a transcode, a pack) reads, computes and writes; one stuck on a
stalled network mount or a FIFO with no writer does none of these: its threads wait in the
kernel. :func:`call_until_idle` watches the worker's process as the kernel counts it (CPU
time, bytes read and written, every thread) and stops it after ``idle`` seconds in which
none moved. A job that works, however slowly, is left to finish. Where the job tells its
reads (``reads``: how many have begun, and whether one runs, as a beat of
:mod:`..io.pulse` holds them), a single read that runs for ``idle`` seconds stops it too:
a decoder caught in a loop burns CPU, but never finishes its read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .worker import Worker

LOOK_S = 0.25
"""How often the process's counters are read."""


class WorkerIdle(TimeoutError):
    """The call's process did nothing (no CPU, no byte read or written), or one of its
    reads ran, for the limit, and was stopped."""


def activity(pid: int) -> tuple[int, ...] | None:
    """What process ``pid`` has done so far: its CPU ticks (user, system) and the bytes it
    has read and written, all its threads together; ``None`` where it is gone. The bytes
    are left out where the kernel does not show them (they are then 0)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    ticks = (int(fields[11]), int(fields[12]))  # utime, stime
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            counts = dict(line.split(b":") for line in f.read().splitlines() if b":" in line)
        moved = (int(counts[b"rchar"]), int(counts[b"wchar"]))
    except (OSError, KeyError, ValueError):
        moved = (0, 0)
    return (*ticks, *moved)


def call_until_idle(
    worker: Worker, *args: Any, idle: float, reads: Callable[[], tuple[int, bool]] | None = None
) -> Any:
    """``worker.call(*args)``, its process stopped where it does nothing for ``idle`` s, or
    where ``reads()`` (the reads begun, and whether one runs) shows one read running
    that long.

    Raises:
        WorkerIdle: the process was stopped (the worker is closed: make a new one).
        WorkerDied, ...: as :meth:`Worker.call` raises them.
    """
    pid, done, stopped = worker.pid, threading.Event(), threading.Event()

    def guard() -> None:
        seen, since = activity(pid) if pid else None, time.monotonic()
        read, read_since = None, since  # (the read running now, and since when)
        while not done.wait(LOOK_S):
            now, at = activity(pid) if pid else None, time.monotonic()
            if now != seen:
                seen, since = now, at
            begun, busy = reads() if reads is not None else (0, False)
            if not busy or begun != read:
                read, read_since = (begun if busy else None), at
            if at - since >= idle or (read is not None and at - read_since >= idle):
                stopped.set()
                worker.close()
                return

    watch = threading.Thread(target=guard, name="hf-idle-guard", daemon=True)
    watch.start()
    try:
        return worker.call(*args)
    except BaseException:
        if stopped.is_set():
            raise WorkerIdle(
                f"nothing came of it in {idle:g} s (the file timeout): its process was stopped"
            ) from None
        raise
    finally:
        done.set()
        watch.join()
