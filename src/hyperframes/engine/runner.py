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
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import Cancelled, FramesFailed, StageError, as_run_error
from ..executors import Executor, ThreadExecutor
from ..frames import Batch, FramePool, FrameSpec, StageFailure
from ..io.base import InputFailure, Sink, Source
from ..io.pulse import reading
from .channel import END, Channel
from .faults import DeadLetters
from .memory import Pools, plan_for
from .reorder import ReorderBuffer
from .report import RunReport, StageStats
from .reporting import calls_saved, run_report, run_snapshot, slowest
from .stage import Stage
from .stage_run import StageRun, start_run
from .watch import (
    Monitor,
    Progress,
    ProgressFn,
    RunSnapshot,
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


def refuse_several_sizes(source: Source, stages: Sequence[Stage], sink: Sink) -> None:
    """Refuse, before any work, a source of frames of several sizes (videos of several
    sizes, each read at its own) where a part of the run needs one: a sink that writes
    one video or store, a stage that compares frames across batches (a grouping, a
    reuse, a window).

    Raises:
        ValueError: naming the part and the sizes, and what to pass instead.
    """
    sizes = source.several_sizes
    if sizes is None:
        return
    parts = [f"stage {s.name!r}" for s in stages if s.kind is not None]
    if not sink.takes_sizes:
        parts.append(f"the sink ({type(sink).__name__})")
    if parts:
        raise ValueError(
            f"the inputs' frames come in several sizes ({sizes}), and {parts[0]} needs one: "
            "pass size=(width, height) (--size WxH) to read them all at one size"
        )


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
            refuse_several_sizes(source, self.stages, sink)
            # (where no stage makes frames, no pool of a stage's has to hold a batch's)
            source.fill_by_bytes(all(stage.into is not None for stage in self.stages))
            self.plan = plan_for(
                source, self.stages, sink, sink_spec=self._declared_spec(),
                batch_size=batch_size, slots=slots, memory=memory, isolating=allow_failures > 0,
            )  # fmt: skip
            self.slots = self.plan.slots
            self.memory = Pools(self.plan, self.executor)
            self.pool = self._start_stages()
            sink.grant(self.plan.sink_bytes)
            source.use_memory(self.plan.source_bytes)
        except BaseException:
            self.executor.close()  # stages may have started workers already
            raise
        self.dead = DeadLetters(allow_failures)
        self.monitor = monitor
        self.started_at = time.perf_counter()
        self.delivered = 0
        self.hol_wait = 0.0
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
        self.reorder: ReorderBuffer[Batch] = ReorderBuffer()
        self._sink_open = False
        self._inputs_failed: set[int] = set()  # inputs listed after a stage failed on them
        self._kept = (-1, 0)  # the last input written, and its frames written

    def _start_stages(self) -> FramePool:
        """Start every stage under the executor, with the pool the plan made for each stage
        that declares other frames; return the source's pool."""
        plan, pools = self.plan, self.memory
        self.runs = []
        for stage in self.stages:
            planned, scratch = plan.pool_of(stage.name), plan.scratch_of(stage.name)
            self.runs.append(
                start_run(
                    stage,
                    self.executor,
                    batch_size=plan.batch_size,
                    allocate=pools.allocate,
                    stopped=self.stopped,
                    pool=None if planned is None else pools.make(planned),
                    scratch=None if scratch is None else pools.make(scratch),
                )
            )
        first = plan.pools[0]  # the source's: in its own memory where it has some
        return pools.make(first, buffer=self.source.pool_memory(first.nbytes))

    # -- failure -------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        main = threading.current_thread() is threading.main_thread()
        exc = as_run_error(exc, main_thread=main)
        with self._error_lock:
            if self._error is None and not isinstance(exc, Cancelled):
                self._error = exc
        self.stopped.set()
        for ch in self.channels[:-1]:
            ch.cancel()
        self.channels[-1].stop()  # the sink still writes the batches finished before it
        for pool in self.pools():
            pool.cancel()

    def pools(self) -> list[FramePool]:
        made = [p for r in self.runs for p in (r.out_pool, r.scratch) if p is not None]
        return [self.pool, *made]

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
                    with reading():  # (told to a watcher, in a watched worker process)
                        chunk = self.source.read_into(pool.view(slot))
                    count = len(chunk)
                    if count == 0:
                        pool.release(slot)
                        break
                    sized = None if chunk.spec in (None, pool.spec) else chunk.spec
                    room = pool.batch_size if sized is None else pool.capacity(sized)
                    if count > room:
                        raise StageError(
                            f"the source returned {count} frames for a slot of {room}; a "
                            "source must fill at most len(out) frames (or as many smaller "
                            "ones as the slot fits, where the run lets it: fill_by_bytes)"
                        )
                    index = np.asarray(chunk.index, dtype=np.int64)
                    batch = Batch(seq, index, pool, slot, dict(chunk.meta), sized=sized)
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
        failed = batch.failed  # an earlier stage's: the frames before it still go on
        if failed is not None and not batch.count:
            return [batch]
        try:
            out = run.apply(batch, slots=self.slots, dead=self.dead)
        except (FramesFailed, Cancelled):
            raise
        except Exception as exc:
            exc.add_note(f"in stage {run.name!r}, {batch.describe()}")
            if run.part is not None or not batch.count or "input" not in batch.meta:
                raise
            out = [run.until_failure(batch, slots=self.slots)]  # see Source.input_failed
        except BaseException as exc:
            exc.add_note(f"in stage {run.name!r}, {batch.describe()}")
            raise
        for result in out:  # a failure of this stage is at an earlier frame than failed
            result.failed = result.failed or failed
        return out

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
        start = self.started_at = time.perf_counter()
        output: Any = None
        delivered = 0
        try:
            if self.monitor is not None:
                self.monitor.start(self.snapshot)
            with reading():
                self.source.open()
            try:
                for t in threads:
                    t.start()
                delivered = self._sink_loop(start)
                if not self.stopped.is_set():
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
        report = run_report(self, delivered, wall, output, setup=start - self._called)
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
        for batch in self.reorder.drain():
            batch.release()
        if self._error is not None:
            for pool in self.pools():
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
            blocked = len(self.reorder) > 0  # batches wait for a missing one: head-of-line
            item = inbox.get()
            if item is END:
                break
            t1 = time.perf_counter()
            if blocked:
                self.hol_wait += t1 - t0
            for batch in self.reorder.push(item.seq, item):
                batch.hand_over("sink")
                failed = batch.failed
                if self._left_out(batch):
                    batch.release()
                    if failed is not None and failed.input not in self._inputs_failed:
                        self._input_failed(failed, delivered)
                    continue
                if not self._sink_open:
                    self._open_sink(batch.pool.spec)
                try:
                    if batch.count:
                        self.sink.write_owned(batch.frames, batch.index, batch.meta, batch.release)
                    else:
                        batch.release()
                except BaseException as exc:
                    exc.add_note(f"in the sink, {batch.describe()}")
                    raise
                delivered += batch.count
                self.delivered = delivered
                if failed is not None:  # the frames before the failure are written
                    self._input_failed(failed, delivered)
                if self.progress is not None:
                    elapsed = time.perf_counter() - start
                    notes = (calls_saved(self.runs), self.source.progress_note())
                    note = ", ".join(n for n in notes if n)
                    self.progress(Progress(delivered, total, elapsed, slowest(self.stats), note))
            stats.add(frames=item.count, busy=time.perf_counter() - t1, wait_in=t1 - t0)
        if self.stopped.is_set():  # (a failure: the batches finished before it are written)
            return delivered
        if len(self.reorder):
            raise RuntimeError(f"internal error: {len(self.reorder)} batches never came in order")
        if not self._sink_open:  # no frames at all: the sink still opens and closes
            self._open_sink(self._declared_spec())
        return delivered

    def _left_out(self, batch: Batch) -> bool:
        """Whether ``batch``, met in order, is left out (its input failed earlier)."""
        inputs = batch.meta.get("input")
        if inputs is None or not len(inputs):
            return batch.failed is not None  # no frame before the failure
        k = int(inputs[0])
        if k in self._inputs_failed:
            return True
        kept = self._kept[1] if self._kept[0] == k else 0
        self._kept = (k, kept + batch.count)
        return False

    def _input_failed(self, failed: StageFailure, written: int) -> None:
        """A stage failed on a frame of one input, every frame before it now written: the
        source lists the input and the run goes on without its later frames, or the
        stage's error is raised here."""
        kept = self._kept[1] if self._kept[0] == failed.input else 0
        failure = InputFailure(
            input=failed.input, frame=failed.frame, stage=failed.stage, error=failed.error,
            kept=kept, written=written,
        )  # fmt: skip
        if not self.source.input_failed(failure):
            raise failed.error
        self._inputs_failed.add(failed.input)

    def snapshot(self) -> RunSnapshot:
        """The run's figures right now, for monitors (see :func:`.reporting.run_snapshot`)."""
        return run_snapshot(self)

    def leaks(self) -> dict[str, int]:
        """Slots still held per pool after the run (all zero unless something is wrong)."""
        return {p.name: p.acquired - p.released for p in self.pools()}
