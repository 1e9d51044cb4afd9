"""Counters a run keeps while it goes, what monitors see of it live, and its report.

:class:`StageStats` are updated by the threads of one stage (under a lock);
:class:`RunSnapshot` is the frozen view of a run at one moment that monitors read
(``Runner.snapshot()``: stages, pools, the quality a stage measures, the figures its
source reports); :class:`RunReport` is the frozen summary ``Pipeline.run()`` returns,
printable as a table (``str(report)``) and as JSON (``report.to_dict()``).

Parts above the engine plug figures in through two small protocols:
:class:`MeasuresQuality` (a stage's stream or strategy that measures its error, such as
reuse) and :class:`ReportsFigures` (a source that counts its reads, such as a store's
cache tiers).

Example:
    >>> snap = RunSnapshot(elapsed_s=1.0, frames=8, total=16, batch_size=4)
    >>> snap.to_dict()["frames"], snap.stage("sink")
    (8, None)

Longer than 300 lines: the report and the live snapshot are value types read by every
monitor; they change together.
"""

from __future__ import annotations

import copy
import math
import textwrap
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

WIDTH = 79
"""The columns a printed report takes at most (an 80-column terminal)."""


@dataclass
class StageStats:
    """Live counters of one stage (the source and the sink count as stages)."""

    name: str
    workers: int = 1
    frames: int = 0
    batches: int = 0
    busy_s: float = 0.0
    wait_in_s: float = 0.0
    wait_out_s: float = 0.0
    queue_capacity: int = 0
    queue_high_water: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self, *, frames: int = 0, busy: float = 0.0, wait_in: float = 0.0, wait_out: float = 0.0
    ) -> None:
        with self._lock:
            self.frames += frames
            self.batches += 1 if frames else 0
            self.busy_s += busy
            self.wait_in_s += wait_in
            self.wait_out_s += wait_out

    def summary(self) -> StageReport:
        with self._lock:
            return StageReport(
                name=self.name,
                workers=self.workers,
                frames=self.frames,
                batches=self.batches,
                busy_s=round(self.busy_s, 6),
                wait_in_s=round(self.wait_in_s, 6),
                wait_out_s=round(self.wait_out_s, 6),
                queue_capacity=self.queue_capacity,
                queue_high_water=self.queue_high_water,
            )


@dataclass(frozen=True)
class StageReport:
    """What one stage did: frames, busy time (in its function) and time spent waiting.

    ``wait_in_s`` is time waiting for work (starved by the stage before);
    ``wait_out_s`` is time waiting to hand work on (held back by the stage after).
    Times are summed over the stage's workers.
    """

    name: str
    workers: int
    frames: int
    batches: int
    busy_s: float
    wait_in_s: float
    wait_out_s: float
    queue_capacity: int
    queue_high_water: int

    @property
    def busy_per_worker_s(self) -> float:
        return self.busy_s / max(self.workers, 1)


@dataclass(frozen=True)
class RunReport:
    """The summary of one run.

    Attributes:
        frames: frames delivered to the sink.
        wall_s: wall-clock seconds of the whole ``run()`` call, set-up included.
        fps: ``frames / wall_s``.
        stages: one :class:`StageReport` per stage, source first, sink last.
        pool_slots: slots of the source pool (the bound on batches in flight).
        pool_high_water_slots: most slots in use at once, summed over the pools.
        pool_high_water_bytes: bytes of those slots.
        pool_bytes: bytes preallocated for all pools.
        reorder_high_water: most batches the sink held back to restore order.
        head_of_line_wait_s: time the sink waited for a missing batch while later ones
            were ready (the cost of keeping order).
        batch_size: frames per batch.
        setup_s: the part of ``wall_s`` spent before the first frame was read (planning,
            pools, stage start-up: processes or actors).
        memory_budget: the run's memory budget in bytes (all pools together).
        sizing: how the batch size was chosen.
        output: what the sink returned (e.g. the output path), if anything.
        failures: dead letters: ``{"stage", "frame", "error"}`` for each frame that failed
            for good (only with ``allow_failures``); those frames are not in the output.
        extra: figures later parts add (hyperframes, cache, reuse), keyed by topic.
    """

    frames: int
    wall_s: float
    fps: float
    stages: tuple[StageReport, ...]
    pool_slots: int
    pool_high_water_slots: int
    pool_high_water_bytes: int
    pool_bytes: int
    reorder_high_water: int
    batch_size: int
    head_of_line_wait_s: float = 0.0
    setup_s: float = 0.0
    memory_budget: int = 0
    sizing: str = ""
    output: Any = None
    failures: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def slowest_stage(self) -> str:
        """The stage with the most busy time per worker: the one to give more workers."""
        if not self.stages:
            return ""
        return max(self.stages, key=lambda s: s.busy_per_worker_s).name

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every figure."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}  # no deep copy of output
        out["extra"] = copy.deepcopy(self.extra)
        out["stages"] = [asdict(s) for s in self.stages]
        out["failures"] = list(self.failures)
        out["slowest_stage"] = self.slowest_stage
        out["output"] = _json_ready(self.output)
        return out

    def __str__(self) -> str:
        lines = [
            f"{self.frames} frames in {self.wall_s:.2f} s = {self.fps:.1f} frames/s "
            f"(set-up {self.setup_s:.2f} s, slowest stage: {self.slowest_stage})",
            f"batch {self.batch_size} ({self.sizing}); {self.pool_slots} slots per pool; "
            f"pools {self.pool_bytes / 2**20:.1f} MiB of a {self.memory_budget / 2**20:.0f} MiB "
            f"budget, in use at most {self.pool_high_water_bytes / 2**20:.1f} MiB "
            f"({self.pool_high_water_slots} slots over all pools)",
            f"reorder buffer high-water {self.reorder_high_water} batches",
            f"{'stage':<24}{'workers':>8}{'frames':>9}{'busy s':>9}{'wait in':>9}"
            f"{'wait out':>9}{'queue hw':>9}",
        ]
        for s in self.stages:
            queue = f"{s.queue_high_water}/{s.queue_capacity}" if s.queue_capacity else "-"
            lines.append(
                f"{s.name:<24}{s.workers:>8}{s.frames:>9}{s.busy_s:>9.2f}{s.wait_in_s:>9.2f}"
                f"{s.wait_out_s:>9.2f}{queue:>9}"
            )
        for name, figures in self.extra.items():
            shown = ", ".join(f"{k} {v}" for k, v in figures.items())
            lines.append(f"{name}: {shown}")
        if self.failures:
            lines.append(
                f"failed frames ({len(self.failures)}): "
                + ", ".join(f"{f['frame']} ({f['stage']})" for f in self.failures[:10])
                + (" ..." if len(self.failures) > 10 else "")
            )
        if self.output is not None:
            lines.append(f"output: {self.output}")
        # an 80-column terminal: long lines wrap at words, indented (the table fits as is)
        fitted = [
            part
            for line in lines
            for part in textwrap.wrap(
                line, WIDTH, subsequent_indent="  ", break_long_words=False,
                break_on_hyphens=False,
            ) or [line]
        ]  # fmt: skip
        return "\n".join(fitted)


def _json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it: mappings, sequences and scalars kept (a store's
    summary stays an object), paths and anything else as text, arrays left out."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"array of shape {tuple(value.shape)} {value.dtype}"
    return str(value)


# -- what monitors see while a run goes ---------------------------------------------------


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


@runtime_checkable
class MeasuresQuality(Protocol):
    """A stage's stream or strategy that measures its own error while the run goes."""

    def quality(self) -> StageQuality | None:
        """The error over the recent frames, or ``None`` before anything was measured.

        Called from monitor threads: it must be thread-safe and cheap.
        """
        ...


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
        quality: the error it measured recently (:class:`MeasuresQuality`), if any.
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
class CacheTier:
    """One tier of a cache a source reads through (``hot``, ``warm``, ``cold``).

    Attributes:
        tier: the tier's name.
        hits: lookups it answered (for a store's cold tier: records read from LMDB).
        misses: lookups it could not answer.
        bytes: bytes it holds now (for a cold tier: the size of the data on disk).
        capacity_bytes: the most bytes it may hold.
        entries: entries it holds now.
        evictions: entries it has dropped to make room.
    """

    tier: str
    hits: int
    misses: int
    bytes: int
    capacity_bytes: int = 0
    entries: int = 0
    evictions: int = 0

    def __post_init__(self) -> None:
        if not self.tier:
            raise ValueError("a cache tier needs a name, got ''")
        counts = (self.hits, self.misses, self.bytes, self.capacity_bytes, self.entries,
                  self.evictions)  # fmt: skip
        if min(counts) < 0:
            raise ValueError(f"cache tier {self.tier!r}: counts must be >= 0, got {counts}")

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass(frozen=True)
class SourceFigures:
    """What a source reports about its reads (:class:`ReportsFigures`).

    Attributes:
        cache: the tiers it reads through, e.g. a store's hot, warm and cold tiers.
        numbers: any other figures, by name.
    """

    cache: tuple[CacheTier, ...] = ()
    numbers: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"cache": [asdict(t) for t in self.cache], "numbers": dict(self.numbers)}


@runtime_checkable
class ReportsFigures(Protocol):
    """A source that reports figures of its own (a store's cache tiers) while it reads.

    A source need not: the :class:`~hyperframes.io.base.Source` interface does not ask for
    it, and the runner includes the figures of those that have the method.
    """

    def figures(self) -> SourceFigures:
        """The figures now. Called from monitor threads: thread-safe and cheap, and
        callable before ``open`` and after ``close`` (the last figures, or none)."""
        ...


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
        out["extra"] = _json_ready(self.extra)
        out["source_figures"] = self.source_figures.to_dict()
        return out


SnapshotFn = Callable[[], RunSnapshot]
"""What a monitor is given: the run's ``snapshot`` function."""
