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

import sys
import time
from typing import TextIO

from ..engine.runner import Progress

WIDTH = 28


def format_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def render_line(p: Progress, label: str = "") -> str:
    """The text of the bar for one progress update (pure, for tests)."""
    head = f"{label} " if label else ""
    tail = f"{p.fps:7.1f} fr/s  bottleneck: {p.slowest_stage}"
    if p.note:
        tail += f"  {p.note}"
    if p.total:
        share = min(1.0, p.frames / p.total)
        filled = int(share * WIDTH)
        bar = "#" * filled + "-" * (WIDTH - filled)
        eta = format_eta((p.total - p.frames) / p.fps) if p.fps > 0 else "--:--"
        return f"{head}[{bar}] {p.frames}/{p.total} {share:4.0%}  {tail}  ETA {eta}"
    return f"{head}{p.frames} frames  {tail}"


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
        self.stream.write("\r\x1b[2K" + render_line(progress, self.label))
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the line so later output starts on a fresh one."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
