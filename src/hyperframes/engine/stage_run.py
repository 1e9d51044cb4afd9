"""One run's state of a stage: the call with retries and fallback, and where results land.

A :class:`~hyperframes.engine.stage.Stage` is a frozen description; :func:`start_run`
makes a :class:`StageRun` for one run, which the runner owns and drops at the end. It
holds the stream or strategy of that run, the function as the run's executor runs it,
and the stage's output pool: the one the run's plan made where the stage declares its
frames, else one made when a result of another shape needs it; and its scratch pool, for
the backups of retried batches and the frames of a failing batch tried one by one.

Longer than 300 lines: the three kinds of run are one class and two small subclasses
that share the call (retries, backups, fallback) and the landing of its results.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ..errors import Cancelled, StageError
from ..executors import Executor, ThreadExecutor
from ..frames import Batch, FramePool, FrameSpec, StageFailure
from .faults import DeadLetters, Retry
from .stage import Decided, Stage, Strategy, Stream, Streamed


class StageRun:
    """The state of ``stage`` in one run, of the plain kind: its function on every batch,
    the results landed. Made by :meth:`Stage.start` through :func:`start_run`, which picks
    the kind.

    Every kind answers the runner the same way: :meth:`apply` a batch, :meth:`flush` at
    the end of the input, :meth:`finish` at the end of the run, :meth:`summary` for the
    report. ``part`` is the stream or strategy of the kinds that have one.
    """

    part: Stream | Strategy | None = None

    def __init__(
        self,
        stage: Stage,
        *,
        run_fn: Callable[..., Any] | None,
        allocate: Callable[[int, str], Any],
        stopped: threading.Event,
        pool: FramePool | None = None,
        scratch: FramePool | None = None,
    ) -> None:
        self.stage = stage
        self.scratch = scratch  # planned: retry backups and frames tried alone
        self.stopped = stopped
        self.name = stage.name
        self.into = stage.into
        self._run_fn = run_fn
        self._allocate = allocate
        self._out_pool = pool  # planned, or made from the first result that needs one
        self._lock = threading.Lock()

    def finish(self) -> None:
        """End of a run: stop what the stream or strategy started (its threads)."""
        if self.part is not None:
            self.part.close()

    @property
    def out_pool(self) -> FramePool | None:
        return self._out_pool

    def summary(self) -> Mapping[str, Any] | None:
        """Stage-specific figures (grouping, reuse: a typed ``engine.figures.StageFigures``,
        or a mapping from a stream or strategy of the user's), if any."""
        return None if self.part is None else self.part.summary()

    def apply(self, batch: Batch, *, slots: int, dead: DeadLetters) -> list[Batch]:
        """Run the stage on ``batch``; return the handles of the results now ready (maybe
        moved to the stage's own pool; a stream or strategy may hold a batch back and
        return it later)."""
        results = self._compute(batch, dead)
        return [self._land(batch, results, slots=slots)]

    def flush(self, *, slots: int, dead: DeadLetters) -> list[Batch]:
        """The input has ended: the batches this stage still holds, decided."""
        return []

    # -- calling, with retries and per-frame fallback -----------------------------------

    def _compute(self, batch: Batch, dead: DeadLetters) -> Any:
        """The results for ``batch``; drops frames that fail for good from it."""
        policy = self.stage.faults
        if policy is None and not dead.isolating:
            return self._call(batch)
        policy = policy or Retry(retries=0)
        with self._scratch_for(batch.spec, batch.count) as (pool, slot):
            backup = pool.view(slot, batch.spec)[: batch.count]
            np.copyto(backup, batch.frames)
            try:
                return self._call_with_retries(batch, backup, policy)
            except Exception:
                if not dead.isolating:
                    raise
            return self._per_frame(batch, backup, policy, dead)

    @contextlib.contextmanager
    def _scratch_for(self, spec: FrameSpec, count: int) -> Iterator[tuple[FramePool, int]]:
        """A slot for ``count`` frames of ``spec`` while it is needed: one of the plan's
        scratch pool (declared in the stage's footprint; it holds the smaller frames of an
        input of several sizes too), or of a pool of its own where the frames are not
        those the plan foresaw (a stage before it that did not declare its frames) or no
        plan made one (a run started by hand)."""
        pool = self.scratch
        if pool is None or count > pool.capacity(spec):
            pool = FramePool(spec, batch_size=count, slots=1, name="backup")
        slot = pool.acquire(holder=self.name)
        try:
            yield pool, slot
        finally:
            pool.release(slot)

    def _call(self, batch: Batch) -> Any:
        if self._run_fn is None:
            raise RuntimeError(f"stage {self.name!r} has no function to call")
        result = self.stage.call(self._run_fn, batch)
        return batch.frames if result is None else result

    def _call_with_retries(self, batch: Batch, backup: np.ndarray, policy: Retry) -> Any:
        for attempt in range(policy.retries + 1):
            try:
                return self._call(batch)
            except Exception:
                np.copyto(batch.frames, backup)
                if attempt == policy.retries:
                    raise
                if self.stopped.wait(policy.delay(attempt)):  # the run failed meanwhile
                    raise Cancelled("the pipeline stopped during a retry's back-off") from None
        raise AssertionError("unreachable")

    def _per_frame(self, batch: Batch, backup: np.ndarray, policy: Retry, dead: DeadLetters) -> Any:
        kept: list[int] = []
        parts: list[Any] = []
        for j in range(batch.count):
            try:
                part = self._alone(batch, j, backup[j : j + 1], policy)
            except Exception as exc:
                dead.add(self.name, int(batch.index[j]), exc)
                continue
            kept.append(j)
            parts.append(part)
        np.copyto(batch.frames, backup)
        batch.keep(kept)
        return self._joined(parts, batch)

    def until_failure(self, batch: Batch, *, slots: int) -> Batch:
        """After this stage failed on ``batch``, a batch of one input's frames: its frames
        tried one by one, in order. The frames before the first that fails go on with
        their results, the batch marked failed there (:attr:`Batch.failed`); what a failed
        input keeps is then the same whatever the batch size. Where every frame passes
        alone, the whole batch goes on. A function that wrote its frames before failing
        is tried on what it left, unless ``faults=`` (which keeps a backup) restored them.
        """
        policy = self.stage.faults or Retry(retries=0)
        parts: list[Any] = []
        failure = None
        for j in range(batch.count):
            frame = batch.frames[j : j + 1].copy()
            try:
                parts.append(self._alone(batch, j, frame, policy))
            except Exception as exc:
                at = batch.meta.get("input_frame", batch.index)[j]
                failure = StageFailure(self.name, exc, int(batch.meta["input"][j]), int(at))
                break
        batch.keep(list(range(len(parts))))
        landed = self._land(batch, self._joined(parts, batch), slots=slots)
        landed.failed = failure
        return landed

    def _alone(self, batch: Batch, j: int, frame: np.ndarray, policy: Retry) -> Any:
        """The results for frame ``j`` of ``batch`` alone (``frame``: its pixels to try)."""
        with self._scratch_for(batch.spec, 1) as (pool, slot):
            pool.view(slot, batch.spec)[0] = frame[0]
            try:
                part = self._call_with_retries(batch.one(j, pool, slot), frame, policy)
            except Exception as exc:
                at = f"frame {int(batch.index[j])}"
                if "input_frame" in batch.meta:  # (one of many inputs: its own frame)
                    at = f"frame {int(batch.meta['input_frame'][j])} of its input"
                exc.add_note(f"in stage {self.name!r}, {at} alone")
                raise
            if isinstance(part, np.ndarray) and np.shares_memory(part, pool.view(slot)):
                part = part.copy()  # written in place: the slot goes to the next frame
        return part

    def _joined(self, parts: list[Any], batch: Batch) -> Any:
        """The results of frames tried alone, as one batch's results."""
        if self.into is not None:
            return [value for part in parts for value in _as_list(part, 1, self, batch)]
        if not parts:
            return batch.frames
        return np.concatenate([np.asarray(p) for p in parts])

    # -- landing the results ------------------------------------------------------------

    def _land(self, batch: Batch, result: Any, *, slots: int) -> Batch:
        if self.into is not None:
            values = _as_list(result, batch.count, self, batch)
            batch.meta[self.into] = _as_column(values)
            return batch
        if not isinstance(result, np.ndarray):
            raise StageError(
                f"stage {self.name!r} returned {type(result).__name__} for {batch.describe()}; "
                f"a stage function must return an array of {batch.count} frames (or use "
                "into='name' for per-frame values)"
            )
        if result.ndim < 2 or len(result) != batch.count:
            raise StageError(
                f"stage {self.name!r} returned an array of shape {result.shape} for "
                f"{batch.describe()}; expected {batch.count} frames along the first axis"
            )
        got = FrameSpec(result.shape[1:], result.dtype)
        frames = batch.frames
        if self._out_pool is None and got == batch.spec and self.stage.spec in (None, got):
            if not (result is frames or _same_memory(result, frames)):
                np.copyto(frames, result)
            return batch
        pool = self._output_pool(got, batch, slots=slots)
        # frames of an input of a smaller size (Batch.sized) may give smaller results
        follows = batch.sized is not None and self.stage.spec is None and pool.spec.holds(got)
        if got != pool.spec and not follows:
            hint = "a stage must return one shape and dtype for every batch"
            if batch.sized is not None:
                hint = (
                    "the inputs come in several sizes and its frames follow them: read "
                    "them at one (size=, --size) or declare its largest frames (spec=)"
                )
            raise StageError(
                f"stage {self.name!r} returned frames of {got.describe()} for "
                f"{batch.describe()}, expected {pool.spec.describe()} (fixed by "
                f"{'its declared spec' if self.stage.spec else 'its first batch'}); {hint}"
            )
        slot = pool.acquire(holder=self.name)
        moved = batch.moved_to(pool, slot, None if got == pool.spec else got)
        np.copyto(moved.frames, result)
        return moved

    def _output_pool(self, got: FrameSpec, batch: Batch, *, slots: int) -> FramePool:
        with self._lock:
            if self._out_pool is None:
                spec = self.stage.spec or got
                size = batch.pool.batch_size
                what = (
                    f"stage {self.name!r}'s pool of {slots} slots x {size} frames of "
                    f"{spec.describe()}"
                )
                buffer = None
                if self._allocate is not None:
                    buffer = self._allocate(FramePool.bytes_needed(spec, size, slots), what)
                self._out_pool = FramePool(
                    spec, batch_size=size, slots=slots, name=self.name, buffer=buffer
                )
            return self._out_pool


class StreamRun(StageRun):
    """An ordered stage that may hold batches back (grouping, a window's halo)."""

    def __init__(self, stage: Stage, stream: Stream, **kwargs: Any) -> None:
        super().__init__(stage, **kwargs)
        self.part = self.stream = stream

    def apply(self, batch: Batch, *, slots: int, dead: DeadLetters) -> list[Batch]:
        return self.stream.push(batch)

    def flush(self, *, slots: int, dead: DeadLetters) -> list[Batch]:
        return self.stream.finish()


class StrategyRun(StageRun):
    """A stage whose strategy decides which frames to compute (reuse), calling the
    function with retries and fallback on the frames it chooses."""

    def __init__(self, stage: Stage, strategy: Strategy, **kwargs: Any) -> None:
        super().__init__(stage, **kwargs)
        self.part = self.strategy = strategy
        if self.scratch is not None:
            strategy.use_scratch(self.scratch)

    def apply(self, batch: Batch, *, slots: int, dead: DeadLetters) -> list[Batch]:
        decided = self.strategy.run(batch, lambda b: self._compute(b, dead))
        return [self._land(b, results, slots=slots) for b, results in decided]

    def flush(self, *, slots: int, dead: DeadLetters) -> list[Batch]:
        decided = self.strategy.finish(lambda b: self._compute(b, dead))
        return [self._land(b, results, slots=slots) for b, results in decided]


def start_run(
    stage: Stage,
    executor: Executor | None = None,
    *,
    batch_size: int = 1,
    allocate: Callable[[int, str], Any] | None = None,
    stopped: threading.Event | None = None,
    pool: FramePool | None = None,
    scratch: FramePool | None = None,
) -> StageRun:
    """``stage``'s fresh state for one run under ``executor``, of its kind: its stream made
    for ``batch_size``, its strategy, or the plain run. ``pool``: the output pool the plan
    made for it; else ``allocate(nbytes, what)`` (the executor's by default) makes one when
    a result shows other frames. ``stopped`` is set when the run fails (ends back-offs)."""
    executor = executor or ThreadExecutor()
    fn = stage.fn and executor.remote(
        stage.fn, stage=stage.name, workers=stage.workers * stage.split
    )
    common: dict[str, Any] = {"run_fn": fn, "stopped": stopped or threading.Event(), "pool": pool,
                              "scratch": scratch}  # fmt: skip
    common["allocate"] = allocate or (lambda nbytes, what: executor.allocate(nbytes))
    match stage.kind:
        case Streamed(make=make):
            return StreamRun(stage, _made(stage, make(batch_size), Stream), **common)
        case Decided(make=make):
            return StrategyRun(stage, _made(stage, make(), Strategy), **common)
        case _:
            return StageRun(stage, **common)


def _made(stage: Stage, part: Any, kind: type[Any]) -> Any:
    """``part``, checked to be the ``kind`` (a :class:`Stream` or :class:`Strategy`) its
    stage was made for."""
    if not isinstance(part, kind):
        raise TypeError(
            f"stage {stage.name!r}: its maker returned a {type(part).__name__}, not a "
            f"hyperframes.{kind.__name__}; subclass {kind.__name__} (docs/stages.md)"
        )
    return part


def _as_list(result: Any, count: int, stage: StageRun, batch: Batch) -> list[Any]:
    try:
        values = list(result)
    except TypeError:
        values = None
    if values is None or len(values) != count:
        got = "not a sequence" if values is None else f"{len(values)} values"
        raise StageError(
            f"stage {stage.name!r} returned {got} for {batch.describe()}; with into= a stage "
            f"function must return one value per frame ({count})"
        )
    return values


def _as_column(values: list[Any]) -> np.ndarray:
    """Per-frame values as one array: numeric when they all are, else ``object``."""
    if values and all(isinstance(v, int | float | np.number | bool) for v in values):
        return np.asarray(values)
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.strides == b.strides
    )
