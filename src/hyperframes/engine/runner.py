"""Run a pipeline: a source thread, worker threads per stage, the sink in the caller's thread.

How a run stays flat, busy and safe:

* **Flat.** The source takes a slot of the source pool before it reads into it, and a
  batch keeps its slots until the sink is done with it. So the source pool's slot count
  bounds the batches in flight anywhere in the line; a full pool blocks the source
  (backpressure). Every later pool has as many slots as the source pool, and each batch
  holds at most one slot per pool, so a later pool can never run dry: the batch the sink
  waits for can always move on, however many finished ahead of it (no admission deadlock).
* **Busy.** Each stage has its own threads and a bounded input channel.
* **Safe.** The first exception anywhere (or Ctrl-C in the caller) cancels every channel
  and pool, which wakes every blocked thread; every thread is joined, every slot released,
  the sink told to drop its partial output, and the original exception re-raised with a
  note naming the stage, batch and frames.

Longer than 300 lines: the runner's threads share one failure path (cancel, release,
join); split, it would be spread over files.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

from ..errors import Cancelled, FramesFailed, StageError
from ..executors import Executor, ThreadExecutor
from ..frames import Batch, FramePool, FrameSpec, check_pool_memory
from ..io.base import Sink, Source
from .channel import END, Channel
from .faults import DeadLetters
from .plan import Plan, PoolPlan, least_budget, plan_run
from .reorder import ReorderBuffer
from .report import RunReport, StageStats
from .sizing import default_budget, parse_memory
from .stage import Stage
from .stage_run import StageRun
from .watch import (
    MeasuresQuality,
    Monitor,
    PoolSnapshot,
    Progress,
    ProgressFn,
    ReportsFigures,
    RunSnapshot,
    SourceFigures,
    StageQuality,
    StageSnapshot,
)

STOP_GRACE_S = 10.0
"""After a failure, how long to wait for threads still inside user code before giving up on
them (they are daemon threads; their slots stay valid because the pool dies with them)."""


_BUSY_LOCK = threading.Lock()
_BUSY: set[int] = set()


@contextlib.contextmanager
def exclusive(**parts: object) -> Iterator[None]:
    """Claim the named parts of a run (a source, a sink) for its duration.

    A part that keeps per-run state of its own (a decoder, an output file) and cannot
    give each run a copy (``for_run()`` returns itself) serves one run at a time: a
    second run that starts while the first goes on would split the frames between them.

    Raises:
        RuntimeError: a part is in a run that has not finished.
    """
    with _BUSY_LOCK:
        for what, part in parts.items():
            if id(part) in _BUSY:
                raise RuntimeError(
                    f"this pipeline's {what} ({type(part).__name__}) is already in a run that "
                    "has not finished, and serves one run at a time; give each concurrent "
                    "run its own (e.g. a new VideoSource), or wait for the first run"
                )
        claimed = {id(part) for part in parts.values()}
        _BUSY.update(claimed)
    try:
        yield
    finally:
        with _BUSY_LOCK:
            _BUSY.difference_update(claimed)


class Runner:
    """One run of a line of stages between a source and a sink. Use :func:`run_line`."""

    def __init__(
        self,
        source: Source,
        stages: Sequence[Stage],
        sink: Sink,
        *,
        batch_size: int | None,
        slots: int | None,
        slot_timeout: float | None,
        progress: ProgressFn | None,
        allow_failures: int = 0,
        executor: Executor | None = None,
        monitor: Monitor | None = None,
        memory: int | str | None = None,
        started: float | None = None,
    ) -> None:
        self._called = time.perf_counter() if started is None else started
        self.source = source
        self.executor = executor or ThreadExecutor()
        self.stages = list(stages)
        self.sink = sink
        self.stopped = threading.Event()  # set at the first failure: wakes retry back-offs
        try:
            self.plan = self._plan(source, batch_size, slots, memory)
            self.slots = self.plan.slots
            self._budget_left = self.plan.left
            self._budget_lock = threading.Lock()
            self.pool = self._start_stages()
            sink.grant(self.plan.sink_bytes)
        except BaseException:
            self.executor.close()  # stages may have started workers already
            raise
        self.dead = DeadLetters(allow_failures)
        self.monitor = monitor
        self._start = time.perf_counter()
        self._delivered = 0
        self._hol_wait = 0.0
        self.slot_timeout = slot_timeout
        self.progress = progress
        self.channels = [Channel(s.queue or 1) for s in self.stages]
        self.channels.append(Channel(self.slots))  # into the sink: never the bottleneck
        self.stats = [StageStats("source")]
        self.stats += [StageStats(s.name, workers=s.workers) for s in self.stages]
        self.stats.append(StageStats("sink"))
        for st, ch in zip(self.stats[1:], self.channels, strict=True):
            st.queue_capacity = ch.capacity
        self._error: BaseException | None = None
        self._error_lock = threading.Lock()
        self._alive = [s.workers for s in self.stages]
        self._reorder: ReorderBuffer[Batch] = ReorderBuffer()
        self._sink_open = False

    def _plan(
        self, source: Source, batch_size: int | None, slots: int | None, memory: int | str | None
    ) -> Plan:
        """This run's plan (see :func:`.plan.plan_run`): the footprints of its stages and
        its sink, the input's length and the budget. Without ``memory=`` the budget is the
        machine's default, or what the run needs at least where that is more (an explicit
        batch size or a grouping's ``max_len`` wins over the default), within what the
        machine has."""
        footprints = [stage.footprint() for stage in self.stages]
        facts: dict[str, Any] = {}
        for stage in self.stages:
            facts.update(stage.facts or {})
        sink = self.sink.footprint(self._declared_spec(), facts)
        length = source.length if isinstance(source.length, int) else None
        if memory is not None:
            budget = parse_memory(memory)
        else:
            budget = default_budget()
            least = least_budget(
                source.spec, footprints, sink=sink, length=length, batch_size=batch_size,
                slots=slots,
            )  # fmt: skip
            if least > budget:
                size = batch_size or 1
                check_pool_memory(
                    least, what=f"this run's pools (batches of {size} frames of "
                    f"{source.spec.describe()}) and what its sink holds",
                )  # fmt: skip
                budget = least
        return plan_run(
            source.spec, footprints, budget=budget, sink=sink, length=length,
            batch_size=batch_size, slots=slots,
        )  # fmt: skip

    def _start_stages(self) -> FramePool:
        """Start every stage under the executor, with the pools the plan gave each (the
        stages that declare other frames); return the source's pool."""
        plan = self.plan
        self.runs = []
        for stage in self.stages:
            planned = plan.pool_of(stage.name)
            self.runs.append(
                stage.start(
                    self.executor,
                    batch_size=plan.batch_size,
                    allocate=self._allocate,
                    stopped=self.stopped,
                    pool=None if planned is None else self._pool_for(planned),
                )
            )
        return self._pool_for(plan.pools[0])

    def _pool_for(self, planned: PoolPlan) -> FramePool:
        buffer = self.executor.allocate(planned.nbytes)
        return FramePool(
            planned.spec,
            batch_size=planned.batch_size,
            slots=planned.slots,
            name=planned.name,
            buffer=buffer,
        )

    def _allocate(self, nbytes: int, what: str) -> Any:
        """The pool of a stage that did not declare its frames, made when its first result
        shows them, from what the plan left of the budget.

        Raises:
            MemoryError: the pool does not fit what the budget has left.
        """
        with self._budget_lock:
            if nbytes > self._budget_left:
                raise MemoryError(
                    f"{what} needs {nbytes / 2**20:.0f} MiB, but the run's memory budget of "
                    f"{self.plan.budget / 2**20:.0f} MiB has {self._budget_left / 2**20:.0f} "
                    "MiB left; pass a larger memory= or a smaller batch_size=, or declare the "
                    "stage's spec= so the plan counts it before the run starts"
                )
            self._budget_left -= nbytes
        return self.executor.allocate(nbytes)

    # -- failure -------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        with self._error_lock:
            if self._error is None and not isinstance(exc, Cancelled):
                self._error = exc
        self.stopped.set()
        for ch in self.channels:
            ch.cancel()
        for pool in self._pools():
            pool.cancel()

    def _pools(self) -> list[FramePool]:
        return [self.pool] + [r.out_pool for r in self.runs if r.out_pool is not None]

    # -- threads -------------------------------------------------------------------------

    def _source_loop(self) -> None:
        stats, out, pool = self.stats[0], self.channels[0], self.pool
        seq = 0
        try:
            while True:
                t0 = time.perf_counter()
                slot = pool.acquire(holder="source", timeout=self.slot_timeout)
                t1 = time.perf_counter()
                try:
                    chunk = self.source.read_into(pool.view(slot))
                    count = len(chunk)
                    if count == 0:
                        pool.release(slot)
                        break
                    if count > pool.batch_size:
                        raise StageError(
                            f"the source returned {count} frames for a slot of "
                            f"{pool.batch_size}; a source must fill at most len(out) frames"
                        )
                    index = np.asarray(chunk.index, dtype=np.int64)
                    batch = Batch(seq, index, pool, slot, dict(chunk.meta))
                except BaseException as exc:
                    first = seq * pool.batch_size
                    exc.add_note(f"while the source read batch {seq} (from frame {first} on)")
                    raise
                t2 = time.perf_counter()
                out.put(batch)
                t3 = time.perf_counter()
                stats.add(frames=count, busy=t2 - t1, wait_out=(t1 - t0) + (t3 - t2))
                seq += 1
            out.close()
        except BaseException as exc:
            self._fail(exc)

    def _worker_loop(self, i: int) -> None:
        stage, run, stats = self.stages[i], self.runs[i], self.stats[i + 1]
        inbox, outbox = self.channels[i], self.channels[i + 1]
        order: ReorderBuffer[Batch] | None = ReorderBuffer() if stage.ordered else None
        try:
            while True:
                t0 = time.perf_counter()
                batch = inbox.get()
                if batch is END:
                    break
                batch.hand_over(stage.name)
                t1 = time.perf_counter()
                ready = [batch] if order is None else order.push(batch.seq, batch)
                results = [out for b in ready for out in self._step(run, b)]
                t2 = time.perf_counter()
                for result in results:
                    outbox.put(result)
                t3 = time.perf_counter()
                stats.add(frames=batch.count, busy=t2 - t1, wait_in=t1 - t0, wait_out=t3 - t2)
            if self._error is None:
                for result in run.flush(slots=self.slots, dead=self.dead):
                    outbox.put(result)
        except BaseException as exc:
            self._fail(exc)
        finally:
            with self._error_lock:
                self._alive[i] -= 1
                last = self._alive[i] == 0
            if last:
                outbox.close()

    def _step(self, run: StageRun, batch: Batch) -> list[Batch]:
        try:
            if run.stream is not None:
                return run.stream.push(batch)
            return run.apply(batch, slots=self.slots, dead=self.dead)
        except FramesFailed:
            raise
        except BaseException as exc:
            exc.add_note(f"in stage {run.name!r}, {batch.describe()}")
            raise

    # -- the caller's thread: the sink ---------------------------------------------------

    def run(self) -> RunReport:
        threads = [threading.Thread(target=self._source_loop, name="hf-source", daemon=True)]
        for i, stage in enumerate(self.stages):
            threads += [
                threading.Thread(
                    target=self._worker_loop, args=(i,), name=f"hf-{stage.name}-{w}", daemon=True
                )
                for w in range(stage.workers)
            ]
        start = self._start = time.perf_counter()
        output: Any = None
        delivered = 0
        try:
            if self.monitor is not None:
                self.monitor.start(self.snapshot)
            self.source.open()
            try:
                for t in threads:
                    t.start()
                delivered = self._sink_loop(start)
                self._sink_open = False
                output = self.sink.close(ok=True)
            except BaseException as exc:
                self._fail(exc)
            finally:
                self._wind_down(threads)
        except BaseException as exc:  # the monitor or the source could not start
            self._fail(exc)
        finally:
            try:
                self.source.close()
            finally:
                self.executor.close()
        if self._error is not None:
            if self.monitor is not None:
                self.monitor.stop(None)
            raise self._error
        wall = time.perf_counter() - self._called
        report = self._report(delivered, wall, output, setup=start - self._called)
        if self.monitor is not None:
            self.monitor.stop(report)
        return report

    def _wind_down(self, threads: list[threading.Thread]) -> None:
        """Join every thread, end every stage's run, release every slot and, after a
        failure, the sink; each step runs even when one before it raised."""
        self._join(threads)
        for run in self.runs:
            try:
                run.finish()
            except BaseException as exc:
                exc.add_note(f"while stage {run.name!r} finished")
                self._fail(exc)
        for batch in self._reorder.drain():
            batch.release()
        if self._error is not None:
            for pool in self._pools():
                pool.release_all()
            if self._sink_open:
                self._sink_open = False
                self.sink.close(ok=False)

    def _join(self, threads: list[threading.Thread]) -> None:
        if self._error is None:
            for t in threads:
                if t.ident is not None:
                    t.join()
            return
        deadline = time.monotonic() + STOP_GRACE_S
        for t in threads:
            if t.ident is not None:
                t.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            self._error.add_note(
                f"{len(stuck)} thread(s) were still inside user code {STOP_GRACE_S:g} s after "
                f"the failure and were left behind: {', '.join(stuck)}"
            )

    def _open_sink(self, spec: FrameSpec) -> None:
        info = dict(getattr(self.source, "info", {}))
        for stage in self.stages:  # what stages tell the sink (a grouping's options)
            info.update(stage.facts or {})
        self.sink.open(spec, info)
        self._sink_open = True

    def _declared_spec(self) -> FrameSpec:
        """What the sink would get with no frames to show it: the last spec a stage that
        replaces frames declares, else the source's."""
        for stage in reversed(self.stages):
            if stage.spec is not None and stage.into is None:
                return stage.spec
        return self.source.spec

    def _sink_loop(self, start: float) -> int:
        stats, inbox = self.stats[-1], self.channels[-1]
        total = self.source.length
        delivered = 0
        while True:
            t0 = time.perf_counter()
            blocked = len(self._reorder) > 0  # batches wait for a missing one: head-of-line
            item = inbox.get()
            if item is END:
                break
            t1 = time.perf_counter()
            if blocked:
                self._hol_wait += t1 - t0
            for batch in self._reorder.push(item.seq, item):
                batch.hand_over("sink")
                if not self._sink_open:
                    self._open_sink(batch.pool.spec)
                try:
                    if batch.count:
                        self.sink.write(batch.frames, batch.index, batch.meta)
                except BaseException as exc:
                    exc.add_note(f"in the sink, {batch.describe()}")
                    raise
                batch.release()
                delivered += batch.count
                self._delivered = delivered
                if self.progress is not None:
                    elapsed = time.perf_counter() - start
                    note = self._calls_saved()
                    self.progress(Progress(delivered, total, elapsed, self._slowest(), note))
            stats.add(frames=item.count, busy=time.perf_counter() - t1, wait_in=t1 - t0)
        if len(self._reorder):
            raise RuntimeError(f"internal error: {len(self._reorder)} batches never came in order")
        if not self._sink_open:  # no frames at all: the sink still opens and closes
            self._open_sink(self._declared_spec())
        return delivered

    def _calls_saved(self) -> str:
        """``"calls saved 47%"`` for a run with a stage that shares answers, else ``""``."""
        for run in self.runs:
            figures = run.summary() if run.stage.make_strategy is not None else None
            if figures and "calls_saved" in figures:
                return f"calls saved {figures['calls_saved']:.0%}"
        return ""

    def _slowest(self) -> str:
        busiest = max(self.stats, key=lambda s: s.busy_s / max(s.workers, 1))
        return busiest.name

    def _extra(self) -> dict[str, Any]:
        """Stages' own figures (grouping, reuse) and the executor's (where batches went)."""
        extra = {r.name: figures for r in self.runs if (figures := r.summary()) is not None}
        summary = getattr(self.executor, "summary", None)
        figures = summary() if callable(summary) else None
        if figures:
            extra["executor"] = figures
        for name, part in (("source", self.source), ("sink", self.sink)):
            if notes := part.notes():
                extra[name] = notes
        return extra

    def _report(self, frames: int, wall: float, output: Any, *, setup: float) -> RunReport:
        for st, ch in zip(self.stats[1:], self.channels, strict=True):
            st.queue_high_water = ch.high_water
        pools = self._pools()
        return RunReport(
            frames=frames,
            wall_s=round(wall, 6),
            fps=round(frames / wall, 3) if wall > 0 else 0.0,
            stages=tuple(s.summary() for s in self.stats),
            pool_slots=self.slots,
            pool_high_water_slots=sum(p.high_water for p in pools),
            pool_high_water_bytes=sum(p.high_water * p.slot_nbytes for p in pools),
            pool_bytes=sum(p.nbytes for p in pools),
            reorder_high_water=self._reorder.high_water,
            head_of_line_wait_s=round(self._hol_wait, 6),
            batch_size=self.pool.batch_size,
            setup_s=round(setup, 6),
            memory_budget=self.plan.budget,
            sizing=self.plan.why,
            output=output,
            failures=tuple(self.dead.snapshot()),
            extra=self._extra(),
        )

    def snapshot(self) -> RunSnapshot:
        """The run's figures right now, for monitors: cheap, thread-safe, any time.

        Besides the counters of every stage and pool it carries the error a stage measured
        recently (``StageSnapshot.quality``, from a stream or strategy that
        :class:`~.report.MeasuresQuality`, such as reuse) and what the source reports of
        its reads (``source_figures``, from a source that :class:`~.report.ReportsFigures`,
        such as a store's cache tiers).
        """
        depths = [0, *[len(ch) for ch in self.channels]]
        capacities = [0, *[ch.capacity for ch in self.channels]]
        quality = [None, *[_quality(run) for run in self.runs], None]
        stages = []
        for k, st in enumerate(self.stats):
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
            PoolSnapshot(p.name, p.slots, p.in_use, p.high_water, p.slot_nbytes)
            for p in self._pools()
        )
        return RunSnapshot(
            elapsed_s=time.perf_counter() - self._start,
            frames=self._delivered,
            total=self.source.length,
            batch_size=self.pool.batch_size,
            stages=tuple(stages),
            pools=pools,
            reorder_depth=len(self._reorder),
            head_of_line_wait_s=self._hol_wait,
            failures=len(self.dead.snapshot()),
            extra={r.name: dict(f) for r in self.runs if (f := r.summary()) is not None},
            source_figures=_source_figures(self.source),
        )

    def leaks(self) -> dict[str, int]:
        """Slots still held per pool after the run (all zero unless something is wrong)."""
        return {p.name: p.acquired - p.released for p in self._pools()}


@functools.cache
def _implements(kind: type, protocol: type) -> bool:
    """Whether objects of ``kind`` have the methods of ``protocol`` (a runtime protocol).

    Cached by type: ``isinstance`` against a protocol costs about 10 µs a call, too much
    for a snapshot taken many times a second.
    """
    return issubclass(kind, protocol)


def _quality(run: StageRun) -> StageQuality | None:
    """The error a stage's stream or strategy measured recently, if it measures one."""
    for part in (run.stream, run.strategy):
        if part is not None and _implements(type(part), MeasuresQuality):
            return cast(MeasuresQuality, part).quality()
    return None


def _source_figures(source: Source) -> SourceFigures:
    """What ``source`` reports of its reads, if it reports anything.

    Raises:
        TypeError: its ``figures()`` returned something other than :class:`SourceFigures`.
    """
    if not _implements(type(source), ReportsFigures):
        return SourceFigures()
    figures = cast(ReportsFigures, source).figures()
    if not isinstance(figures, SourceFigures):
        raise TypeError(
            f"{type(source).__name__}.figures() must return a SourceFigures "
            f"(hyperframes.engine.report), got {type(figures).__name__}"
        )
    return figures
