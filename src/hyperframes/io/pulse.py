"""A read's pulse that a watcher in another process can see: three int64 in shared memory
(a *beat*): the position of the input a read is at, how many reads have begun, and 1
while one runs. A watcher that sees a read run longer than its timeout with the same
count knows the file hangs, even where its decoder burns CPU in a loop; one that sees
the process die in a read knows which input it was at. A read runs only while the source
reads: a slow function, which the source then waits on, is never taken for a stalled file.

Two ways to tell it: :class:`~.beating.BeatingFiles` tells its own reads (a run of many
inputs side by side); :func:`tell_reads` makes every pipeline's source in this process
tell its opens and reads (a job over one input in a watched worker process).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

POSITION, BEGUN, BUSY = 0, 1, 2
"""The fields of a beat: the input's position, the reads begun, 1 while one runs."""
BEAT_BYTES = 24
"""A beat's size."""

_told: np.ndarray | None = None  # this process's reads, told to a watcher (tell_reads)


def new_beat(memory: Any) -> np.ndarray:
    """A beat in ``memory`` (at least :data:`BEAT_BYTES`; shared, for a watcher elsewhere)."""
    beat = np.frombuffer(memory, np.int64, count=3)
    beat[:] = (-1, 0, 0)
    return beat


def tell_reads(beat: np.ndarray | None) -> None:
    """From now on, every pipeline's source in this process tells its opens and reads in
    ``beat`` (``None``: no longer)."""
    global _told
    _told = beat


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """A source's open or read, told where :func:`tell_reads` asked for it."""
    beat = _told
    if beat is None:
        yield
        return
    beat[BEGUN] += 1
    beat[BUSY] = 1
    try:
        yield
    finally:
        beat[BUSY] = 0


def read_state(beat: np.ndarray) -> tuple[int, bool]:
    """The reads begun so far, and whether one runs now (for a watcher)."""
    return int(beat[BEGUN]), bool(beat[BUSY])
