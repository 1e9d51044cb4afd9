"""The sampled size estimate of ``analyze``: what the hyperframe codec would store, measured
on a few small windows of frames instead of whole hyperframes.

A window is up to :data:`WINDOW` consecutive frames of one hyperframe (the whole hyperframe
when it is that short), cropped to one horizontal strip of rows when frames are large (the
codec codes bands of rows on their own too: four quarter-height strips encode to within
0.6 % of the whole frames on the test clips). It is encoded once, as a hyperframe, and its
parts are read from the header: the base (a frame stored whole, as zstd per frame would
store every frame) and the deltas. A hyperframe of ``n`` frames is then estimated as one
base and ``n - 1`` deltas against ``n`` bases; on the test clips this lands within a few
points of encoding every hyperframe both ways. Windows start at frame positions spread
evenly over the sequence (so a black intro or one scene cannot stand for the whole), take
the strips in turn, and are encoded on a thread of their own; the estimate averages the
windows' bytes per frame.

What it costs is bounded before the run starts (:func:`plan_samples`), by bytes: the windows
hold at most ``max(MIN_BYTES, SHARE * the frames' bytes)`` and there are at most ``samples``
of them. Encoding a 720p frame costs about as much as decoding 5-10 of them, so the share is
small (``benchmarks/analyze.py`` measures the whole).

Example:
    >>> plan = plan_samples(720, FrameSpec((720, 1280, 3)), samples=12)
    >>> plan.strips, plan.budget, plan.starts[:3]
    (5, 28, (51, 154, 257))
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .frames import FrameSpec
from .hyper.codec.coder import encode_group
from .hyper.codec.group_header import parse_header

WINDOW = 4
"""Frames per window: one stored whole and three deltas, from one hyperframe."""
MIN_BYTES = 16 << 20
"""Every estimate may encode this many bytes of frames (about 6 frames of 720p RGB)..."""
SHARE = 0.005
"""...or this share of the frames' bytes, if that is more."""
STRIP_BYTES = 512 << 10
"""Frames are cut into strips of rows of at least this many bytes (one strip per window)..."""
MAX_STRIPS = 16
"""...and at most this many."""


class WindowSizes(NamedTuple):
    """What one window encoded as a hyperframe came to."""

    header: int
    """Bytes before the records (the header names every frame's record)."""
    records: tuple[int, ...]
    """Bytes of each frame's record: the base stored whole, the others deltas (or copies)."""
    base: int
    """The index of the frame stored whole."""


def measure_window(frames: np.ndarray) -> WindowSizes:
    """Encode ``frames`` as one hyperframe (lossless, the codec's defaults) and read the
    sizes of its parts from the header."""
    data = encode_group(frames).data
    head = parse_header(data)
    return WindowSizes(head.payload_start, tuple(r.length for r in head.records), head.base)


Measure = Callable[[np.ndarray], WindowSizes]


@dataclass(frozen=True)
class SamplePlan:
    """Where windows start, which rows they take and how much they may encode, fixed before
    the run.

    Attributes:
        samples: the most windows (one per sampled hyperframe).
        strips: the horizontal strips of rows a frame is cut into; window ``i`` takes strip
            ``i % strips``.
        rows: the frames' rows.
        budget: the most strip-frames encoded, so at most ``budget / strips`` frames'
            bytes.
        starts: the frame positions windows start at, or after (a known length); empty for
            an input of unknown length, whose windows start as its frames allow
            (:meth:`start`).
        length: the input's frames, if known.
        piece_bytes: the bytes of one strip of one frame.
        frame_bytes: the bytes of one frame.
    """

    samples: int
    strips: int
    rows: int
    budget: int
    starts: tuple[int, ...] = ()
    length: int | None = None
    piece_bytes: int = 0
    frame_bytes: int = 0

    def start(self, taken: int) -> int | None:
        """The position the window after ``taken`` windows starts at, or after; ``None``
        when no more windows are taken."""
        if self.length is not None:
            return self.starts[taken] if taken < len(self.starts) else None
        need = (taken + 1) * WINDOW
        if taken >= self.samples or need > self.budget:
            return None
        spent = need * self.piece_bytes  # unknown length: MIN_BYTES at once, then the share
        return 0 if spent <= MIN_BYTES else math.ceil(spent / (SHARE * self.frame_bytes))

    def strip(self, window: int) -> slice:
        """The rows window number ``window`` takes."""
        s = window % self.strips
        return slice(s * self.rows // self.strips, (s + 1) * self.rows // self.strips)


def plan_samples(length: int | None, spec: FrameSpec, *, samples: int) -> SamplePlan:
    """The windows of an estimate over ``length`` frames of ``spec`` (``None``: not known).

    Args:
        length: the input's frames, if known.
        spec: the frames' shape and dtype.
        samples: the most hyperframes to sample (0 turns the estimate off).

    Raises:
        ValueError: ``samples`` is negative.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"samples must be a whole number of at least 0, got {samples!r}")
    frame_bytes = max(1, spec.nbytes)
    rows = spec.shape[0] if spec.shape else 1
    strips = max(1, min(MAX_STRIPS, rows, frame_bytes // STRIP_BYTES))
    piece = math.ceil(frame_bytes / strips)
    cap = samples * WINDOW
    if length is None:
        return SamplePlan(samples, strips, rows, cap, (), None, piece, frame_bytes)
    allowed = max(MIN_BYTES, SHARE * length * frame_bytes)
    pieces = min(length * strips, int(allowed // piece))
    # windows never overlap: no more of them than WINDOW-frame stretches of the input
    most = min(samples, pieces // WINDOW, length // WINDOW)
    windows = max(1, most) if pieces and samples else 0
    budget = min(pieces, windows * WINDOW)
    last = max(0, length - WINDOW)  # a window from a later start might not fit
    starts = tuple(min(int((i + 0.5) * length / windows), last) for i in range(windows))
    return SamplePlan(samples, strips, rows, budget, starts, length, piece, frame_bytes)


PENDING = 2
"""Windows copied and waiting for the encoder thread at most; the sink waits beyond that."""


class SizeSampler:
    """Takes the tagged frames of a run in order; copies the planned windows and encodes them
    on one thread of its own, so the run's sink (and the decoding behind it) goes on.

    Call :meth:`finish` after the last frame, or :meth:`abandon` after a failure: both join
    the thread.

    Args:
        plan: from :func:`plan_samples`.
        measure: encodes a window (default :func:`measure_window`).
    """

    def __init__(self, plan: SamplePlan, measure: Measure | None = None) -> None:
        self.plan = plan
        self._measure = measure
        self._seen = 0
        self._next = plan.start(0)
        self._window: np.ndarray | None = None
        self._filled = 0
        self._length = 0  # the length of the window's hyperframe
        self._taken = 0
        self._started = 0
        self._rows = slice(None)
        self._thread: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[Future[WindowSizes], int, int]] = deque()
        self.windows = 0
        self.encoded_frames = 0
        """Frames encoded (each one strip of rows where ``plan.strips > 1``)."""
        self.encoded_bytes = 0
        self.hyperframe_frames = 0
        self.grouped = 0.0  # the sum over windows of bytes per frame of the hyperframe
        self.independent = 0.0
        self.raw = 0.0

    def feed(self, frames: np.ndarray, pos: np.ndarray, length: np.ndarray) -> None:
        """The next batch, with each frame's position in its hyperframe and that's length."""
        first, n = self._seen, len(frames)
        self._seen += n
        j = 0
        while j < n:
            if self._window is None:
                if self._next is None or self._next >= first + n:
                    return
                j = max(j, self._next - first)
                remaining = length[j:] - pos[j:]
                fits = np.flatnonzero(remaining >= np.minimum(WINDOW, length[j:]))
                if not len(fits):
                    return
                j += int(fits[0])
                size = int(min(WINDOW, remaining[int(fits[0])]))
                size = min(size, self.plan.budget - self._taken)
                self._rows = self.plan.strip(self._started)
                self._started += 1
                shape = frames[0, self._rows].shape
                self._window = np.empty((size, *shape), frames.dtype)
                self._filled, self._length = 0, int(length[j])
            take = min(len(self._window) - self._filled, n - j)
            self._window[self._filled : self._filled + take] = frames[j : j + take, self._rows]
            self._filled += take
            j += take
            if self._filled == len(self._window):
                self._submit(first + j)

    def finish(self) -> None:
        """Wait for the windows still being encoded (a window the input ended inside is
        left out), and join the thread.

        Raises:
            The encoder's exception, if it failed.
        """
        try:
            while self._pending:
                self._collect()
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Drop what is not encoded yet and join the thread."""
        for future, *_ in self._pending:
            future.cancel()
        self._pending.clear()
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None

    def _submit(self, end: int) -> None:
        window, self._window = self._window, None
        assert window is not None
        while len(self._pending) >= PENDING:
            self._collect()
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="hf-analyze-estimate")
        future = self._thread.submit(self._measure or measure_window, window)
        self._pending.append((future, self._length, window[0].nbytes))
        self._taken += len(window)
        start = self.plan.start(self._started)
        self._next = None if start is None else max(start, end)

    def _collect(self) -> None:
        future, total, frame_bytes = self._pending[0]
        sizes = future.result()  # the encoder's exception, re-raised
        self._pending.popleft()
        k, raw = len(sizes.records), sizes.records[sizes.base]
        others = [n for i, n in enumerate(sizes.records) if i != sizes.base]
        delta = sum(others) / len(others) if others else raw
        header = sizes.header * total / k  # the header names every frame
        self.grouped += (header + raw + (total - 1) * delta) / total
        self.independent += (header + total * raw) / total
        self.raw += frame_bytes
        self.windows += 1
        self.encoded_frames += k
        self.encoded_bytes += k * frame_bytes
        self.hyperframe_frames += total

    def summary(self) -> dict[str, Any]:
        """The estimate's figures (ratios ``None`` where nothing was encoded)."""
        saving = 0.0
        if self.independent:  # one division: exactly 0.1 when 10 % smaller, not 1 - 0.9
            saving = (self.independent - self.grouped) / self.independent
        strips = self.plan.strips
        seen = self._seen * self.plan.frame_bytes
        return {
            "method": (
                f"windows of up to {WINDOW} frames"
                + (f" and 1/{strips} of their rows" if strips > 1 else "")
                + " from hyperframes spread over the sequence, each encoded once as a "
                "hyperframe: its deltas give the hyperframe codec's size and its base (a frame "
                "stored whole) the size of zstd per frame, both extrapolated to the "
                "hyperframe's length"
            ),
            "sampled_hyperframes": self.windows,
            "sampled_frames": self.hyperframe_frames,
            "encoded_frames": self.encoded_frames,
            "strips": strips,
            "encoded_share": self.encoded_bytes / seen if seen else 0.0,
            "stored_ratio": self.grouped / self.raw if self.raw else None,
            "per_frame_zstd_ratio": self.independent / self.raw if self.raw else None,
            "saving_vs_per_frame": saving,
        }
