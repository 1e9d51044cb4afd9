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

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import StageError
from ..frames import Batch, FramePool, FrameSpec
from ..io.base import Footprint
from .faults import Retry
from .watch import StageQuality

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


class _Optional:
    """What every kind of stage may do besides its own calls (each does nothing here)."""

    def close(self) -> None:
        """The run has ended, well or not: stop what it started (threads, files)."""

    def summary(self) -> Mapping[str, Any] | None:
        """Its figures for the run report (``report.extra[stage name]``), or ``None``."""
        return None

    def quality(self) -> StageQuality | None:
        """The error it measured recently (shown live, e.g. reuse's), or ``None``."""
        return None


class Stream(_Optional, ABC):
    """A stage that sees every batch in order and may hold batches back: to look ahead,
    or to keep state across frames. ``Pipeline.stage(make, keeps=...)`` adds one, made
    fresh for each run by ``make(batch_size)``; what it holds back is declared in
    ``keeps`` (a :class:`~hyperframes.io.base.Footprint`), so that the plan gives the
    pools room for it and held batches never starve the source.

    Required: :meth:`push` and :meth:`finish`. Optional: :meth:`close`, :meth:`summary`,
    :meth:`quality`. ``docs/stages.md`` has an example.
    """

    @abstractmethod
    def push(self, batch: Batch) -> list[Batch]:
        """Take the next batch in order; return the batches now ready to go on, in order."""

    @abstractmethod
    def finish(self) -> list[Batch]:
        """The input has ended: return every batch still held, in order."""


class Strategy(_Optional, ABC):
    """A stage that decides which frames its function computes and fills in the rest
    (reuse is one). ``Pipeline.stage(make, fn=...)`` adds one, made fresh for each run by
    ``make()``; it may hold batches back, to decide them knowing the frames after, as its
    ``keeps`` declares.

    Required: :meth:`run` and :meth:`finish`. Optional: :meth:`use_scratch`,
    :meth:`close`, :meth:`summary`, :meth:`quality`. ``docs/stages.md`` has an example.
    """

    def use_scratch(self, pool: FramePool) -> None:
        """Before the first batch: the pool of scratch slots the run's plan made for the
        ``scratch_batches`` its ``keeps`` declares (shared with the stage's retry
        backups), of the frames it gets. Ignored by default."""

    @abstractmethod
    def run(self, batch: Batch, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        """Take the next batch in order; return the batches now decided, in order, each
        with its results, calling ``compute`` (on any batch it holds) as needed."""

    @abstractmethod
    def finish(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        """The input has ended: decide and return every batch still held, in order."""


@dataclass(frozen=True)
class Streamed:
    """The kind of a stage whose batches pass, in order, through a stream made fresh for
    each run (grouping, a window's halo); such a stage has no function of its own.

    Attributes:
        make: makes the stream for the run's batch size.
        keeps: what the stream holds back, the frames around each frame it reads, and
            whether it keeps state across frames (the plan gives the pools room for it).
    """

    make: Callable[[int], Stream]
    keeps: Footprint


@dataclass(frozen=True)
class Decided:
    """The kind of a stage whose strategy, made fresh for each run, decides which frames
    its function computes (reuse).

    Attributes:
        make: makes the strategy.
        split: calls of the function the strategy may make at once on parts of a batch.
        keeps: what the strategy holds back (``None``: nothing).
    """

    make: Callable[[], Strategy]
    split: int = 1
    keeps: Footprint | None = None


Kind = Streamed | Decided | None
"""What a stage is besides its function: ``None`` is the plain kind, the function on
every batch (``engine.stage_run`` starts each kind's run)."""


@dataclass(frozen=True)
class Stage:
    """One step of a pipeline: a frozen description, shared by every run that uses it.

    Each run starts its own run of it (:func:`~hyperframes.engine.stage_run.start_run`),
    which holds that run's state (the stream, the strategy, the function
    as the executor runs it, the output pool) and is dropped when the run ends; so one
    pipeline can run twice, or from two threads, and an idle pipeline holds no pools.

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
        kind: :class:`Streamed` (then ``fn`` is not used), :class:`Decided`, or ``None``
            (plain); a stage of either of the first two kinds is ordered.
        facts: what the stage tells the sink about the frames (merged into the ``info``
            the sink opens with), e.g. the grouping options a grouping stage used.
    """

    name: str
    fn: Callable[..., Any] | None = None
    call: Call = on_frames
    workers: int = 1
    spec: FrameSpec | None = None
    queue: int | None = None
    into: str | None = None
    ordered: bool = False
    faults: Retry | None = None
    kind: Kind = None
    facts: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")
        if self.kind is not None:
            object.__setattr__(self, "ordered", True)
        if self.fn is None and not isinstance(self.kind, Streamed):
            raise ValueError(f"stage {self.name!r} needs a function or a stream")
        if self.ordered and self.workers != 1:
            raise ValueError(
                f"stage {self.name!r} keeps state across batches, so it runs on one worker "
                f"in input order; got workers={self.workers}"
            )
        if self.queue is None:
            object.__setattr__(self, "queue", 2 * self.workers + 1)
        elif self.queue < 1:
            raise ValueError(f"queue must be at least 1, got {self.queue}")

    @property
    def split(self) -> int:
        """Calls of ``fn`` made at once on parts of one batch (a strategy's; else 1)."""
        return self.kind.split if isinstance(self.kind, Decided) else 1

    def footprint(self, *, isolating: bool = False) -> Footprint:
        """What this stage takes of a run's memory, as data (see ``engine.plan``); a plain
        stage that is ordered keeps the user's state across frames. Besides what its kind
        keeps, a batch's backup for each call at once where it retries or the run isolates
        failing frames (``isolating``), and a slot for the frame tried alone where it
        isolates them."""
        held = None if self.kind is None else self.kind.keeps
        keeps = held or Footprint(self.name)
        stateful = keeps.stateful or (self.kind is None and self.ordered)
        calls = self.workers * self.split
        backups = calls if self.fn is not None and (self.faults is not None or isolating) else 0
        scratch = keeps.scratch_batches + backups + (calls if backups and isolating else 0)
        return dataclasses.replace(
            keeps, name=self.name, workers=self.workers, spec=self.spec, stateful=stateful,
            scratch_batches=scratch,
        )  # fmt: skip
