"""Counters a run keeps while it goes, and its report.

:class:`StageStats` are updated by the threads of one stage (under a lock);
:class:`RunReport` is the frozen summary ``Pipeline.run()`` returns, printable as a table
(``str(report)``) and as JSON (``report.to_dict()``). What monitors see of a run while it
goes is in :mod:`.watch`.
"""

from __future__ import annotations

import copy
import textwrap
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .figures import shortfall

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
        memory_budget: the run's memory budget in bytes (the pools, and what the source
            and the sink hold outside them).
        source_bytes: what the plan gave the source outside the pools (a decoder's frames).
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
    source_bytes: int = 0
    output: Any = None
    failures: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def slowest_stage(self) -> str:
        """The stage with the most busy time per worker: the one to give more workers."""
        if not self.stages:
            return ""
        return max(self.stages, key=lambda s: s.busy_per_worker_s).name

    @property
    def warnings(self) -> list[str]:
        """What the run did not achieve that was asked of it: a stage whose accuracy
        target its measured agreement fell short of; and what a part of the run had to do
        that the user should know (``warnings`` in its figures: a results column kept as
        text because its values mix kinds)."""
        short = ((name, shortfall(figures)) for name, figures in self.extra.items())
        told = [
            f"{name}: {text}"
            for name, figures in self.extra.items()
            if isinstance(figures, dict)
            for text in figures.get("warnings", ())
        ]
        return [f"{name}: {text}" for name, text in short if text is not None] + told

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every figure."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}  # no deep copy of output
        out["extra"] = copy.deepcopy(self.extra)
        out["stages"] = [asdict(s) for s in self.stages]
        out["failures"] = list(self.failures)
        out["slowest_stage"] = self.slowest_stage
        out["warnings"] = self.warnings
        out["output"] = json_ready(self.output)
        return out

    def __str__(self) -> str:
        lines = [
            f"{self.frames} frames in {self.wall_s:.2f} s = {self.fps:.1f} frames/s "
            f"(set-up {self.setup_s:.2f} s, slowest stage: {self.slowest_stage})",
            f"batch {self.batch_size} ({self.sizing}); {self.pool_slots} slots per pool; "
            f"pools {self.pool_bytes / 2**20:.1f} MiB of a {self.memory_budget / 2**20:.0f} MiB "
            f"budget, in use at most {self.pool_high_water_bytes / 2**20:.1f} MiB "
            f"({self.pool_high_water_slots} slots over all pools)"
            + (f"; the decoder {self.source_bytes / 2**20:.1f} MiB" if self.source_bytes else ""),
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
            shown = ", ".join(f"{k} {v}" for k, v in figures.items() if k != "warnings")
            if shown:  # (figures that are only warnings show among the warnings)
                lines.append(f"{name}: {shown}")
        if self.failures:
            lines.append(
                f"failed frames ({len(self.failures)}): "
                + ", ".join(f"{f['frame']} ({f['stage']})" for f in self.failures[:10])
                + (" ..." if len(self.failures) > 10 else "")
            )
        lines += [f"warning: {text}" for text in self.warnings]
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


def json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it: mappings, sequences and scalars kept (a store's
    summary stays an object), paths and anything else as text, arrays left out."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"array of shape {tuple(value.shape)} {value.dtype}"
    return str(value)


# -- what monitors see while a run goes ---------------------------------------------------
