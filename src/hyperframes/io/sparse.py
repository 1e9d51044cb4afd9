"""Decode only what the wanted frames need, a group of pictures per worker.

A sampling (:mod:`~hyperframes.io.sampling`) names its frames before anything is decoded,
and the packets number the frames (:mod:`~hyperframes.io.frame_table`), so each wanted
frame's key frame is known. The wanted frames are cut into :class:`Job`\\ s, one per key
frame (and a new one wherever the order goes back), and each job is decoded on its own:

* it seeks to its key frame, so nothing before it is decoded;
* a packet whose frame is not wanted reaches the decoder with ``skip_frame=NONREF``: a
  frame no other frame refers to (most B-frames) is then not decoded at all;
* once the packet of its last wanted frame is sent, the decoder is drained and the job
  ends: the rest of the group of pictures is not read.

Jobs are independent, so ``workers`` threads decode them side by side (PyAV lets go of the
GIL while FFmpeg decodes), each with a one-thread decoder, and the frames come out in the
jobs' order. A job waits while ``ahead`` of its frames are decoded and not yet taken (as
many as fit :data:`~.decoder_memory.AHEAD_BYTES`), so the frames held stay bounded (the
run's plan counts them: :func:`~.decoder_memory.sampled_decoding`). Where the jobs want
more frames each than that (``every=2``), workers side by side would only wait on each
other: one decoder with FFmpeg's own threads reads them instead.

Measured (benchmarks/sampling.py, 1080p H.264): one frame a second of 25 decodes about
half the frames and, on two workers, takes about half the time of decoding every frame.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import av
import numpy as np

from .decoder_memory import ahead_frames

WAIT = 0.05
"""Seconds a blocked thread waits before it looks whether the decoder was closed."""


@dataclass(frozen=True)
class Job:
    """Frames decoded from one key frame.

    Attributes:
        key: the key frame decoding starts from (-1: the first packet).
        wanted: the frames to give, ascending, repeats kept.
    """

    key: int
    wanted: tuple[int, ...]


def plan_jobs(wanted: np.ndarray, keyframes: np.ndarray) -> list[Job]:
    """``wanted`` (in the order to give them) cut into jobs: a new one at each key frame
    and wherever the order goes back."""
    if not len(wanted):
        return []
    at = np.searchsorted(keyframes, wanted, side="right") - 1
    keys = np.where(at >= 0, keyframes[np.maximum(at, 0)], -1)
    jobs: list[Job] = []
    first = 0
    for k in range(1, len(wanted) + 1):
        if k == len(wanted) or keys[k] != keys[first] or wanted[k] < wanted[k - 1]:
            jobs.append(Job(int(keys[first]), tuple(int(w) for w in wanted[first:k])))
            first = k
    return jobs


class Corrupt:
    """A wanted frame the decoder could not give, and why."""

    def __init__(self, index: int, why: str) -> None:
        self.index, self.why = index, why


class SparseDecoder:
    """The frames of ``jobs`` in order, as ``(index, frame)``, decoded by ``workers``.

    Args:
        path: the video.
        pts: every frame's timestamp by index (the packets' numbering).
        jobs: what to decode (:func:`plan_jobs`).
        workers: decoders working side by side (one job alone gets FFmpeg's threads).
        frame_bytes: the size of a decoded frame, which sets how many a job may hold
            before they are taken (:data:`~.decoder_memory.AHEAD_BYTES`).
        first: the count of the first wanted frame (where a resumed read begins).
        on_corrupt: called with ``(index, why)`` for a wanted frame the decoder could not
            give, in order; it raises to stop, or returns to leave the frame out.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        pts: np.ndarray,
        jobs: list[Job],
        *,
        workers: int,
        on_corrupt: Callable[[int, str], None],
        frame_bytes: int = 3 << 20,
        first: int = 0,
    ) -> None:
        self.path = os.fspath(path)
        self._pts = pts
        self._jobs = jobs
        self._ahead = ahead_frames(frame_bytes)
        dense = sum(len(job.wanted) for job in jobs) > self._ahead * len(jobs)
        self._workers = 1 if dense else max(1, min(workers, len(jobs)))
        self._on_corrupt = on_corrupt
        self._first = first
        self.decoded = 0  # frames the decoders gave (wanted or not)
        self.from_top = 0  # jobs whose seek could not be trusted: decoded from the start
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._slots = threading.Semaphore(self._workers + 1)  # jobs begun and not yet taken
        self._ready = threading.Condition(self._lock)
        self._queues: dict[int, queue.Queue[Any]] = {}
        self._next = 0
        self._threads: list[threading.Thread] = []

    def frames(self) -> Iterator[tuple[int, int, av.VideoFrame]]:
        """Every wanted frame as ``(sample, index, frame)``, in the jobs' order, repeats
        given again; ``sample`` counts the wanted frames across the jobs (a frame left out
        as corrupt keeps its count)."""
        self._threads = [threading.Thread(target=self._work, name=f"hf-decode-{n}",
                                          daemon=True) for n in range(self._workers)]  # fmt: skip
        for thread in self._threads:
            thread.start()
        try:
            sample = self._first
            for number, job in enumerate(self._jobs):
                yield from self._taken(number, job, sample)
                sample += len(job.wanted)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the workers and wait for them (the frames not taken are dropped)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _taken(
        self, number: int, job: Job, sample: int
    ) -> Iterator[tuple[int, int, av.VideoFrame]]:
        with self._ready:
            while number not in self._queues:
                self._ready.wait()
            frames = self._queues[number]
        current: tuple[int, Any] | None = None
        try:
            for k, want in enumerate(job.wanted):  # (ascending, repeats kept)
                while current is None or current[0] < want:
                    item = frames.get()
                    if isinstance(item, BaseException):
                        raise item
                    current = (item.index, None) if isinstance(item, Corrupt) else item
                    if isinstance(item, Corrupt):
                        self._on_corrupt(item.index, item.why)
                if current[0] == want and current[1] is not None:
                    yield sample + k, want, current[1]
            assert frames.get() is None  # the job's end
        finally:
            with self._lock:
                del self._queues[number]
            self._slots.release()

    def _work(self) -> None:
        container: Any = None
        try:
            while (taken := self._take()) is not None:
                number, out = taken
                try:
                    if container is None:
                        container = av.open(self.path)
                        stream = container.streams.video[0]
                        if self._workers == 1:  # one decoder: FFmpeg's threads
                            stream.thread_type = "AUTO"
                        else:
                            stream.codec_context.thread_count = 1
                    self._decode(container, stream, self._jobs[number], out)
                    self._put(out, None)
                except _Stopped:
                    return
                except BaseException as exc:  # handed to the reader, which raises it
                    self._put(out, exc)
                    return
        finally:
            if container is not None:
                container.close()

    def _take(self) -> tuple[int, queue.Queue[Any]] | None:
        """The next job and the queue its frames go to (``None``: no more, or stopped)."""
        while not self._slots.acquire(timeout=WAIT):
            if self._stop.is_set():
                return None
        with self._ready:
            if self._stop.is_set() or self._next >= len(self._jobs):
                self._slots.release()
                return None
            number, self._next = self._next, self._next + 1
            out: queue.Queue[Any] = queue.Queue(maxsize=self._ahead)
            self._queues[number] = out
            self._ready.notify_all()
        return number, out

    def _put(self, out: queue.Queue[Any], item: Any) -> None:
        while True:
            if self._stop.is_set():
                raise _Stopped
            try:
                out.put(item, timeout=WAIT)
                return
            except queue.Full:
                continue

    def _decode(self, container: Any, stream: Any, job: Job, out: queue.Queue[Any]) -> None:
        """Put ``job``'s wanted frames into ``out``, each once and ascending, a frame the
        decoder could not give as :class:`Corrupt` in its place (the decoder gives frames
        in presentation order: one wanted frame not out before a later one never comes)."""
        want = {int(self._pts[w]): w for w in job.wanted}
        order = sorted(want.values())
        told = 0  # the wanted frames before order[told] are given or reported
        why: dict[int, str] = {}  # the wanted frames whose packets failed to decode
        context = stream.codec_context
        decoded = 0

        def settle(until: float) -> None:
            nonlocal told
            while told < len(order) and order[told] < until:
                missing = order[told]
                self._put(out, Corrupt(missing, why.get(missing, "the decoder gave no frame")))
                told += 1

        def give(frames: list[av.VideoFrame]) -> None:
            nonlocal decoded, told
            for frame in frames:
                decoded += 1
                index = want.get(frame.pts) if frame.pts is not None else None
                if index is None or told >= len(order) or index < order[told]:
                    continue  # not wanted, or given already
                settle(index)
                self._put(out, Corrupt(index, "the decoder flagged it corrupt")
                          if frame.is_corrupt else (index, frame))  # fmt: skip
                told += 1

        key_pts = None if job.key < 0 else int(self._pts[job.key])
        for packet in self._seek(container, stream, key_pts, set(want)):
            context.skip_frame = "DEFAULT" if packet.pts in want else "NONREF"
            try:
                give(packet.decode())
            except av.FFmpegError as exc:
                if packet.pts is not None and packet.pts in want:
                    why[want[packet.pts]] = str(exc)
        context.skip_frame = "DEFAULT"
        with contextlib.suppress(av.FFmpegError):  # drain: the frames still held come out
            give(context.decode(None))
        with self._lock:
            self.decoded += decoded
        settle(float("inf"))

    def _seek(
        self, container: Any, stream: Any, key_pts: int | None, wanted: set[int]
    ) -> Iterator[Any]:
        """The packets from the key frame (or from the first, where the seek landed past
        it) until each of ``wanted`` is sent."""
        if key_pts is not None:
            container.seek(key_pts, stream=stream, backward=True)
        else:
            container.seek(0, backward=True)
        left = set(wanted)
        first = True
        for packet in container.demux(stream):
            if packet.size == 0:
                return
            if first and key_pts is not None and (packet.pts is None or packet.pts > key_pts):
                with self._lock:
                    self.from_top += 1
                yield from self._seek(container, stream, None, wanted)
                return
            first = False
            yield packet
            left.discard(packet.pts)
            if not left:
                return


class _Stopped(Exception):
    """The reader closed the decoder: the worker ends."""
