"""The pipeline builder: a source, stages, a sink, and ``run()``.

Example:
    >>> import numpy as np
    >>> frames = np.zeros((100, 72, 128, 3), np.uint8)
    >>> out = Pipeline.from_frames(frames, batch_size=16).map(np.bitwise_not).collect()
    >>> out.shape, int(out[0, 0, 0, 0])
    ((100, 72, 128, 3), 255)

Builder methods return a new pipeline, so a partly built one can be reused.

Longer than 300 lines: the builder is one class whose methods carry the user-facing
docstrings.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .engine.faults import Retry
from .engine.report import RunReport
from .engine.runner import Runner, exclusive
from .engine.stage import Decided, Stage, Strategy, Stream, Streamed
from .engine.watch import Monitor, ProgressFn
from .executors import Executor, get_executor
from .frames import FrameSpec, check_batch_size
from .io.arrays import ArraySource, IndexSource, IterableSource
from .io.base import Footprint, Sink, Source
from .io.callbacks import CallbackSink, CollectSink, NullSink
from .io.handoff import Batches
from .models import PerWorker
from .modes import Reuse, refuse_removed
from .stages import map_stages, name_of, render_stage

if TYPE_CHECKING:
    from .hyper.distance import DistanceKind
    from .hyper.grouping.grouper import Rule
    from .io.tensors import Tensors

DEFAULT_SLOT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Pipeline:
    """A line of stages from a source to a sink. Build with ``Pipeline.from_*``.

    Frames are cut into batches of ``batch_size`` (a power of two) at the source; each
    stage runs on whole batches with its own worker threads; the sink gets frames in
    input order. ``batch_size=None`` (the default) chooses it when the run starts, from
    the frames' bytes and the run's memory budget (see ``hyperframes.engine.sizing``).
    """

    source: Source
    batch_size: int | None = None
    stages: tuple[Stage, ...] = ()
    sink: Sink = field(default_factory=NullSink)

    def __post_init__(self) -> None:
        if self.batch_size is not None:
            check_batch_size(self.batch_size)
        if not isinstance(self.source, Source):
            raise TypeError(f"source must be a hyperframes Source, got {type(self.source)}")

    # -- sources -------------------------------------------------------------------------

    @classmethod
    def from_source(cls, source: Source, *, batch_size: int | None = None) -> Pipeline:
        """Frames from any :class:`~hyperframes.io.base.Source` (a video, images, a store)."""
        return cls(source, batch_size)

    @classmethod
    def from_frames(
        cls,
        frames: np.ndarray | Iterable[np.ndarray],
        *,
        batch_size: int | None = None,
        spec: FrameSpec | None = None,
    ) -> Pipeline:
        """Frames from an ``(N, *shape)`` array or from any iterable of frame arrays.

        Args:
            frames: the frames. An iterable is read lazily, so a generator of a million
                frames never sits in memory at once.
            batch_size: frames per batch, a power of two; ``None`` sizes it by bytes.
            spec: the frame spec, if it should not be taken from the first frame.
        """
        if isinstance(frames, np.ndarray):
            source: Source = ArraySource(frames)
        else:
            source = IterableSource(frames, spec=spec)
        return cls(source, batch_size)

    @classmethod
    def from_generator(
        cls,
        fn: Callable[[int], np.ndarray],
        *,
        count: int,
        spec: FrameSpec,
        workers: int = 1,
        batch_size: int | None = None,
        start: int = 0,
    ) -> Pipeline:
        """Frames rendered by ``fn(i)`` for ``i`` in ``start..start+count-1``, ``workers``
        at a time.

        This is the long-render case: a 30,000-frame animation is rendered in parallel and
        comes out in order, with memory bounded by the pool, not by ``count``.
        """
        if not callable(fn):
            raise TypeError(f"from_generator needs a callable fn(i), got {type(fn).__name__}")

        return cls(IndexSource(count, spec, start), batch_size, (render_stage(fn, spec, workers),))

    # -- stages --------------------------------------------------------------------------

    def map(
        self,
        fn: Callable[[np.ndarray], Any],
        *,
        workers: int = 1,
        name: str | None = None,
        spec: FrameSpec | None = None,
        queue: int | None = None,
        into: str | None = None,
        window: tuple[int, int] | None = None,
        stateful: bool = False,
        reuse: Reuse | None = None,
        faults: Retry | None = None,
        **removed: Any,
    ) -> Pipeline:
        """Add a stage that runs ``fn`` on each batch of frames.

        Args:
            fn: takes the ``(n, *shape)`` frames of a batch and returns ``n`` frames. It may
                write into its input and return it (no copy), or return a new array; frames
                of another shape or dtype go to the stage's own pool. A class (a model that
                loads weights) is made once per worker, its ``setup()`` called first, and
                its instances called so (:mod:`hyperframes.models`).
            workers: threads running ``fn`` at once. Functions that release the GIL
                (OpenCV, most numpy, PyAV, torch) scale with this.
            name: the stage's name in reports; ``"map:<function name>"`` by default.
            spec: the output frame spec, if known; otherwise the first batch sets it.
            queue: capacity of the stage's input queue; ``2 * workers + 1`` by default.
            into: ``fn`` returns one value per frame (labels, boxes, scores), stored in
                ``meta[into]``; the frames pass on unchanged.
            window: ``(before, after)``: ``fn`` gets ``(n, before + 1 + after, *shape)``
                windows, ``windows[j, before]`` being frame ``j``, across batch boundaries;
                the first and last frames repeat at the sequence ends (``engine.window``).
            stateful: ``fn`` keeps state between calls: one worker, batches in input order.
            reuse: share answers between similar frames instead of computing every one
                (:mod:`hyperframes.modes`): ``ReuseTarget(0.95, agree="boxes")`` keeps the
                output's answers agreeing with ``fn``'s own on that share of frames,
                measured on a sample it computes anyway (no ``.group()`` needed; the report
                gives calls, calls saved, the measured agreement and its bound);
                ``ReuseByHyperframe(psnr=40)`` runs ``fn`` once per hyperframe (needs
                ``.group()`` before) and shares the result with members within the bound.
                ``agree`` says how two answers compare: ``"equal"`` (default for values),
                ``"boxes"`` (per-frame ``(N, 4+)`` boxes, F1 at IoU 0.5; ``"boxes:0.7"``),
                ``"count"``, ``"psnr"`` (default for frames out, 40 dB; ``"psnr:35"``) or
                a callable ``(a, b) -> float`` in [0, 1] (``hyper.reuse.agree``).
            faults: ``Retry(retries, backoff)``: extra tries of a failing batch,
                ``backoff * 2**n`` seconds apart. With ``run(allow_failures=...)`` a batch
                that still fails is retried frame by frame and the frames that fail for
                good are reported as dead letters.
            removed: the keywords these objects replaced (``reuse_psnr``, ``reuse_mse``,
                ``verify_every``, ``reuse_target``, ``agree``, ``retries``, ``backoff``)
                are refused since 0.8, each with what to write instead.
        """
        if not callable(fn):
            raise TypeError(f"map needs a callable, got {type(fn).__name__}")
        refuse_removed(reuse, removed)
        if isinstance(fn, type):  # a model class: one instance per worker, set up once
            fn = PerWorker(fn)
        label = self._unique(name or f"map:{name_of(fn)}")
        stages = map_stages(
            fn, label, workers=workers, spec=spec, queue=queue, into=into, window=window,
            stateful=stateful, reuse=reuse, faults=faults,
        )  # fmt: skip
        return dataclasses.replace(self, stages=(*self.stages, *stages))

    def stage(
        self,
        make: Callable[..., Stream | Strategy],
        *,
        fn: Callable[..., Any] | None = None,
        name: str | None = None,
        workers: int = 1,
        into: str | None = None,
        keeps: Footprint | None = None,
    ) -> Pipeline:
        """Add a stage of a kind of your own (``docs/stages.md`` has one example of each).

        Args:
            make: makes the stage's part, fresh for each run: without ``fn``, a
                :class:`~hyperframes.engine.stage.Stream`, made as ``make(batch_size)``
                (sees every batch in order, may hold batches back or keep state); with
                ``fn``, a :class:`~hyperframes.engine.stage.Strategy`, made as ``make()``
                (decides which frames ``fn`` computes and fills in the rest).
            fn: the function a strategy calls, through the ``compute`` it is handed (a
                batch in; frames, or with ``into`` one value per frame, out).
            name: the stage's name in reports (default: ``"stage:<make's name>"``).
            workers: calls of ``fn`` the strategy may make at once on parts of a batch.
            into: ``fn`` returns one value per frame, kept in ``meta[into]``.
            keeps: what the part holds back and reads around each frame
                (:class:`~hyperframes.io.base.Footprint`: ``held_frames``,
                ``held_batches``, ``halo``, ``stateful``), so that the plan gives the pools
                room for it. Default: a stream holds nothing back and keeps state (it sees
                every frame in order); a strategy holds nothing back.
        """
        if not callable(make):
            raise TypeError(f"stage() needs a maker of a Stream or Strategy, got {make!r}")
        label = self._unique(name or f"stage:{name_of(make)}")
        if fn is None:
            if into is not None or workers != 1:
                raise ValueError("into= and workers= are for a strategy's fn; pass fn=")
            held = keeps or Footprint(label, stateful=True)
            stage = Stage(label, kind=Streamed(cast(Callable[[int], Stream], make), held))
        else:
            decided = Decided(cast(Callable[[], Strategy], make), split=workers, keeps=keeps)
            stage = Stage(label, fn, workers=1, into=into, kind=decided)
        return dataclasses.replace(self, stages=(*self.stages, stage))

    def group(
        self,
        *,
        threshold: float | None = None,
        min_len: int | None = None,
        max_len: int | None = None,
        rule: Rule = "adjacent",
        distance: DistanceKind = "exact",
    ) -> Pipeline:
        """Add the grouping stage: tags each frame with its hyperframe (``hyper.grouping``).

        Frames come out unchanged, in order, with ``meta["hyperframe"]`` (group id),
        ``meta["hf_pos"]`` and ``meta["hf_len"]``. Options default to the measured
        defaults of :class:`~hyperframes.hyper.grouping.grouper.GroupingOptions`.
        """
        from .hyper.grouping.grouper import GroupingOptions
        from .hyper.grouping.tagging import GroupTagger, grouping_footprint

        defaults = GroupingOptions()
        options = GroupingOptions(
            threshold=defaults.threshold if threshold is None else threshold,
            min_len=defaults.min_len if min_len is None else min_len,
            max_len=defaults.max_len if max_len is None else max_len,
            rule=rule,
            distance=distance,
        )
        stage = Stage(
            self._unique("group"),
            kind=Streamed(
                lambda size: GroupTagger(options, batch_size=size),
                grouping_footprint(max_len=options.max_len, min_len=options.min_len),
            ),
            facts={"grouping": options.recorded()},
        )
        return dataclasses.replace(self, stages=(*self.stages, stage))

    # -- sinks ---------------------------------------------------------------------------

    def to(self, sink: Sink) -> Pipeline:
        """Send the frames to ``sink`` (a video file, images, a store, ...)."""
        if not isinstance(sink, Sink):
            raise TypeError(f"to() needs a hyperframes Sink, got {type(sink).__name__}")
        return dataclasses.replace(self, sink=sink)

    def for_each(
        self, fn: Callable[..., Any], *, batched: bool = False, meta: bool = False
    ) -> Pipeline:
        """Call ``fn`` on every frame in input order, or on every batch with ``batched``.

        Args:
            fn: called as ``fn(i, frame)``, or ``fn(ids, frames)`` with ``batched=True``.
                With ``meta=True`` it gets a third argument: the frame's metadata as
                ``{key: value}``, or with ``batched=True`` the batch's as ``{key: array}``
                holding one value per frame in the order of ``ids``: ``"pts"`` from a
                video, ``"hyperframe"``, ``"hf_pos"``, ``"hf_len"`` from :meth:`group`, and
                the values each ``map(..., into=key)`` stage returned.
            batched: call once per batch (ids and frames as arrays) instead of per frame.
            meta: pass the per-frame metadata as a third argument.

        The frame arrays are views into the pool, valid only during the call: copy what
        you keep.

        Example:
            >>> found = {}
            >>> (Pipeline.from_frames(np.zeros((8, 4, 4), np.uint8))
            ...     .map(lambda b: b.mean(axis=(1, 2)), into="brightness")
            ...     .for_each(lambda ids, frames, meta: found.update(
            ...         zip(ids.tolist(), meta["brightness"].tolist())), batched=True, meta=True)
            ...     .run().frames)
            8
            >>> found[7]
            0.0
        """
        return self.to(CallbackSink(fn, batched=batched, meta=meta))

    def write_images(self, directory: str | Path, **options: Any) -> Pipeline:
        """Write every frame as an image file (see ``ImageSequenceSink`` for options)."""
        from .io.image_sink import ImageSequenceSink

        return self.to(ImageSequenceSink(directory, **options))

    # -- running -------------------------------------------------------------------------

    def run(
        self,
        *,
        memory: int | str | None = None,
        slots: int | None = None,
        slot_timeout: float | None = DEFAULT_SLOT_TIMEOUT,
        progress: ProgressFn | None = None,
        allow_failures: int = 0,
        executor: str | Executor = "threads",
        monitor: Monitor | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
    ) -> RunReport:
        """Run the pipeline to the end and return its report.

        Args:
            memory: the budget for the bytes of every pool of the run together, as bytes or
                a size like ``"512MiB"``. By default the smaller of 1 GiB and a quarter of
                the memory available (a container's limit included). The batch size (when
                not set) and the slots follow from it; a budget that cannot hold one frame
                per slot raises ``MemoryError`` before anything starts.
            slots: batches in flight at once (slots of each pool). By default one per
                worker plus three, plus what ordered stages hold, and no more than the
                input's batches. A slot's pages are mapped when it is first used.
            slot_timeout: seconds the source waits for a free slot before raising
                ``PoolExhausted`` (which says who holds the slots); ``None`` waits forever.
            progress: called in the caller's thread after each batch reaches the sink.
            allow_failures: how many frames may fail for good (after retries, frame by
                frame) before the run stops with ``FramesFailed``; failed frames are left
                out of the output and listed in ``report.failures``. With 0 (the default)
                the first failure stops the run with the stage's own exception.
            executor: where stage functions run: ``"threads"`` (default), ``"processes"``
                (pools in shared memory; functions must be importable) or ``"ray"``; or an
                :class:`~hyperframes.executors.Executor`.
            monitor: watches the run live (metrics exporters, dashboards); see
                :class:`~hyperframes.engine.watch.Monitor`.
            metrics_port: serve Prometheus metrics of the run on this port while it runs
                (0 picks a free one); see ``hyperframes.metrics.prometheus``.
            metrics_host: the interface for ``metrics_port``; loopback unless you say so.

        Raises:
            The first exception of any stage, unchanged, with a note naming the stage, batch
            and frames. Every thread is joined and every slot released before it is raised.
        """
        if metrics_port is not None:
            from .metrics.monitors import Monitors
            from .metrics.prometheus import PrometheusExporter

            exporter = PrometheusExporter(port=metrics_port, host=metrics_host)
            monitor = Monitors([exporter] if monitor is None else [exporter, monitor])
        started = time.perf_counter()
        source, sink = self.source.for_run(), self.sink.for_run()
        shared: dict[str, object] = {"source": source} if source is self.source else {}
        if sink is self.sink:
            shared["sink"] = sink
        with exclusive(**shared):
            runner = Runner(
                source,
                self.stages,
                sink,
                batch_size=self.batch_size,
                memory=memory,
                slots=slots,
                slot_timeout=slot_timeout,
                progress=progress,
                allow_failures=allow_failures,
                executor=get_executor(executor),
                monitor=monitor,
                started=started,
            )
            return runner.run()

    def iter_batches(
        self, *, meta: bool = False, tensors: Tensors | None = None, **run_options: Any
    ) -> Batches:
        """The output batches for a loop of your own: ``for ids, frames in ...``.

        The run starts when the loop does, on a thread of its own, and goes ahead within
        its memory budget while the loop works. The loop owns what it is given: ``frames``
        is a view of a pool slot (no copy), and the slot goes back to the run only once
        nothing refers to it; keep batches (a list, a queue, ``torch.from_numpy``) and they
        stay right: past two kept at once, the next come as copies of their own. Leaving
        the loop (``break``, an exception, Ctrl-C) stops the run and waits for it to
        unwind: no thread, process or slot is left. A stage's error is raised in the loop.
        The run's report is ``.report`` of the returned object once it ended, and
        ``.copies`` says how many batches came as copies. A loop given tensors of its
        own straight from the source (no stages) runs on two slots: one decoded into
        while the loop makes its tensors of the other (``slots=`` says otherwise).

        Args:
            meta: yield ``(ids, frames, meta)``, ``meta`` as ``{key: array}`` (``"pts"``,
                the values of ``map(..., into=key)`` stages, ...).
            tensors: hand ``frames`` as torch tensors, as :class:`~hyperframes.gpu.Tensors`
                says (NCHW float in 0..1 by default; ``uint8`` ones are views, no copy).
            run_options: as :meth:`run` takes them (``memory``, ``executor``, ...).

        Example:
            >>> total = 0
            >>> for ids, frames in Pipeline.from_frames(np.ones((10, 4, 4), np.uint8),
            ...                                         batch_size=4).iter_batches():
            ...     total += int(frames.sum())
            >>> total
            160
        """
        convert = None if tensors is None else tensors.of
        keeps = tensors is None or tensors.views
        if not keeps and not self.stages:  # nothing between them: no batch waits in a queue
            run_options.setdefault("slots", 2)
        return Batches(lambda sink: self.to(sink).run(**run_options), meta=meta, convert=convert,
                       keeps=keeps)  # fmt: skip

    def collect(self, **run_options: Any) -> np.ndarray:
        """Run and return every output frame as one ``(N, *shape)`` array (short inputs only)."""
        report = self.to(CollectSink()).run(**run_options)
        frames: np.ndarray = report.output
        return frames

    def _unique(self, name: str) -> str:
        taken = {s.name for s in self.stages}
        if name not in taken:
            return name
        n = 2
        while f"{name}#{n}" in taken:
            n += 1
        return f"{name}#{n}"

    def __repr__(self) -> str:
        names = " -> ".join(s.name for s in self.stages) or "(no stages)"
        return (
            f"Pipeline({type(self.source).__name__} {self.source.spec.describe()} -> {names} "
            f"-> {type(self.sink).__name__}, batch_size={self.batch_size})"
        )
