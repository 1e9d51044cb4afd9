"""``LiveMonitor``: a running pipeline's figures for the page, frames/s included.

Pass one to ``Pipeline.run(monitor=...)`` (or get one with
:func:`~hyperframes.viewer.start_live_view`, which also serves the page). The page polls
:meth:`LiveMonitor.view` about once a second: per stage frames, frames/s over the last
few seconds, busy share, queue depth; pool slots in use; and the stages' own figures
(grouping, reuse counts, a stage's recent PSNR) and the source's (a store's cache
tiers). After the run the final report stays on show.

Example:
    >>> monitor = LiveMonitor()
    >>> monitor.view()["state"]
    'idle'
    >>> Pipeline.from_source(src).map(f).to(sink).run(monitor=monitor)  # doctest: +SKIP
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..engine.report import RunReport
from ..engine.watch import RunSnapshot, SnapshotFn

WINDOW_S = 5.0
"""Frames/s are measured over about this many recent seconds."""


def stage_frames(snapshot: RunSnapshot) -> dict[str, int]:
    """Frames done per stage in ``snapshot``, plus ``"(delivered)"`` for the sink."""
    counts = {s.name: s.frames for s in snapshot.stages}
    counts["(delivered)"] = snapshot.frames
    return counts


def shown_figures(snapshot: RunSnapshot) -> dict[str, dict[str, Any]]:
    """The figures the page lists under the stage tables: each stage's own (``extra``),
    with its recent PSNR where it measures one, and the source's cache tiers as
    ``"source"`` (``hot_hits``, ``hot_misses``, ``hot_bytes``, ...)."""
    shown = {stage: dict(figures) for stage, figures in snapshot.extra.items()}
    for stage in snapshot.stages:
        if stage.quality is not None:
            psnr = stage.quality.psnr_db
            shown.setdefault(stage.name, {})["psnr_db_recent"] = (
                round(psnr, 3) if math.isfinite(psnr) else "exact"
            )
    source = {
        f"{tier.tier}_{what}": getattr(tier, what)
        for tier in snapshot.source_figures.cache
        for what in ("hits", "misses", "bytes")
    }
    source.update(snapshot.source_figures.numbers)
    if source:
        shown["source"] = source
    return shown


def rates(history: Sequence[tuple[float, dict[str, int]]]) -> dict[str, float]:
    """Frames/s per stage between the oldest and the newest ``(time, frames)`` points.

    Fewer than two points, or no time between them, gives no rates.
    """
    if len(history) < 2:
        return {}
    (t0, first), (t1, last) = history[0], history[-1]
    span = t1 - t0
    if span <= 0:
        return {}
    return {name: (count - first.get(name, 0)) / span for name, count in last.items()}


class LiveMonitor:
    """A :class:`~hyperframes.engine.watch.Monitor` that keeps figures for the live page.

    Thread-safe: the run calls :meth:`start` and :meth:`stop`; the server calls
    :meth:`view` from its own threads. One monitor may watch several runs in turn.

    Args:
        window_s: the span frames/s are measured over.
        clock: the time source (seconds), replaceable in tests.
    """

    def __init__(
        self, *, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot: SnapshotFn | None = None
        self._history: deque[tuple[float, dict[str, int]]] = deque()
        self._report: dict[str, Any] | None = None
        self._state = "idle"
        self._runs = 0
        self._closer: Callable[[], None] | None = None
        self.url: str | None = None

    def start(self, snapshot: SnapshotFn) -> None:
        with self._lock:
            self._snapshot = snapshot
            self._history.clear()
            self._report = None
            self._state = "running"
            self._runs += 1

    def stop(self, report: RunReport | None) -> None:
        with self._lock:
            self._snapshot = None
            self._report = report.to_dict() if report is not None else None
            self._state = "finished" if report is not None else "failed"

    def view(self) -> dict[str, Any]:
        """JSON-ready figures: ``state`` (idle, running, finished, failed), ``runs``, and
        ``run`` while running, or ``report`` after it. ``run`` is the snapshot's
        ``to_dict()`` with ``fps`` added to it and to each stage (over the last
        ``window_s``), each stage's ``busy_share``, and ``extra`` as
        :func:`shown_figures` gives it."""
        with self._lock:
            snapshot, state = self._snapshot, self._state
            out: dict[str, Any] = {"state": state, "runs": self._runs, "report": self._report}
            if snapshot is None:
                return out
            now = snapshot()
            t = self._clock()
            self._history.append((t, stage_frames(now)))
            while len(self._history) > 2 and t - self._history[1][0] >= self.window_s:
                self._history.popleft()
            fps = rates(self._history)
        run = now.to_dict()
        elapsed = now.elapsed_s or 1e-9
        for stage, row in zip(now.stages, run["stages"], strict=True):
            row["fps"] = round(fps.get(stage.name, 0.0), 2)
            row["busy_share"] = round(stage.busy_s / (elapsed * max(stage.workers, 1)), 4)
        run["fps"] = round(fps.get("(delivered)", 0.0), 2)
        run["extra"] = shown_figures(now)
        out["run"] = run
        return out

    def attach(self, url: str, closer: Callable[[], None]) -> None:
        """Remember the page serving this monitor (set by :func:`start_live_view`)."""
        self.url, self._closer = url, closer

    def close(self) -> None:
        """Stop the page serving this monitor, if one was started for it."""
        closer, self._closer = self._closer, None
        if closer is not None:
            closer()

    def __repr__(self) -> str:
        return f"LiveMonitor(state={self._state!r}, runs={self._runs}, url={self.url!r})"
