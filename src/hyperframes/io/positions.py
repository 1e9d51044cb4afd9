"""Positions given as times, and the frames they name: ``--start 4.5s``, ``1:02.5``, or a
manifest's ``start``/``stop`` of ``"00:01:02.500"``. A time names the first frame shown at
or after it, by the frames' own timestamps (right on a variable frame rate); an image
sequence's frame ``n`` is shown at ``n / rate``.

Example:
    >>> parse_position("1:02.5"), parse_position("120")
    (62.5, 120)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction

from ..errors import MediaError

DEFAULT_RATE = Fraction(25)
"""An image sequence's frame rate when none is given (FFmpeg's image reader's)."""


class Seconds(float):
    """A position given as a time (``12.5s``, ``1:02.5``, ``00:01:02.500``), not a frame."""


def parse_position(text: str) -> int | Seconds:
    """A frame index (``"120"``) or a time: seconds (``"4.5s"``) or ``[HH:]MM:SS[.mmm]``.

    Raises:
        ValueError: neither, or a negative or endless one.
    """
    try:
        if text.endswith("s") or ":" in text:
            value: int | Seconds = Seconds(float(seconds_of(text)))
        else:
            value = int(text)
    except ValueError:
        raise ValueError(
            f"expected a frame index (120), seconds (4.5s) or [HH:]MM:SS.mmm, got {text!r}"
        ) from None
    if value < 0 or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"a position cannot be negative, got {text!r}")
    return value


def seconds_of(text: str) -> Fraction:
    """Seconds exactly as written (``1.2`` is 6/5): ``12.5``, ``12.5s`` or
    ``[HH:]MM:SS[.mmm]``.

    Raises:
        ValueError: none of these.
    """
    parts = text.strip().removesuffix("s").split(":")
    if len(parts) > 3:
        raise ValueError(f"more than hours, minutes and seconds: {text!r}")
    try:
        return sum((Fraction(p) * 60**k for k, p in enumerate(reversed(parts))), Fraction(0))
    except ZeroDivisionError:
        raise ValueError(f"not a time: {text!r}") from None


def frame_range(
    path: str | os.PathLike[str],
    start: int | Seconds,
    stop: int | Seconds | None,
    *,
    rate: Fraction | None = None,
    times: Callable[[], list[float]] | None = None,
) -> tuple[int, int | None]:
    """``start`` and ``stop`` as frame indices of the video at ``path`` (of an image
    sequence at ``rate``, when given; of frames whose ``times()`` are known, such as a
    store's); indices pass through, and a video is read only where a time needs it (its
    packets, not decoded).

    Raises:
        MediaError: the video's timestamps cannot number its frames.
        ValueError: ``start`` is a time past the last frame.
    """
    if not isinstance(start, Seconds) and not isinstance(stop, Seconds):
        return start, stop
    if rate is not None:
        return _at_rate(start, rate), None if stop is None else _at_rate(stop, rate)
    every = frame_times(path) if times is None else times()

    def index(at: int | Seconds) -> int:
        if not isinstance(at, Seconds):
            return at
        if at > every[-1] + 1e-6 and at is start:
            raise ValueError(
                f"start {at:g}s is past the last frame of {os.fspath(path)!r} "
                f"({every[-1]:.3f}s); pass an earlier time"
            )
        return next((k for k, t in enumerate(every) if t >= at - 1e-6), len(every))

    return index(start), None if stop is None else index(stop)


def frame_times(path: str | os.PathLike[str]) -> list[float]:
    """Every frame's time in seconds from the first, in presentation order (packets only).

    Raises:
        MediaError: the timestamps cannot number the frames.
    """
    import av  # (parsing a position needs neither PyAV nor a video)

    from .frame_table import scan

    with av.open(os.fspath(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        table = scan(container, stream)
    if table.untrusted is not None:
        raise MediaError(f"{os.fspath(path)!r}: {table.untrusted}")
    if not len(table.pts) or base is None:
        raise MediaError(f"{os.fspath(path)!r} has no timestamped video packets")
    pts = table.pts.tolist()
    return sorted(float((p - pts[0]) * Fraction(base)) for p in pts)


def _at_rate(at: int | Seconds, rate: Fraction) -> int:
    return math.ceil(float(at) * rate - 1e-9) if isinstance(at, Seconds) else at
