"""A one-line live progress bar for terminals.

It is a progress callback for ``Pipeline.run(progress=...)``: frames done and total,
frames/s, ETA and the stage that limits the run, redrawn at most ``hz`` times a second
on stderr. It draws nothing when stderr is not a terminal.

Example:
    >>> bar = ProgressBar(label="transcode")
    >>> report = pipeline.run(progress=bar)  # doctest: +SKIP
    >>> bar.finish()  # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from ..engine.watch import Progress

WIDTH = 28


def format_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def render_line(p: Progress, label: str = "", width: int | None = None) -> str:
    """The text of the bar for one progress update (pure, for tests).

    ``width``: the columns it may take; fields go, least useful first (the label, the
    bottleneck, the bar, the note, the rate), until it fits, and what still does not fit
    is cut, so a redraw never wraps onto a second line.
    """
    fields: list[tuple[int, str]] = []  # (rank: the higher, the sooner it goes; text)
    if label:
        fields.append((6, label))
    if p.total:
        share = min(1.0, p.frames / p.total)
        filled = int(share * WIDTH)
        fields.append((4, "[" + "#" * filled + "-" * (WIDTH - filled) + "]"))
        fields.append((0, f"{p.frames}/{p.total} {share:4.0%} "))
    else:
        fields.append((0, f"{p.frames} frames "))
    fields.append((2, f"{p.fps:7.1f} fr/s "))
    if p.slowest_stage:  # (none where the work is whole jobs, a file each)
        fields.append((5, f"bottleneck: {p.slowest_stage} "))
    if p.note:
        fields.append((3, f"{p.note} "))
    if p.total:
        eta = format_eta((p.total - p.frames) / p.fps) if p.fps > 0 else "--:--"
        fields.append((1, f"ETA {eta}"))
    line = _joined(fields)
    if width is None:
        return line
    room = max(1, width - 1)  # the last column would wrap on some terminals
    for rank in range(6, 0, -1):
        if len(line) <= room:
            break
        fields = [(r, text) for r, text in fields if r != rank]
        line = _joined(fields)
    return line[:room]


def _joined(fields: list[tuple[int, str]]) -> str:
    return " ".join(text for _, text in fields).rstrip()


class ProgressBar:
    """Draws :func:`render_line` on a terminal; silent elsewhere or when ``enabled=False``."""

    def __init__(
        self,
        *,
        label: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        hz: float = 8.0,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self._interval = 1.0 / hz
        self._last = 0.0
        self._drawn = False

    def __call__(self, progress: Progress) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        done = progress.total is not None and progress.frames >= progress.total
        if now - self._last < self._interval and not done:
            return
        self._last = now
        width = shutil.get_terminal_size().columns  # asked at each redraw: follows a resize
        self.stream.write("\r\x1b[2K" + render_line(progress, self.label, width))
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the line so later output starts on a fresh one."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
