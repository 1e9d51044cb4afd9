"""Which frames of a video a source gives: every ``K``-th, the key frames, one per ``1/R``
seconds, the frames played at given times, or ``N`` spread evenly (:class:`Sampling`).

A sampling picks frame indices from the frames' timestamps alone (:meth:`Sampling.pick`),
before anything is decoded, so the decoder can skip what is not wanted
(:mod:`~hyperframes.io.sparse`). Times are the frames' own (``meta["pts"]``, a results
file's ``time``), compared exactly (as fractions of the stream's time base), so a time
written as ``1.2`` names the frame stamped 1.2 s, not the one before it.

The frame *played at* a time ``t`` is the last frame stamped at or before ``t``, as
torchcodec defines it; the last frame is played for as long as the one before it. Where
timestamps restart part-way (joined MPEG-TS files) it is the last such frame in the file.

Example:
    >>> Sampling.of(fps=2).describe(), Sampling.of(at=[0.5, 0.25]).describe()
    ('2 a second', '2 times')
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .positions import seconds_of


def exact(value: float | str | Fraction) -> Fraction:
    """``value`` as the number it is written as: ``1.2`` is 6/5, not the binary float
    just below it."""
    if isinstance(value, Fraction):
        return value
    return Fraction(str(value).strip())  # (str of a float, numpy's too: its shortest digits)


@dataclass(frozen=True)
class Timeline:
    """The frames' timestamps, in frame order, as far as a sampling needs them.

    Attributes:
        pts: frame ``i``'s timestamp in ``time_base`` units (ascending, unless the
            timestamps restart part-way).
        time_base: seconds per unit.
        keyframes: indices of the key frames (``None``: not known).
    """

    pts: np.ndarray
    time_base: Fraction
    keyframes: np.ndarray | None = None

    def end(self) -> int:
        """Where the last frame stops being played: the frame before it lasted as long."""
        pts = self.pts
        last = len(pts) - 1
        return int(pts[last]) + (int(pts[last] - pts[last - 1]) if last > 0 else 1)

    def seconds(self, units: int) -> float:
        return float(units * self.time_base)

    def played_at(self, thresholds: np.ndarray) -> np.ndarray:
        """For each threshold (``time_base`` units), the last frame stamped at or before
        it (-1: none is)."""
        order = np.argsort(self.pts, kind="stable")
        latest = np.maximum.accumulate(order)  # the last frame among the earliest-stamped
        found = np.searchsorted(self.pts[order], thresholds, side="right") - 1
        return np.where(found >= 0, latest[np.maximum(found, 0)], -1)

    def units(self, seconds: Fraction) -> int:
        """The last whole timestamp at or before ``seconds``."""
        return math.floor(seconds / self.time_base)


@dataclass(frozen=True)
class Sampling:
    """Which frames to give; at most one way is chosen (:meth:`of` checks).

    Attributes:
        every: every ``every``-th frame from the start.
        keyframes: the key frames.
        fps: one frame per ``1 / fps`` seconds from the start's time: the frame played
            at each instant (a frame shown longer comes more than once).
        at: the frames played at these times (seconds), in this order, repeats kept.
        num_frames: this many frames spread evenly over the range, by index (all of them
            where the range is shorter).
    """

    every: int = 1
    keyframes: bool = False
    fps: Fraction | None = None
    at: tuple[Fraction, ...] | None = None
    num_frames: int | None = None

    @classmethod
    def of(
        cls,
        *,
        step: int = 1,
        keyframes: bool = False,
        fps: float | str | Fraction | None = None,
        at: Iterable[float | str | Fraction] | None = None,
        num_frames: int | None = None,
    ) -> Sampling:
        """Check and hold the choices a source was given.

        Raises:
            ValueError: more than one way, or a value out of range (one line each).
        """
        chosen = [name for name, given in (("step", step != 1), ("keyframes", keyframes),
                  ("fps", fps is not None), ("at", at is not None),
                  ("num_frames", num_frames is not None)) if given]  # fmt: skip
        if len(chosen) > 1:
            raise ValueError(f"{' and '.join(chosen)} each choose the frames; pass one of them")
        if int(step) < 1:
            raise ValueError(f"step must be 1 or more, got {step}")
        rate = None
        if fps is not None:
            try:
                rate = exact(fps)
            except (ValueError, ZeroDivisionError):
                rate = Fraction(-1)
            if rate <= 0:
                raise ValueError(f"fps must be a positive number of frames a second, got {fps!r}")
        times = None
        if at is not None:
            times = tuple(_time(t) for t in at)
            if not times:
                raise ValueError("at= names no times; give at least one (seconds)")
        if num_frames is not None and (isinstance(num_frames, bool) or int(num_frames) < 1):
            raise ValueError(f"num_frames must be 1 or more, got {num_frames!r}")
        count = None if num_frames is None else int(num_frames)
        return cls(int(step), bool(keyframes), rate, times, count)

    @property
    def sparse(self) -> bool:
        """Whether frames are left out (else every frame of the range is given)."""
        return self != Sampling()

    @property
    def numbers_samples(self) -> bool:
        """Whether a frame can come more than once or out of order (``fps``, ``at``): a
        source then numbers its samples and gives frame indices in ``input_frame``."""
        return self.fps is not None or self.at is not None

    def describe(self) -> str:
        if self.keyframes:
            return "key frames"
        if self.fps is not None:
            return f"{float(self.fps):g} a second"
        if self.at is not None:
            return f"{len(self.at)} times"
        if self.num_frames is not None:
            return f"{self.num_frames} spread evenly"
        return "every frame" if self.every == 1 else f"every {self.every}th frame"

    def pick(self, timeline: Timeline, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The indices of the frames to give, in the order to give them.

        Raises:
            ValueError: a time of ``at`` outside the frames (one line, with their span).
        """
        total = len(timeline.pts)
        stop = total if stop is None else min(stop, total)
        if start >= stop:
            return np.zeros(0, dtype=np.int64)
        if self.keyframes:
            keys = timeline.keyframes
            if keys is None:
                raise ValueError("the key frames are not known")
            return keys[(keys >= start) & (keys < stop)].astype(np.int64)
        if self.num_frames is not None:
            if self.num_frames >= stop - start:
                return np.arange(start, stop, dtype=np.int64)
            spread = np.linspace(start, stop - 1, self.num_frames)
            return np.floor(spread + 0.5).astype(np.int64)
        if self.fps is not None:
            return self._by_rate(timeline, start, stop)
        if self.at is not None:
            return self._at_times(timeline)
        return np.arange(start, stop, self.every, dtype=np.int64)

    def instants(self, timeline: Timeline, start: int = 0, stop: int | None = None) -> np.ndarray:
        """With ``fps`` or ``at``, the time each pick was asked for (seconds, in
        :meth:`pick`'s order); else empty."""
        if self.at is not None:
            return np.array([float(t) for t in self.at])
        if self.fps is None:
            return np.zeros(0)
        stop = len(timeline.pts) if stop is None else min(stop, len(timeline.pts))
        count = len(self._instants(timeline, start, stop))
        first = float(int(timeline.pts[start]) * timeline.time_base)
        return first + np.arange(count) / float(self.fps)

    def _instants(self, timeline: Timeline, start: int, stop: int) -> np.ndarray:
        """The ``fps`` instants from ``start``'s time to the end of ``stop - 1``, each as
        the last whole timestamp at or before it."""
        assert self.fps is not None
        pts = timeline.pts
        first = int(pts[start])
        end = int(pts[stop]) if stop < len(pts) else timeline.end()
        # instant k is at first + k * step units; counted exactly in whole units
        step = 1 / (self.fps * timeline.time_base)
        count = max(math.ceil((end - first) / step), 1)
        if (count + 1) * step.numerator < 2**62:  # k * step, floored, in whole numbers
            ks = np.arange(count, dtype=np.int64)
            thresholds = first + ks * step.numerator // step.denominator
        else:
            thresholds = np.array([first + math.floor(k * step) for k in range(count)])
        return thresholds

    def _by_rate(self, timeline: Timeline, start: int, stop: int) -> np.ndarray:
        picked = timeline.played_at(self._instants(timeline, start, stop))
        return picked.astype(np.int64)

    def _at_times(self, timeline: Timeline) -> np.ndarray:
        assert self.at is not None
        base = timeline.time_base
        lowest, end = int(timeline.pts.min()), timeline.end()
        thresholds = np.array([timeline.units(t) for t in self.at], dtype=np.int64)
        outside = [t for t, u in zip(self.at, thresholds, strict=True) if u < lowest or u >= end]
        if outside:
            raise ValueError(
                f"time {float(outside[0]):g}s is outside the video's frames, played from "
                f"{float(lowest * base):.3f}s to {float(end * base):.3f}s"
                + (f" ({len(outside)} times are)" if len(outside) > 1 else "")
                + "; give times within that span"
            )
        return timeline.played_at(thresholds).astype(np.int64)


def _time(value: float | str | Fraction) -> Fraction:
    """Seconds, from a number or from text (``12.5``, ``12.5s``, ``[HH:]MM:SS.mmm``)."""
    try:
        t = seconds_of(value) if isinstance(value, str) else exact(value)
    except (ValueError, ZeroDivisionError, TypeError):
        raise ValueError(f"at= takes times in seconds, got {value!r}") from None
    if t < 0:
        raise ValueError(f"at= takes times from 0, got {value!r}")
    return t


def read_times(lines: Sequence[str], where: str) -> list[Fraction]:
    """Times in seconds, one a line (blank lines and ``#`` comments skipped), as an
    ``--at`` file holds them.

    Raises:
        ValueError: a line that is not a time, named by its number.
    """
    times = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            times.append(_time(text))
        except ValueError:
            raise ValueError(
                f"{where} line {number}: expected a time in seconds (12.5) or "
                f"[HH:]MM:SS.mmm, got {text!r}"
            ) from None
    if not times:
        raise ValueError(f"{where} holds no times; write one time in seconds a line")
    return times


def times_of(value: object, where: str) -> list[Fraction]:
    """A manifest row's ``at``: a list of times, or text of times split by spaces, commas
    or semicolons (``"1.5 7 12.25"``).

    Raises:
        ValueError: a value that is not a time, naming the input.
    """
    items: list[Any]
    if isinstance(value, str):
        items = value.replace(",", " ").replace(";", " ").split()
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        items = [value]
    try:
        times = [_time(item) for item in items]
    except ValueError as exc:
        raise ValueError(f"{where}: the manifest's at column: {exc}") from None
    if not times:
        raise ValueError(f"{where}: the manifest's at column names no times; give some or "
                         "leave the row out")  # fmt: skip
    return times
