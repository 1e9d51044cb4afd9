"""What a run tells: its report at the end, and snapshots for monitors while it goes.

Both read the runner's counters (its stages' stats, channels, pools, reorder buffer and
failures) and what its parts report of themselves: a stage's own figures (grouping,
reuse), the error a stream or strategy measured (their ``quality()``), a source's figures
(``Source.figures()``, such as a store's cache tiers), the executor's and the sink's notes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..executors import Executor
from ..frames import FramePool
from ..io.base import Sink, Source
from .channel import Channel
from .faults import DeadLetters
from .figures import ReuseFigures, figures_dict
from .plan import Plan
from .reorder import ReorderBuffer
from .report import RunReport, StageStats
from .stage_run import StageRun
from .watch import (
    PoolSnapshot,
    RunSnapshot,
    SourceFigures,
    StageQuality,
    StageSnapshot,
)


class Counters(Protocol):
    """What this module reads of a run (the :class:`~.runner.Runner` has them all)."""

    source: Source
    sink: Sink
    executor: Executor
    runs: list[StageRun]
    stats: list[StageStats]
    channels: list[Channel]
    reorder: ReorderBuffer[Any]
    dead: DeadLetters
    plan: Plan
    pool: FramePool
    slots: int
    hol_wait: float
    started_at: float
    delivered: int

    def pools(self) -> list[FramePool]: ...


def calls_saved(runs: Sequence[StageRun]) -> str:
    """``"calls saved 47%"`` for a run with a stage that shares answers, else ``""``."""
    for run in runs:
        figures = run.summary()
        if isinstance(figures, ReuseFigures):
            return f"calls saved {figures.calls_saved:.0%}"
    return ""


def slowest(stats: Sequence[StageStats]) -> str:
    """The name of the stage busiest per worker."""
    return max(stats, key=lambda s: s.busy_s / max(s.workers, 1)).name


def _extra(runner: Counters) -> dict[str, Any]:
    """Stages' own figures (grouping, reuse) and the executor's (where batches went)."""
    extra = {
        r.name: figures_dict(figures) for r in runner.runs if (figures := r.summary()) is not None
    }
    figures = runner.executor.summary()
    if figures:
        extra["executor"] = figures
    for name, part in (("source", runner.source), ("sink", runner.sink)):
        if notes := part.notes():
            extra[name] = notes
    return extra


def run_report(
    runner: Counters, frames: int, wall: float, output: Any, *, setup: float
) -> RunReport:
    """The report of ``runner``'s run, at its end."""
    for st, ch in zip(runner.stats[1:], runner.channels, strict=True):
        st.queue_high_water = ch.high_water
    pools = runner.pools()
    return RunReport(
        frames=frames,
        wall_s=round(wall, 6),
        fps=round(frames / wall, 3) if wall > 0 else 0.0,
        stages=tuple(s.summary() for s in runner.stats),
        pool_slots=runner.slots,
        pool_high_water_slots=sum(p.high_water for p in pools),
        pool_high_water_bytes=sum(p.high_water * p.slot_nbytes for p in pools),
        pool_bytes=sum(p.nbytes for p in pools),
        reorder_high_water=runner.reorder.high_water,
        head_of_line_wait_s=round(runner.hol_wait, 6),
        batch_size=runner.pool.batch_size,
        setup_s=round(setup, 6),
        memory_budget=runner.plan.budget,
        sizing=runner.plan.why,
        source_bytes=runner.plan.source_bytes,
        output=output,
        failures=tuple(runner.dead.snapshot()),
        extra=_extra(runner),
    )


def run_snapshot(runner: Counters) -> RunSnapshot:
    """The run's figures right now, for monitors: cheap, thread-safe, any time.

    Besides the counters of every stage and pool it carries the error a stage measured
    recently (``StageSnapshot.quality``, from a stream or strategy's ``quality()``, such
    as reuse) and what the source reports of its reads (``source_figures``, from
    ``Source.figures()``, such as a store's cache tiers).
    """
    depths = [0, *[len(ch) for ch in runner.channels]]
    capacities = [0, *[ch.capacity for ch in runner.channels]]
    quality = [None, *[_quality(run) for run in runner.runs], None]
    stages = []
    for k, st in enumerate(runner.stats):
        row = st.summary()
        stages.append(
            StageSnapshot(
                name=row.name,
                workers=row.workers,
                frames=row.frames,
                batches=row.batches,
                busy_s=row.busy_s,
                wait_in_s=row.wait_in_s,
                wait_out_s=row.wait_out_s,
                queue_depth=depths[k],
                queue_capacity=capacities[k],
                quality=quality[k],
            )
        )
    pools = tuple(
        PoolSnapshot(p.name, p.slots, p.in_use, p.high_water, p.slot_nbytes) for p in runner.pools()
    )
    return RunSnapshot(
        elapsed_s=time.perf_counter() - runner.started_at,
        frames=runner.delivered,
        total=runner.source.length,
        batch_size=runner.pool.batch_size,
        stages=tuple(stages),
        pools=pools,
        reorder_depth=len(runner.reorder),
        head_of_line_wait_s=runner.hol_wait,
        failures=len(runner.dead.snapshot()),
        extra={r.name: f for r in runner.runs if (f := r.summary()) is not None},
        source_figures=_source_figures(runner.source),
    )


def _quality(run: StageRun) -> StageQuality | None:
    """The error a stage's stream or strategy measured recently, if it measures one."""
    return None if run.part is None else run.part.quality()


def _source_figures(source: Source) -> SourceFigures:
    """What ``source`` reports of its reads (:meth:`~hyperframes.io.base.Source.figures`).

    Raises:
        TypeError: its ``figures()`` returned something other than :class:`SourceFigures`.
    """
    figures = source.figures()
    if not isinstance(figures, SourceFigures):
        raise TypeError(
            f"{type(source).__name__}.figures() must return a SourceFigures "
            f"(hyperframes.engine.report), got {type(figures).__name__}"
        )
    return figures
