"""``LiveMonitor``: a running pipeline's figures for the page, frames/s included.

Pass one to ``Pipeline.run(monitor=...)`` (or get one with
:func:`~hyperframes.viewer.start_live_view`, which also serves the page). The page polls
:meth:`LiveMonitor.view` about once a second: per stage frames, frames/s over the last
few seconds, busy share, queue depth; pool slots in use; and the stages' own figures
(grouping, reuse counts). After the run the final report stays on show.

Example:
    >>> monitor = LiveMonitor()
    >>> monitor.view()["state"]
    'idle'
    >>> Pipeline.from_source(src).map(f).to(sink).run(monitor=monitor)  # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..engine.report import RunReport

Snapshot = Callable[[], dict[str, Any]]
WINDOW_S = 5.0
"""Frames/s are measured over about this many recent seconds."""


def stage_frames(snapshot: dict[str, Any]) -> dict[str, int]:
    """Frames done per stage in ``snapshot``, plus ``"(delivered)"`` for the sink."""
    counts = {str(s["name"]): int(s["frames"]) for s in snapshot.get("stages", ())}
    counts["(delivered)"] = int(snapshot.get("frames", 0))
    return counts


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
    """A :class:`~hyperframes.engine.runner.Monitor` that keeps figures for the live page.

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
        self._snapshot: Snapshot | None = None
        self._history: deque[tuple[float, dict[str, int]]] = deque()
        self._report: dict[str, Any] | None = None
        self._state = "idle"
        self._runs = 0
        self._closer: Callable[[], None] | None = None
        self.url: str | None = None

    def start(self, snapshot: Snapshot) -> None:
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
        ``run`` (the snapshot with ``rates`` and per-stage ``fps`` and ``busy_share``) while
        running, or ``report`` after it."""
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
        elapsed = float(now.get("elapsed_s", 0.0)) or 1e-9
        for stage in now.get("stages", ()):
            stage["fps"] = round(fps.get(str(stage["name"]), 0.0), 2)
            workers = max(int(stage.get("workers", 1)), 1)
            stage["busy_share"] = round(float(stage.get("busy_s", 0.0)) / (elapsed * workers), 4)
        now["fps"] = round(fps.get("(delivered)", 0.0), 2)
        out["run"] = now
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
