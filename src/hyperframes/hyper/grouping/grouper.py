"""Streaming grouping of adjacent, similar frames into hyperframes.

A :class:`Grouper` takes frames one at a time (or in batches of any size) and
returns each group, a half-open :class:`Span` of frame indices, as soon as it
can no longer change. It keeps one reference frame (the previous frame, or the
group's first frame under the ``"drift"`` rule) and a few integers: memory does
not grow with the group or the sequence.

The rules, in order:

1. A *run* grows while the distance (:func:`~hyperframes.hyper.distance.frame_mse`,
   pixels in 0..1) stays below ``threshold`` and the run is shorter than
   ``max_len``. ``"adjacent"`` compares each frame with the one before it;
   ``"drift"`` compares it with the run's first frame.
2. A run shorter than ``min_len`` joins a neighbour: the one across the smaller
   cut distance, unless that would make a group longer than ``max_len``; then
   the other one. Joining the next run means not cutting, so the next run
   counts the short frames towards its own ``max_len``. The last run of a
   sequence can only join the one before; when that does not fit it stays
   short. No group is ever longer than ``max_len``.

The decisions depend only on the frames, in order, so the groups are the same
whatever batch boundaries the frames arrive in.

Example:
    >>> grouper = Grouper(threshold=1e-3, min_len=2, max_len=60)
    >>> spans = [*grouper.push_many(frames), *grouper.finish()]

Longer than 300 lines: the grouping rules and the streaming grouper that applies them
are one algorithm; split, each half would need the other to be read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from ...errors import FrameError
from ..distance import DistanceKind, check_finite, frame_mse, luma_proxy, peak_of

Rule = Literal["adjacent", "drift"]

DEFAULT_THRESHOLD = 1e-3
DEFAULT_MIN_LEN = 2
DEFAULT_MAX_LEN = 60


class Span(NamedTuple):
    """The half-open range ``[start, stop)`` of frame indices of one group."""

    start: int
    stop: int

    @property
    def length(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class GroupingOptions:
    """Validated grouping settings (see the module docstring for their meaning).

    Raises:
        ValueError: ``threshold`` not in (0, 1], lengths not ``1 <= min_len <= max_len``,
            or an unknown ``rule`` or ``distance``.
    """

    threshold: float = DEFAULT_THRESHOLD
    min_len: int = DEFAULT_MIN_LEN
    max_len: int = DEFAULT_MAX_LEN
    rule: Rule = "adjacent"
    distance: DistanceKind = "exact"

    def recorded(self) -> dict[str, Any]:
        """The options as a store records them (``rule`` and ``distance`` only when they are
        not the defaults, so stores packed before they existed compare equal)."""
        out: dict[str, Any] = {
            "threshold": self.threshold, "min_len": self.min_len, "max_len": self.max_len,
        }  # fmt: skip
        if self.rule != "adjacent":
            out["rule"] = self.rule
        if self.distance != "exact":
            out["distance"] = self.distance
        return out

    def __post_init__(self) -> None:
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float | np.floating | np.integer):
            raise ValueError(f"threshold must be a number in (0, 1], got {t!r}")
        if not (math.isfinite(float(t)) and 0.0 < float(t) <= 1.0):
            raise ValueError(
                f"threshold must be in (0, 1] (an MSE of pixels in 0..1), got {t!r}; "
                f"try {DEFAULT_THRESHOLD:g}"
            )
        for name in ("min_len", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(
                "min_len and max_len must satisfy 1 <= min_len <= max_len, "
                f"got min_len={self.min_len}, max_len={self.max_len}"
            )
        if self.rule not in ("adjacent", "drift"):
            raise ValueError(f"rule must be 'adjacent' or 'drift', got {self.rule!r}")
        if self.distance not in ("exact", "luma"):
            raise ValueError(f"distance must be 'exact' or 'luma', got {self.distance!r}")
        object.__setattr__(self, "threshold", float(t))
        object.__setattr__(self, "min_len", int(self.min_len))
        object.__setattr__(self, "max_len", int(self.max_len))


class Grouper:
    """Cuts a stream of frames into groups; see the module docstring for the rules.

    Args:
        threshold: largest distance (MSE, pixels in 0..1) that keeps a run growing.
        min_len: runs shorter than this join a neighbour.
        max_len: no group is longer than this.
        rule: ``"adjacent"`` (distance to the previous frame) or ``"drift"``
            (distance to the run's first frame).
        distance: ``"exact"`` (default) or ``"luma"``, a cheaper proxy.

    Raises:
        ValueError: bad options (see :class:`GroupingOptions`).
    """

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        min_len: int = DEFAULT_MIN_LEN,
        max_len: int = DEFAULT_MAX_LEN,
        rule: Rule = "adjacent",
        distance: DistanceKind = "exact",
    ) -> None:
        self.options = GroupingOptions(threshold, min_len, max_len, rule, distance)
        self._count = 0
        self._shape: tuple[int, ...] = ()
        self._dtype: np.dtype | None = None
        self._ref: np.ndarray | None = None
        self._run_start = 0
        self._left_cut = math.inf  # cut distance at the current run's start
        self._pending: Span | None = None  # closed, but a short run may still join it
        self._finished = False
        self.last_distance = math.nan
        """The distance the last pushed frame was judged by (NaN for the first frame)."""

    @property
    def frames_seen(self) -> int:
        return self._count

    def push(self, frame: np.ndarray) -> list[Span]:
        """Take the next frame; return the groups this closed (often none).

        Raises:
            FrameError: the frame's shape or dtype differs from the first frame's, its dtype
                is not supported, or a float frame holds NaN or infinity. The message names
                the frame index.
            RuntimeError: called after :meth:`finish`.
        """
        if self._finished:
            raise RuntimeError("this Grouper has finished; make a new one for a new sequence")
        index = self._count
        feature = self._feature(frame, index)
        if self._ref is None:
            self._ref = feature
            self._count += 1
            self.last_distance = math.nan
            return []
        spans, move_ref = self._advance(frame_mse(self._ref, feature))
        if move_ref:
            np.copyto(self._ref, feature)
        return spans

    def push_distance(self, distance: float) -> list[Span]:
        """Take the next frame by its distance to the previous frame (``rule="adjacent"``).

        For callers that compute adjacent distances themselves, in bulk and without copying
        frames (the grouping stage does); ``distance`` is ignored for the first frame. The
        groups are the same as :meth:`push` on the frames would give.
        """
        if self.options.rule != "adjacent":
            raise ValueError("push_distance() works with rule='adjacent' only; use push()")
        if self._finished:
            raise RuntimeError("this Grouper has finished; make a new one for a new sequence")
        if self._count == 0:
            self._count = 1
            self.last_distance = math.nan
            return []
        return self._advance(float(distance))[0]

    def _advance(self, dist: float) -> tuple[list[Span], bool]:
        """Decide on the next frame at ``dist``: (groups now final, whether the reference
        frame becomes this frame)."""
        index = self._count
        self._count += 1
        self.last_distance = dist
        opts = self.options
        if dist < opts.threshold and index - self._run_start < opts.max_len:
            move = opts.rule == "adjacent"
            if self._pending is not None and index + 1 - self._run_start >= opts.min_len:
                done, self._pending = self._pending, None  # this run will not join it
                return [done], move
            return [], move
        out, joined_next = self._close(Span(self._run_start, index), dist, at_end=False)
        if not joined_next:
            self._run_start = index
            self._left_cut = dist
        return out, opts.rule == "adjacent" or not joined_next

    def push_many(self, frames: Iterable[np.ndarray]) -> list[Span]:
        """Take several frames (an ``(n, *shape)`` array or any iterable of frames)."""
        out: list[Span] = []
        for frame in frames:
            out.extend(self.push(frame))
        return out

    def finish(self) -> list[Span]:
        """End the sequence and return the groups still open."""
        if self._finished:
            return []
        self._finished = True
        if self._count == 0:
            return []
        out, _ = self._close(Span(self._run_start, self._count), math.inf, at_end=True)
        if self._pending is not None:
            out.append(self._pending)
            self._pending = None
        self._ref = None
        return out

    def _close(self, run: Span, right_cut: float, *, at_end: bool) -> tuple[list[Span], bool]:
        """Settle a run that just ended; returns (groups now final, whether it joins the next)."""
        opts = self.options
        pending = self._pending
        if run.length >= opts.min_len:
            self._pending = run if run.length < opts.max_len else None
            done = [pending] if pending is not None else []
            return (done if self._pending is not None else [*done, run]), False
        fits_before = pending is not None and pending.length + run.length <= opts.max_len
        if fits_before and (at_end or self._left_cut <= right_cut):
            assert pending is not None
            self._pending = Span(pending.start, run.stop)
            return [], False
        if not at_end:
            return [], True  # no cut: the next run starts with these frames
        self._pending = run
        return ([pending] if pending is not None else []), False

    def _feature(self, frame: np.ndarray, index: int) -> np.ndarray:
        if not isinstance(frame, np.ndarray):
            raise FrameError(f"frame {index} is a {type(frame).__name__}, not a numpy array")
        if self._dtype is None:
            try:
                peak_of(frame.dtype)
            except FrameError as exc:
                raise FrameError(f"frame {index}: {exc}") from None
            if frame.size == 0:
                raise FrameError(f"frame {index} is empty (shape {frame.shape})")
            self._shape, self._dtype = frame.shape, frame.dtype
        elif frame.shape != self._shape or frame.dtype != self._dtype:
            raise FrameError(
                f"frame {index} is {frame.shape} {frame.dtype} but the sequence started with "
                f"{self._shape} {self._dtype}; every frame of a sequence must match"
            )
        check_finite(frame, name=f"frame {index}")
        if self.options.distance == "luma":
            return luma_proxy(frame)
        return np.array(frame, copy=True) if self._ref is None else frame

    def __repr__(self) -> str:
        o = self.options
        return (
            f"Grouper(threshold={o.threshold:g}, min_len={o.min_len}, max_len={o.max_len}, "
            f"rule={o.rule!r}, distance={o.distance!r}, frames_seen={self._count})"
        )


def group_frames(
    frames: Iterable[np.ndarray],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_len: int = DEFAULT_MIN_LEN,
    max_len: int = DEFAULT_MAX_LEN,
    rule: Rule = "adjacent",
    distance: DistanceKind = "exact",
) -> list[Span]:
    """Group a whole sequence; returns the spans in order, covering every frame once.

    Args:
        frames: an ``(n, *shape)`` array or any iterable of frames.
        threshold: see :class:`Grouper`.
        min_len: see :class:`Grouper`.
        max_len: see :class:`Grouper`.
        rule: see :class:`Grouper`.
        distance: see :class:`Grouper`.

    Raises:
        ValueError: bad options.
        FrameError: a bad frame (named by index).
    """
    grouper = Grouper(
        threshold=threshold, min_len=min_len, max_len=max_len, rule=rule, distance=distance
    )
    return [*grouper.push_many(frames), *grouper.finish()]
