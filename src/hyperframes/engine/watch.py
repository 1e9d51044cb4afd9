"""What those who watch a run see while it goes: progress, snapshots, monitors.

A progress callback is told a :class:`Progress` after each batch reaches the sink; a
:class:`Monitor` (a metrics exporter, a live page) is given the run's snapshot function
and reads a frozen :class:`RunSnapshot` whenever it likes: stages, pools, the quality a
stage measures, the figures its source reports.

Parts above the engine plug figures in through methods their base classes give a default
for: a stage's stream or strategy that measures its error (``quality()``, such as reuse)
and a source that counts its reads (``Source.figures()``, such as a store's cache tiers,
each a :class:`~hyperframes.io.base.CacheTier`).

Example:
    >>> snap = RunSnapshot(elapsed_s=1.0, frames=8, total=16, batch_size=4)
    >>> snap.to_dict()["frames"], snap.stage("sink")
    (8, None)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from ..io.base import SourceFigures
from .report import RunReport, json_ready


@dataclass(frozen=True)
class Progress:
    """What a progress callback is told after each batch reaches the sink (or, in a
    chunked run, after each segment: ``note`` then says how many are done)."""

    frames: int
    total: int | None
    elapsed_s: float
    slowest_stage: str
    note: str = ""

    @property
    def fps(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s > 0 else 0.0


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class StageQuality:
    """The error a stage measured over its most recent frames (a lossy or reusing stage).

    Attributes:
        psnr_db: PSNR of the mean MSE over the window, pixels in 0..1 (``inf`` when every
            measured frame was exact).
        mse: that mean MSE.
        samples: measurements in the window (at most ``window``).
        window: the most recent measurements the figure covers.
    """

    psnr_db: float
    mse: float
    samples: int
    window: int

    def __post_init__(self) -> None:
        if not 1 <= self.samples <= self.window:
            raise ValueError(
                f"need 1 <= samples <= window, got samples={self.samples}, window={self.window}"
            )
        if not self.mse >= 0:  # NaN fails too; inf (results far out of 0..1) is a value
            raise ValueError(f"mse must be a number >= 0, got {self.mse}")

    @classmethod
    def of_mse(cls, mse: float, *, samples: int, window: int) -> StageQuality:
        """The quality of a mean MSE (pixels in 0..1)."""
        psnr = math.inf if mse == 0 else -10 * math.log10(mse)
        return cls(psnr_db=psnr, mse=mse, samples=samples, window=window)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: JSON has no infinity, so an exact ``psnr_db`` is ``None``."""
        out = asdict(self)
        out["psnr_db"] = self.psnr_db if math.isfinite(self.psnr_db) else None
        return out


@dataclass(frozen=True)
class StageSnapshot:
    """One stage at one moment (the source and the sink count as stages).

    Attributes:
        name: as in the run report.
        workers: threads of the stage.
        frames: frames it has handled.
        batches: batches it has handled.
        busy_s: seconds in the stage function, summed over its workers.
        wait_in_s: seconds waiting for work, summed over its workers.
        wait_out_s: seconds waiting to hand work on, summed over its workers.
        queue_depth: batches waiting in its input queue now.
        queue_capacity: capacity of its input queue (0 for the source: it has none).
        quality: the error it measured recently (its stream or strategy's ``quality()``), if any.
    """

    name: str
    workers: int
    frames: int
    batches: int
    busy_s: float
    wait_in_s: float
    wait_out_s: float
    queue_depth: int = 0
    queue_capacity: int = 0
    quality: StageQuality | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["quality"] = None if self.quality is None else self.quality.to_dict()
        return out


@dataclass(frozen=True)
class PoolSnapshot:
    """One frame pool at one moment: its slots, those held now, the most held at once."""

    name: str
    slots: int
    in_use: int
    high_water: int
    slot_bytes: int


@dataclass(frozen=True)
class RunSnapshot:
    """A run's figures at one moment, as monitors see them (``Runner.snapshot()``).

    Attributes:
        elapsed_s: seconds since the run started.
        frames: frames delivered to the sink.
        total: frames the source will give, or ``None`` when unknown.
        batch_size: frames per batch.
        stages: one :class:`StageSnapshot` per stage, source first, sink last.
        pools: one :class:`PoolSnapshot` per frame pool, the source's first.
        reorder_depth: batches the sink holds back to restore order now.
        head_of_line_wait_s: seconds the sink waited for a missing batch while later ones
            were ready.
        failures: frames that failed for good (dead letters).
        extra: the figures stages report of themselves (grouping, reuse), by stage.
        source_figures: what the source reports of its reads (a store's cache tiers).
    """

    elapsed_s: float
    frames: int
    total: int | None
    batch_size: int
    stages: tuple[StageSnapshot, ...] = ()
    pools: tuple[PoolSnapshot, ...] = ()
    reorder_depth: int = 0
    head_of_line_wait_s: float = 0.0
    failures: int = 0
    extra: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source_figures: SourceFigures = field(default_factory=SourceFigures)

    def stage(self, name: str) -> StageSnapshot | None:
        """The stage called ``name``, or ``None``."""
        return next((s for s in self.stages if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every figure (for pages and files)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["stages"] = [s.to_dict() for s in self.stages]
        out["pools"] = [asdict(p) for p in self.pools]
        out["extra"] = json_ready(self.extra)
        out["source_figures"] = self.source_figures.to_dict()
        return out


SnapshotFn = Callable[[], RunSnapshot]
"""What a monitor is given: the run's ``snapshot`` function."""


class Monitor(Protocol):
    """Watches a run while it goes (a metrics exporter, a live page).

    ``start`` is called in the caller's thread before any frame moves, with the run's
    snapshot function (it returns a frozen :class:`RunSnapshot`), which is cheap,
    thread-safe and may be called at any time from any thread until ``stop``. ``stop``
    gets the report, or ``None`` after a failure.
    """

    def start(self, snapshot: SnapshotFn) -> None: ...

    def stop(self, report: RunReport | None) -> None: ...
