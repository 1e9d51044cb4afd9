"""``Timeline``: the whole sequence at a glance, hyperframe boundaries and adjacent MSE.

Boundaries come from the store's group table at once. The adjacent-frame MSE (pixels in
0..1, as the grouping measures it) is either handed over (a video packed by the viewer
records it while packing) or computed from the store on a background thread at low
priority, so the curve fills in while the page is already usable. The page gets the
curve binned (the largest MSE of each bin, so cuts stay visible at any length).

Example:
    >>> timeline = Timeline(store)  # doctest: +SKIP
    >>> timeline.start()  # doctest: +SKIP
    >>> timeline.to_dict()["boundaries"][:3]  # doctest: +SKIP
    [4, 9, 17]
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

import numpy as np

from ..hyper.distance import frame_mse
from ..store import FrameStore

BINS = 2000
"""At most this many points of the MSE curve go to the page."""
MAX_BOUNDARIES = 20_000
"""At most this many boundaries go to the page (evenly picked beyond that)."""


def bin_max(values: np.ndarray, bins: int) -> list[float | None]:
    """The largest finite value in each of ``min(bins, len(values))`` equal bins.

    A bin with no finite value gives ``None`` (JSON ``null``).
    """
    n = len(values)
    if n == 0 or bins < 1:
        return []
    count = min(bins, n)
    edges = np.linspace(0, n, count + 1).astype(np.int64)[:-1]
    clean = np.where(np.isfinite(values), values, -np.inf).astype(np.float64)
    peaks = np.maximum.reduceat(clean, edges)
    return [float(v) if np.isfinite(v) else None for v in peaks]


def pick_evenly(values: np.ndarray, limit: int) -> np.ndarray:
    """``values`` if it has at most ``limit`` items, else ``limit`` of them evenly spread."""
    if len(values) <= limit:
        return values
    return values[np.linspace(0, len(values) - 1, limit).astype(np.int64)]


class Timeline:
    """Boundaries and the adjacent-MSE curve of one store.

    Args:
        store: the open store (its group table gives the boundaries).
        distances: per-frame adjacent MSE (``distances[i]`` compares frames ``i - 1``
            and ``i``; NaN where unknown), when known already; else :meth:`start`
            computes it.
        bins: points of the curve sent to the page.
    """

    def __init__(
        self, store: FrameStore, *, distances: np.ndarray | None = None, bins: int = BINS
    ) -> None:
        self.path = store.path
        self.frames = len(store)
        self.bins = bins
        starts = store.groups.starts
        self.boundaries = np.asarray(starts[1:-1], np.int64)
        grouping = store.header.grouping or {}
        threshold = grouping.get("threshold")
        self.threshold = float(threshold) if isinstance(threshold, int | float) else None
        self._mse = np.full(self.frames, np.nan)
        self._done = 0
        if distances is not None:
            got = np.asarray(distances, np.float64)[: self.frames]
            self._mse[: len(got)] = got
            self._done = self.frames
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    @property
    def complete(self) -> bool:
        return self._done >= self.frames

    def start(self) -> None:
        """Compute the missing curve on a background thread (no-op when it is known)."""
        if self.complete or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._compute, name="hf-view-mse", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the background computation to end; returns whether the curve is complete."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.complete

    def close(self) -> None:
        """Stop the background computation and wait for its thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def to_dict(self) -> dict[str, Any]:
        """What the page draws: JSON-ready."""
        shown = pick_evenly(self.boundaries, MAX_BOUNDARIES)
        return {
            "frames": self.frames,
            "boundaries": [int(b) for b in shown],
            "boundaries_total": len(self.boundaries),
            "hyperframes": len(self.boundaries) + (1 if self.frames else 0),
            "mse": bin_max(self._mse, self.bins),
            "computed": int(self._done),
            "complete": self.complete,
            "threshold": self.threshold,
            "error": self.error,
        }

    def _compute(self) -> None:
        _lower_priority()
        try:
            with FrameStore(self.path, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
                frames = iter(store)
                with contextlib.closing(frames):  # type: ignore[type-var]
                    previous: np.ndarray | None = None
                    for i, frame in enumerate(frames):
                        if self._stop.is_set() or i >= self.frames:
                            break
                        if previous is not None:
                            self._mse[i] = frame_mse(previous, frame)
                        previous = frame
                        self._done = i + 1
        except Exception as exc:  # shown on the page; the viewer keeps serving frames
            self.error = f"the MSE curve could not be computed: {exc}"


def _lower_priority() -> None:
    """Lower this thread's scheduling priority (Linux threads are tasks) so scrubbing wins."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
