"""How a store reads: when a miss decodes its whole group, what to read ahead, the
threads a store reads on, and the heap it decodes into (:func:`keep_freed_blocks`).

The policy is pure functions of the access pattern (:func:`decodes_group`,
:func:`read_ahead_group`), which ``benchmarks/cache_policies.py`` replays on traces.
:class:`StoreThreads` owns a store's threads: the band decoders of one frame, started on
first use (anew in a forked child), and one read-ahead thread with at most two groups in
flight; :meth:`StoreThreads.close` stops both.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

Decode = Literal["auto", "group", "frame"]
READ_AHEAD_REACH = 8
"""An access within this many frames of the previous one is a local move (playback or
scrubbing), not a jump."""
GROUP_DECODE_MAX = 16
"""``decode="auto"`` decodes whole groups of up to this many frames (a 50-frame 720p group
takes about 0.4 s: longer ones are read frame by frame, each 10-25 ms)."""
BAND_THREADS = 4
"""Most threads a store decodes the bands of a frame on (fewer on fewer cores)."""
AHEAD_IN_FLIGHT = 2
"""Most groups read ahead at once."""


HEAP_BLOCK_MAX = 32 << 20
"""The largest block glibc lets its mmap threshold rise to (on 64-bit systems)."""


def keep_freed_blocks(nbytes: int) -> None:
    """Let freed blocks of up to about ``nbytes`` (at most :data:`HEAP_BLOCK_MAX`) be used
    again from the heap rather than mapped afresh.

    glibc maps every block above its mmap threshold (128 KiB at first) anew and unmaps it
    when freed, so every buffer of a frame's decode (a record's bytes, its residuals, the
    sum) page-faults in again: 1 ms more for a 512x512 uint16 frame of three records,
    half its read. Freeing one mapped block raises the threshold to that block's size
    (glibc's own rule, which any large array freed triggers), and the free memory a heap
    keeps before it gives pages back to twice that (so the heap may keep up to
    ``2 * nbytes`` freed). The block is never touched: it costs two system calls and no
    page. Elsewhere than glibc, nothing changes.
    """
    block = np.empty(min(nbytes, HEAP_BLOCK_MAX), np.uint8)
    del block


def is_local_move(frame: int, last: int | None) -> bool:
    """Whether an access to ``frame`` after one to ``last`` moves by 1..READ_AHEAD_REACH."""
    return last is not None and 0 < abs(frame - last) <= READ_AHEAD_REACH


def decodes_group(decode: Decode, frame: int, last: int | None, length: int) -> bool:
    """Whether a miss on ``frame`` (after an access to ``last``) decodes its whole group of
    ``length`` frames."""
    if decode == "group":
        return True
    return decode == "auto" and length <= GROUP_DECODE_MAX and is_local_move(frame, last)


def read_ahead_group(frame: int, last: int | None, group: int, groups: int) -> int | None:
    """The group to read ahead after an access to ``frame`` (in ``group``), or ``None``.

    Moving forward (``0 < frame - last <= READ_AHEAD_REACH``) reads the next group;
    moving back by as much reads the previous one.
    """
    if last is None or not is_local_move(frame, last):
        return None
    target = group + 1 if frame > last else group - 1
    return target if 0 <= target < groups else None


class StoreThreads:
    """The threads one open store reads on. Thread-safe: the caller's threads and the
    read-ahead thread reach it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards every field below
        self.closed = False
        self._inflight: dict[int, Future[Any]] = {}
        self._ahead: ThreadPoolExecutor | None = None
        self._bands: ThreadPoolExecutor | None = None
        self._bands_pid = os.getpid()

    def bands(self) -> ThreadPoolExecutor:
        """The threads that decode the bands of one frame in parallel (anew in a forked
        child, where the parent's threads do not exist)."""
        with self._lock:
            if self._bands is None or self._bands_pid != os.getpid():
                self._bands_pid = os.getpid()
                threads = min(BAND_THREADS, os.cpu_count() or 1)
                self._bands = ThreadPoolExecutor(threads, thread_name_prefix="hf-store-bands")
            return self._bands

    def read_ahead(self, group: int, read: Callable[[], Any]) -> None:
        """Start ``read()`` of ``group`` on the read-ahead thread, unless it is in flight,
        :data:`AHEAD_IN_FLIGHT` groups are, or the store is closed."""
        with self._lock:
            for done in [k for k, f in self._inflight.items() if f.done()]:
                del self._inflight[done]  # a failed one included: it is never re-raised
            if self.closed or group in self._inflight or len(self._inflight) >= AHEAD_IN_FLIGHT:
                return
            if self._ahead is None:
                self._ahead = ThreadPoolExecutor(1, thread_name_prefix="hf-store-ahead")
            self._inflight[group] = self._ahead.submit(read)

    def wait(self, group: int) -> None:
        """Wait for the read-ahead of ``group`` if one was started (then the access is a
        hit).

        A read-ahead that failed is forgotten, not re-raised: the caller goes on to read
        the group itself, which raises the group's own error if it really is damaged (a
        read-ahead can also fail for reasons of its own, or be cancelled by :meth:`close`).
        """
        with self._lock:
            pending = self._inflight.get(group)
        if pending is None:
            return
        try:
            pending.result()
        except Exception:
            with self._lock:
                if self._inflight.get(group) is pending:
                    del self._inflight[group]

    def close(self) -> bool:
        """Stop both kinds of threads; whether this call closed them (not an earlier one)."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True  # no read-ahead starts from now on
            ahead, self._ahead = self._ahead, None
            self._inflight.clear()
        if ahead is not None:  # outside the lock: a running read-ahead may need it
            ahead.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            bands, self._bands = self._bands, None
        if bands is not None:
            bands.shutdown(wait=True, cancel_futures=True)
        return True
