"""The two small interfaces every input and output implements, and what a part of a run
takes of its memory (:class:`Footprint`, which the run's plan reads).

A :class:`Source` fills pool slots with frames, in order; a :class:`Sink`
takes frames in order. The engine calls them from one thread each, so
implementations need no locking.

Example (a source of ``n`` black frames)::

    class Black(Source):
        def __init__(self, n):
            self.spec, self.length, self._next = FrameSpec((8, 8, 3)), n, 0

        def read_into(self, out):
            count = min(len(out), self.length - self._next)
            out[:count] = 0
            index = np.arange(self._next, self._next + count)
            self._next += count
            return Chunk(index)

Longer than 300 lines: the two interfaces with the small records they hand the engine
(a chunk, a footprint, an input's failure, cache figures); each is a few lines, and a
reader of one interface needs them beside it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any

import numpy as np

from ..frames import FrameSpec, laid


@dataclass
class Chunk:
    """What one :meth:`Source.read_into` call produced.

    Attributes:
        index: frame ids of the frames written to ``out[:len(index)]``; empty at the end.
        meta: per-frame arrays of the same length (``"pts"`` in seconds, for video).
        spec: the frames' spec where it is not the source's: a smaller size, written as
            :meth:`FramePool.view(slot, spec) <hyperframes.frames.FramePool.view>` lays it
            (see :attr:`Source.several_sizes`).
    """

    index: np.ndarray
    meta: dict[str, np.ndarray] = field(default_factory=dict)
    spec: FrameSpec | None = None

    def __len__(self) -> int:
        return len(self.index)


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
    """What a source reports about its reads (:meth:`Source.figures`).

    Attributes:
        cache: the tiers it reads through, e.g. a store's hot, warm and cold tiers.
        numbers: any other figures, by name.
    """

    cache: tuple[CacheTier, ...] = ()
    numbers: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"cache": [asdict(t) for t in self.cache], "numbers": dict(self.numbers)}


@dataclass(frozen=True)
class InputFailure:
    """A stage's failure on a frame of one input, as the sink meets it in order. The
    failing batch was tried frame by frame: ``frame`` is the first that failed alone.

    Attributes:
        input: the input (the frame's ``meta["input"]``).
        frame: the input's frame that failed (``meta["input_frame"]``, else its id).
        stage: the stage that failed.
        error: what it raised on that frame alone (notes name the stage and frame).
        kept: the input's frames written before it.
        written: the frames the run has written in all.
    """

    input: int
    frame: int
    stage: str
    error: Exception
    kept: int
    written: int


class Source(ABC):
    """Frames in order, written straight into the slots the engine hands over.

    Attributes:
        spec: shape and dtype of every frame (known before the first read).
        length: number of frames if known, else ``None`` (for progress and ETA).
        info: free-form facts about the input (fps, time base, codec, path) for reports.
        several_sizes: where the frames come in several sizes (videos of several sizes,
            each read at its own), which, in a few words; ``spec`` is then the largest and
            each chunk of another size says its own (:attr:`Chunk.spec`). ``None``: every
            frame is ``spec``.
    """

    spec: FrameSpec
    length: int | None = None
    info: dict[str, Any]
    several_sizes: str | None = None

    def open(self) -> None:  # noqa: B027 - optional hook
        """Acquire resources (files, decoders); called once before the first read."""

    def footprint(self) -> Footprint:
        """What reading holds outside the run's pools, for its plan: ``least`` (a
        decoder's frames on one thread, say) and ``wants`` (on all the threads it would
        take). Nothing by default. Called before :meth:`open`."""
        return Footprint("source")

    def use_memory(self, nbytes: int) -> None:  # noqa: B027 - optional hook
        """The bytes the run's plan gives this source outside the pools (at least its
        footprint's ``least``): a decoder takes as many threads as fit. Called before
        :meth:`open`."""

    def fill_by_bytes(self, allowed: bool) -> None:  # noqa: B027 - optional hook
        """Whether the run lets a batch of frames smaller than :attr:`spec` (a source of
        several sizes) hold as many as its slot's bytes fit, a power of two, instead of
        ``len(out)``: where no stage of the run makes frames of its own. Called before
        :meth:`open`, each run; a source of one size has nothing to do."""

    def pool_memory(self, nbytes: int) -> Any:
        """The memory for the pool this source reads into (``nbytes``), where the source
        keeps it itself (shared with a reader process of its own, which then decodes
        into the slots); ``None`` (the default): the executor allocates it. Called
        once a run, after :meth:`footprint`; what it gives lives as long as the source."""
        return None

    def for_run(self) -> Source:
        """The source one run reads: ``self`` (the default), or a fresh copy for sources
        that can be read by several runs at once (an array, a frame generator).

        A run that gets ``self`` has it to itself: a second run that starts before the
        first ends is refused with a clear error instead of splitting the frames.
        """
        return self

    @abstractmethod
    def read_into(self, out: np.ndarray) -> Chunk:
        """Write up to ``len(out)`` next frames into ``out`` and say which they were.

        Returns an empty :class:`Chunk` at the end of input. Never allocates per frame
        where it can write into ``out`` directly.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once, also after errors."""

    def notes(self) -> dict[str, Any]:
        """What the run report should say about this read (``report.extra["source"]``),
        such as how a seek was checked; called after the last read. Empty by default."""
        return {}

    def progress_note(self) -> str:
        """A few words on how far the reads are, beside the frames (``"file 12/400"``) for
        the progress bar; none by default. Called from the sink's thread after each batch:
        cheap, and not locked (a count a batch behind is fine)."""
        return ""

    def input_failed(self, failure: InputFailure) -> bool:
        """A stage failed for good on frames of one of this source's inputs (frames whose
        ``meta["input"]`` names it): ``True`` lists the input as failed, and the run goes
        on without its later frames (none from the failing frame on is written);
        ``False`` (the default) fails the run with the stage's error. Called from the
        sink's thread, in the frames' order, once every frame before the failing one is
        written, whatever the answer; the source may stop reading that input."""
        return False

    def figures(self) -> SourceFigures:
        """What this source reports of its reads while the run goes (a store's cache tiers);
        none by default. Called from monitor threads: thread-safe and cheap, and callable
        before ``open`` and after ``close`` (the last figures, or none)."""
        return SourceFigures()

    def __iter__(self) -> Iterator[np.ndarray]:
        """Each frame in turn, as an array of its own: the quick look before a pipeline
        (``for frame in hf.VideoSource("clip.mp4")``); a pipeline reads in batches."""
        with self:
            out = np.empty((1, *self.spec.shape), self.spec.dtype)
            while len(chunk := self.read_into(out)):  # (smaller frames: maybe more of them)
                frames = out if chunk.spec is None else laid(out, chunk.spec)
                yield from (frame.copy() for frame in frames[: len(chunk)])

    def __enter__(self) -> Source:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class Footprint:
    """What one stage or the sink takes of a run's memory, as data.

    Attributes:
        name: the stage's (or sink's) name, for messages.
        workers: batches the stage works on at once.
        spec: the frames the stage writes, when it declares them (``None``: the frames it
            gets, or not known before its first result).
        held_frames: frames the stage may hold back (a grouping's ``max_len + min_len``,
            a window's frames after): ``ceil(held_frames / batch_size)`` batches.
        held_batches: batches it holds back besides, whatever their size.
        halo: frames before and after each frame that the stage reads (a window).
        stateful: it keeps state across frames, so part of the input cannot be run alone.
        scratch_batches: batches of the frames it gets that it copies outside its pools
            at once (a reuse strategy's rows, a retry's backup of a batch, a failing
            batch's frames tried one by one): a pool of that many slots the plan makes.
        least: bytes outside the pools without which it cannot run (a sink's buffers).
        wants: bytes outside the pools it can use well (at least ``least``).
    """

    name: str
    workers: int = 1
    spec: FrameSpec | None = None
    held_frames: int = 0
    held_batches: int = 0
    halo: tuple[int, int] = (0, 0)
    stateful: bool = False
    scratch_batches: int = 0
    least: int = 0
    wants: int = 0

    def held(self, batch_size: int) -> int:
        """The batches of ``batch_size`` frames this stage may hold back at once."""
        return math.ceil(self.held_frames / batch_size) + self.held_batches


NOTHING = Footprint("sink")
"""The footprint of a sink that holds nothing outside the pools."""


class Sink(ABC):
    """Takes frames in input order; commits on success and leaves nothing behind on failure.

    Attributes:
        takes_sizes: whether it takes frames of several sizes in one run (a results
            file, a loop of the user's, an image a frame); one that writes a video does
            not, and a source of several sizes (:attr:`Source.several_sizes`) is refused
            before the run.
    """

    takes_sizes: bool = False

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Called once with the spec of the frames it will receive and the source's info."""

    def footprint(self, spec: FrameSpec, facts: dict[str, Any]) -> Footprint:
        """What it holds outside the run's pools (a buffer, work queued), for frames of
        ``spec`` and what the stages tell it (``facts``, as :meth:`open` gets them in
        ``info``): the run's plan counts it in the budget. Nothing by default."""
        return NOTHING

    def grant(self, nbytes: int) -> None:  # noqa: B027 - optional hook
        """Called before :meth:`open` with what the run's plan lets it hold outside the
        pools: at least its footprint's ``least``, at most its ``wants``."""

    def for_run(self) -> Sink:
        """The sink one run writes: ``self`` (the default; one run at a time), or a fresh
        copy for sinks that several runs may feed at once (a callback)."""
        return self

    @abstractmethod
    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        """Consume one batch: ``frames`` is a view valid only during the call."""

    def write_owned(
        self,
        frames: np.ndarray,
        index: np.ndarray,
        meta: dict[str, np.ndarray],
        release: Callable[[], None],
    ) -> None:
        """Consume one batch whose slots ``release`` gives back to the run: after
        :meth:`write` by default. A sink that hands ``frames`` on (to a loop of the
        user's) calls it once nothing it handed on can see the slot any more; the run
        plans the slots it keeps (its footprint's ``held_batches``)."""
        self.write(frames, index, meta)
        release()

    def close(self, *, ok: bool) -> Any:
        """Finish. ``ok=False`` after a failure: remove partial output. Returns a result
        (e.g. the output path) that goes into the run report as ``output``."""
        return None

    def notes(self) -> dict[str, Any]:
        """What the run report should say about this write (``report.extra["sink"]``),
        such as timestamps it had to regenerate; called after :meth:`close`. Empty by
        default."""
        return {}
