"""Sample a run's figures over time in a background thread, and plot them.

:class:`Timeline` is a :class:`~hyperframes.engine.watch.Monitor`. Every
``interval_s`` it reads the run's ``snapshot()`` (a
:class:`~hyperframes.engine.watch.RunSnapshot`) and keeps a compact :class:`Sample`
(per stage: busy seconds, workers, queue depth; pool slots in use; reorder depth).
Memory stays bounded at any run length: when ``max_samples`` are held, every other
sample is dropped and the interval doubles (:func:`thin`), so the samples stay evenly
spaced over the whole run. After the run, :meth:`Timeline.write_plots` draws stage
utilisation over time and queue depth over time as PNGs (needs matplotlib, the
``[plot]`` extra, imported in :func:`figure_class` only).

Example:
    >>> timeline = Timeline(interval_s=0.5)
    >>> report = pipeline.run(monitor=timeline)  # doctest: +SKIP
    >>> timeline.write_plots("plots/")  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.report import RunReport
from ..engine.watch import RunSnapshot, SnapshotFn

INSTALL = "pip install 'hyperframes-engine[plot]' (or pip install matplotlib)"
PLOTS = ("stage_utilisation.png", "queue_depth.png")


@dataclass(frozen=True)
class StageSample:
    """One stage at one moment: cumulative busy seconds, workers and input-queue depth."""

    busy_s: float
    workers: int
    queue_depth: int
    queue_capacity: int


@dataclass(frozen=True)
class Sample:
    """The run at one moment (``t`` is seconds since the run started)."""

    t: float
    frames: int
    stages: dict[str, StageSample]
    pools_in_use: dict[str, int]
    reorder_depth: int

    @classmethod
    def of(cls, snap: RunSnapshot) -> Sample:
        """The compact sample of one ``Runner.snapshot()``."""
        return cls(
            t=snap.elapsed_s,
            frames=snap.frames,
            stages={
                s.name: StageSample(s.busy_s, s.workers, s.queue_depth, s.queue_capacity)
                for s in snap.stages
            },
            pools_in_use={p.name: p.in_use for p in snap.pools},
            reorder_depth=snap.reorder_depth,
        )


def thin(samples: list[Sample]) -> list[Sample]:
    """Every other sample, keeping the first (and the last, for an odd count)."""
    return samples[::2]


def utilisation(samples: list[Sample]) -> dict[str, list[tuple[float, float]]]:
    """Per stage, ``(t, share of its workers busy)`` between consecutive samples.

    Busy time is counted when a batch finishes, so one interval may see more than its
    share; values are clipped to 0..1. Each point is placed at the end of its interval.
    """
    out: dict[str, list[tuple[float, float]]] = {}
    for before, after in itertools.pairwise(samples):
        dt = after.t - before.t
        if dt <= 0:
            continue
        for name, now in after.stages.items():
            then = before.stages.get(name)
            if then is None:
                continue
            share = (now.busy_s - then.busy_s) / (dt * max(now.workers, 1))
            out.setdefault(name, []).append((after.t, min(1.0, max(0.0, share))))
    return out


def queue_depths(samples: list[Sample]) -> dict[str, list[tuple[float, int]]]:
    """Per stage with an input queue, ``(t, batches waiting)``; plus the reorder buffer."""
    out: dict[str, list[tuple[float, int]]] = {}
    for s in samples:
        for name, st in s.stages.items():
            if st.queue_capacity:
                out.setdefault(name, []).append((s.t, st.queue_depth))
        out.setdefault("reorder buffer", []).append((s.t, s.reorder_depth))
    return out


class Timeline:
    """A monitor that samples the run every ``interval_s`` seconds in its own thread.

    Args:
        interval_s: seconds between samples at the start (it doubles each time the
            samples are thinned).
        max_samples: the most samples held at once (at least 4).
    """

    def __init__(self, *, interval_s: float = 0.5, max_samples: int = 1000) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if max_samples < 4:
            raise ValueError(f"max_samples must be at least 4, got {max_samples}")
        self.interval_s = float(interval_s)
        self.max_samples = int(max_samples)
        self._limit = self.max_samples - 1 + self.max_samples % 2  # odd, so thinning keeps
        # the latest sample and the next one comes one (doubled) interval after it
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._snapshot: SnapshotFn | None = None

    @property
    def samples(self) -> list[Sample]:
        """A copy of the samples held now, oldest first."""
        with self._lock:
            return list(self._samples)

    def start(self, snapshot: SnapshotFn) -> None:
        """Take the first sample and start the sampling thread."""
        if self._thread is not None:
            raise RuntimeError("this timeline is already sampling a run; make one per run")
        self._snapshot = snapshot
        self._stop.clear()
        with self._lock:
            self._samples = []
        self._take()
        self._thread = threading.Thread(target=self._loop, name="hf-timeline", daemon=True)
        self._thread.start()

    def stop(self, report: RunReport | None) -> None:
        """Stop and join the thread, then take a last sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._snapshot is not None:
            self._take()
            self._snapshot = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):  # a timer tick, not a poll for a state
            self._take()

    def _take(self) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        sample = Sample.of(snapshot())
        with self._lock:
            self._samples.append(sample)
            if len(self._samples) >= self._limit:
                self._samples = thin(self._samples)  # an odd count: the latest is kept
                self.interval_s *= 2

    def write_plots(self, folder: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write ``stage_utilisation.png`` and ``queue_depth.png`` into ``folder``.

        Each is an output like any other (``io.publish``): an existing file is replaced
        only with ``overwrite``, a link never written through.

        Returns:
            The paths written.

        Raises:
            ImportError: matplotlib is not installed (says how to install it).
            FileExistsError: a plot exists (without ``overwrite``) or is a link.
        """
        make_figure = figure_class()
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        samples = self.samples
        series: list[tuple[str, dict[str, Any], str]] = [
            (PLOTS[0], utilisation(samples), "share of workers busy"),
            (PLOTS[1], queue_depths(samples), "batches waiting"),
        ]
        written = []
        for name, lines, ylabel in series:
            fig = make_figure(figsize=(10, 4))
            ax = fig.add_subplot()
            for label, points in lines.items():
                if points:
                    ts, values = zip(*points, strict=True)
                    ax.plot(ts, values, label=label, lw=1.2)
            ax.set_xlabel("seconds since start")
            ax.set_ylabel(ylabel)
            ax.set_title(name.removesuffix(".png").replace("_", " "))
            if lines:
                ax.legend(loc="upper right", fontsize="small")
            fig.tight_layout()
            path = folder / name
            save_figure(fig, path, overwrite=overwrite)
            written.append(path)
        return written


def save_figure(fig: Any, path: str | Path, *, overwrite: bool = False) -> None:
    """Save a matplotlib figure as a PNG output (checked, temporary name, published)."""
    from ..io.publish import check_output, publish, temp_beside

    target = check_output(path, overwrite=overwrite)
    temp = temp_beside(target)
    try:
        fig.savefig(temp, dpi=100, format="png")
        publish(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def require_plotting() -> None:
    """Raise the install message now if plots cannot be drawn (before a long run)."""
    figure_class()


def figure_class() -> Any:
    """matplotlib's ``Figure`` (drawn with Agg, no pyplot state): the one matplotlib import
    in hyperframes, shared by every plot."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"plots need matplotlib: {INSTALL}") from exc
    return Figure
