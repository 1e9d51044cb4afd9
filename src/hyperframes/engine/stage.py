"""A stage: a function over batches, and how its result lands back in a pool.

A stage function takes the ``(n, *shape)`` frames of a batch and returns ``n`` results:

* frames (an array of ``n`` frames). If it works in place, or returns frames of the same
  spec, the result stays in (or is copied into) the batch's slot. If it returns another
  shape or dtype, the result is copied into a slot of the stage's own output pool and the
  batch moves there. The first batch fixes a stage's output spec unless it is declared.
* or, with ``into="key"``, one value per frame (labels, boxes, numbers) that is stored in
  ``batch.meta[key]`` while the frames pass on unchanged.

What a stage adds around the call: retries and per-frame fallback (``engine.faults``),
reuse of results inside a hyperframe (``engine.reuse``), neighbour frames
(``engine.window``), and strict input order (``ordered``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import StageError
from ..executors import Executor, ThreadExecutor
from .faults import DeadLetters, FaultPolicy
from .frames import Batch, FramePool, FrameSpec

Call = Callable[[Callable[..., Any], Batch], Any]
"""How a stage hands a batch to its function: ``call(fn, batch)`` returns the batch's results
(``None``: the frames were written in place). ``fn`` is the user function as the executor
runs it (see ``hyperframes.executors``)."""


def on_frames(fn: Callable[..., Any], batch: Batch) -> Any:
    """The plain call: ``fn(frames)``, which must return its results."""
    result = fn(batch.frames)
    if result is None:
        raise StageError(
            f"the stage function returned None for {batch.describe()}; it must return the "
            "frames (return its input if it changed it in place)"
        )
    return result


class Stream(Protocol):
    """An ordered, stateful stage that may hold batches back (to look ahead).

    ``holds`` is the most batches it keeps at once; the runner adds that many slots to the
    pool so the held batches can never starve the source.
    """

    holds: int

    def push(self, batch: Batch) -> list[Batch]:
        """Take the next batch in order; return the batches now ready to go on, in order."""
        ...

    def finish(self) -> list[Batch]:
        """The input has ended: return every batch still held, in order."""
        ...


class Strategy(Protocol):
    """Decides which frames of a batch to compute and fills in the rest (e.g. reuse)."""

    def run(self, batch: Batch, compute: Callable[[Batch], Any]) -> Any:
        """Return the results for every frame of ``batch``, calling ``compute`` as needed."""
        ...

    def summary(self) -> dict[str, Any]: ...


@dataclass
class Stage:
    """One step of a pipeline.

    Attributes:
        name: shown in reports and errors, e.g. ``"map:invert"``.
        fn: the user function; it is what an executor ships to where it runs.
        call: how a batch is handed to ``fn`` (see :data:`Call`).
        workers: threads that run ``process`` concurrently.
        spec: the declared output spec, or ``None`` to take it from the first result.
        queue: capacity of the stage's input channel.
        into: store per-frame results in ``batch.meta[into]`` instead of replacing frames.
        ordered: see every batch in input order on one worker (stateful stages).
        faults: retries and fallback; ``None`` calls once and lets errors stop the run.
        make_stream: makes the state of a stream stage for a batch size, fresh for each
            run (then ``fn`` is not used and the stage is ordered).
        make_strategy: makes the per-run state of a compute strategy such as reuse.
        split: calls of ``fn`` the strategy may make at once on parts of one batch.
    """

    name: str
    fn: Callable[..., Any] | None = None
    call: Call = on_frames
    workers: int = 1
    spec: FrameSpec | None = None
    queue: int | None = None
    into: str | None = None
    ordered: bool = False
    faults: FaultPolicy | None = None
    make_stream: Callable[[int], Stream] | None = None
    make_strategy: Callable[[], Strategy] | None = None
    split: int = 1
    stream: Stream | None = field(default=None, init=False, repr=False)
    strategy: Strategy | None = field(default=None, init=False, repr=False)
    _run_fn: Callable[..., Any] | None = field(default=None, init=False, repr=False)
    _allocate: Callable[[int, str], Any] | None = field(default=None, init=False, repr=False)
    _out_pool: FramePool | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")
        if self.make_stream is not None or self.make_strategy is not None:
            self.ordered = True
        if self.fn is None and self.make_stream is None:
            raise ValueError(f"stage {self.name!r} needs a function or a stream")
        if self.ordered and self.workers != 1:
            raise ValueError(
                f"stage {self.name!r} keeps state across batches, so it runs on one worker "
                f"in input order; got workers={self.workers}"
            )
        if self.queue is None:
            self.queue = 2 * self.workers + 1
        elif self.queue < 1:
            raise ValueError(f"queue must be at least 1, got {self.queue}")

    def held(self, batch_size: int) -> int:
        """The batches this stage may hold back at once with batches of ``batch_size``."""
        return 0 if self.make_stream is None else self.make_stream(batch_size).holds

    def reset(
        self,
        executor: Executor | None = None,
        *,
        batch_size: int = 1,
        allocate: Callable[[int, str], Any] | None = None,
    ) -> None:
        """Start a run under ``executor``: fresh state, no output pool yet.

        ``allocate(nbytes, what)`` makes the block of this stage's output pool, if it
        needs one (the run counts it against its memory budget); by default the
        executor's ``allocate``.
        """
        executor = executor or ThreadExecutor()
        self._out_pool = None
        self._allocate = allocate or (lambda nbytes, what: executor.allocate(nbytes))
        self._run_fn = None
        if self.fn is not None:
            self._run_fn = executor.remote(
                self.fn, stage=self.name, workers=self.workers * self.split
            )
        self.stream = None if self.make_stream is None else self.make_stream(batch_size)
        self.strategy = None if self.make_strategy is None else self.make_strategy()

    def finish(self) -> None:
        """End of a run: stop what the strategy started (its threads)."""
        close = getattr(self.strategy, "close", None)
        if close is not None:
            close()

    @property
    def out_pool(self) -> FramePool | None:
        return self._out_pool

    def summary(self) -> dict[str, Any] | None:
        """Stage-specific figures for the run report (grouping, reuse), if any."""
        for part in (self.stream, self.strategy):
            if part is not None and hasattr(part, "summary"):
                figures: dict[str, Any] = part.summary()
                return figures
        return None

    def apply(self, batch: Batch, *, slots: int, dead: DeadLetters) -> Batch:
        """Run the stage on ``batch`` and return the handle of the result (maybe moved)."""
        if self.strategy is not None:
            results = self.strategy.run(batch, lambda b: self._compute(b, dead))
        else:
            results = self._compute(batch, dead)
        batch.halo = None
        return self._land(batch, results, slots=slots)

    # -- calling, with retries and per-frame fallback -----------------------------------

    def _compute(self, batch: Batch, dead: DeadLetters) -> Any:
        """The results for ``batch``; drops frames that fail for good from it."""
        policy = self.faults
        if policy is None and not dead.isolating:
            return self._call(batch)
        policy = policy or FaultPolicy()
        backup = batch.frames.copy()
        try:
            return self._call_with_retries(batch, backup, policy)
        except Exception:
            if not dead.isolating:
                raise
        return self._per_frame(batch, backup, policy, dead)

    def _call(self, batch: Batch) -> Any:
        if self._run_fn is None:
            raise RuntimeError(f"stage {self.name!r} was not started (reset) before use")
        result = self.call(self._run_fn, batch)
        return batch.frames if result is None else result

    def _call_with_retries(self, batch: Batch, backup: np.ndarray, policy: FaultPolicy) -> Any:
        for attempt in range(policy.retries + 1):
            try:
                return self._call(batch)
            except Exception:
                np.copyto(batch.frames, backup)
                if attempt == policy.retries:
                    raise
                time.sleep(policy.delay(attempt))
        raise AssertionError("unreachable")

    def _per_frame(
        self, batch: Batch, backup: np.ndarray, policy: FaultPolicy, dead: DeadLetters
    ) -> Any:
        extended = None if batch.halo is None else batch.extended()
        kept: list[int] = []
        parts: list[Any] = []
        for j in range(batch.count):
            single = _single(batch, j, backup, extended)
            try:
                part = self._call_with_retries(single, single.frames.copy(), policy)
            except Exception as exc:
                exc.add_note(f"in stage {self.name!r}, frame {int(batch.index[j])} alone")
                dead.add(self.name, int(batch.index[j]), exc)
                continue
            kept.append(j)
            parts.append(part)
        np.copyto(batch.frames, backup)
        batch.keep(kept)
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
        if self._out_pool is None and got == batch.pool.spec and self.spec in (None, got):
            if not (result is frames or _same_memory(result, frames)):
                np.copyto(frames, result)
            return batch
        pool = self._output_pool(got, batch, slots=slots)
        if got != pool.spec:
            raise StageError(
                f"stage {self.name!r} returned frames of {got.describe()} for "
                f"{batch.describe()}, expected {pool.spec.describe()} (fixed by "
                f"{'its declared spec' if self.spec else 'its first batch'}); a stage must "
                "return one shape and dtype for every batch"
            )
        slot = pool.acquire(holder=self.name)
        moved = batch.moved_to(pool, slot)
        np.copyto(moved.frames, result)
        return moved

    def _output_pool(self, got: FrameSpec, batch: Batch, *, slots: int) -> FramePool:
        with self._lock:
            if self._out_pool is None:
                spec = self.spec or got
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


def _single(batch: Batch, j: int, backup: np.ndarray, extended: np.ndarray | None) -> Batch:
    """Frame ``j`` of ``batch`` as a batch of its own (in a one-slot pool of its own)."""
    pool = FramePool(batch.pool.spec, batch_size=1, slots=1, name="fallback")
    slot = pool.acquire(holder="fallback")
    pool.view(slot)[0] = backup[j]
    meta = {k: v[j : j + 1] for k, v in batch.meta.items()}
    halo = None
    if extended is not None and batch.halo is not None:
        before, after = len(batch.halo[0]), len(batch.halo[1])
        halo = (extended[j : j + before], extended[j + before + 1 : j + before + 1 + after])
    return Batch(batch.seq, batch.index[j : j + 1], pool, slot, meta, halo=halo)


def _as_list(result: Any, count: int, stage: Stage, batch: Batch) -> list[Any]:
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
