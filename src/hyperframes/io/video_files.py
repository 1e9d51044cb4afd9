"""Many videos as one source: the frames of every input in turn (``hf.VideoFiles``).

The inputs (a folder, a glob, a manifest or a list: :mod:`.inputs`) are fixed and sorted
when the source is made. Without ``size`` each is looked at then and read at its own
size: the run's slots are planned for the largest frames, and a batch of smaller ones is
laid from its slot's start (``Chunk.spec``), as many as the slot fits where no stage
makes frames of its own (:meth:`VideoFiles.fill_by_bytes`). A part of the run that needs
one size, such as a video output or a grouping, refuses several before any work. With
``size`` every file is read at that size and each is opened only when reached. One that
cannot be opened is listed as failed, as is one that fails part-way (with the frames it
gave) or on whose frames the run's function fails, and the next one is read; with
``on_error="fail"`` the run stops there. A batch never holds frames of two files.

A job stopped part-way continues with :meth:`VideoFiles.resume_after` (the inputs before
the one in progress are not read again); ``on_failed`` hears of each input that fails as
it does, so a list of them can be kept as the job goes. The run's memory plan counts the
largest decoder among the inputs (:meth:`VideoFiles.footprint`), so a 4K file among small
ones cannot take the run past its budget.

Each frame's metadata says where it came from: ``meta["input"]`` (its input's position in
:attr:`VideoFiles.inputs`), ``meta["input_frame"]`` (its index in that file) and
``meta["pts"]`` (seconds in that file); frame ids run on across the files.

Example:
    >>> source = VideoFiles("clips/")  # doctest: +SKIP
    >>> hf.Pipeline.from_source(source).map(detect, into="boxes").to(
    ...     hf.ResultsSink("boxes.parquet")).run()  # doctest: +SKIP

Longer than 300 lines: one source over many inputs, with the order of its reads, its resume
after a kept row, its list of failures and its plan of the largest decoder; each part
reads and moves the same position among the inputs.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import MediaError
from ..frames import MAX_BATCH_SIZE, FrameSpec, laid
from .base import Chunk, Footprint, InputFailure, Source
from .file_reader import header_footprint, open_item
from .formats import OnCorrupt, PixFmt
from .inputs import Input, expand
from .kinds import InputKind, registered
from .positions import Seconds
from .reader_process import ReaderProcess, RemoteSource
from .sampling import Sampling

if TYPE_CHECKING:
    from .images import ImageSequenceSource
    from .video import Colour, VideoSource

OnError = Literal["skip", "fail"]
READ_ERRORS = (MediaError, OSError, ValueError, EOFError)
"""What a file that cannot be read raises (PyAV's errors are ``OSError``\\ s)."""
FAULT_AFTER = 3
"""A function that fails on the job's first inputs, this many (or all where fewer), having
answered no frame, fails the run: listing every file for a bug in the function would
cost the whole job's reads and say nothing. Only a job's first inputs count: not a
resumed job's, nor a side-by-side run's but the first."""


class VideoFiles(Source):
    """The frames of many videos, one file after the other.

    Args:
        inputs: a folder, a glob, a manifest (``.txt``, ``.csv``, ``.jsonl``,
            ``.parquet``) or a list of paths (see :func:`~.inputs.expand`), sorted; or a
            list of :class:`~.inputs.Input` (as ``expand`` gives them), taken in its order.
        size: ``(width, height)`` to read every file at; by default each at its own (a
            detector's boxes stay in its pixels), which a results file, ``for_each`` and
            ``iter_batches`` take, and a video or store output does not.
        pix_fmt, step, on_corrupt, colour, threads, keyframes, fps, at, num_frames: as
            :class:`~.video.VideoSource` takes them, for each file (an image sequence's
            images are all key frames; ``num_frames`` is per file). A manifest's ``at``
            column gives its row's own times (a list, or text such as ``"1.5 7 12.25"``).
        rate: the frame rate of the inputs that are image sequences (folders of images
            found in a folder): 25 unless given.
        on_error: a file that cannot be opened or read, or on whose frames a stage (the
            function of a ``map``) fails for good: ``"skip"`` lists it in :attr:`failed`
            (with the frames it gave before) and goes on; ``"fail"`` raises.
        on_failed: called with each entry of :attr:`failed` as it is added; where it is
            not given, each is told in a warning that names it.
        kinds: the kinds of input read besides videos and image sequences (by default
            those registered: ``hyperframes.store`` registers the store, so a folder of
            stores is read as a folder of videos is).
        file_timeout: read each input in a child process that is stopped when a read (the
            header, opening, or one batch) gives nothing for this many seconds: the input
            is listed as failed and the next is read in a fresh process, as is an input
            whose decoder crashes. ``None`` (the default): read in this process, with no
            limit. The run's pool is then shared memory (``/dev/shm``), which the child
            decodes into. A script that passes it must start its run under
            ``if __name__ == "__main__":``.

    Attributes:
        inputs: every input, sorted (the failed ones too).
        failed: ``{"path", "reason", "frames"}`` of each input that could not be read
            (``frames``: those it gave before it failed).

    Raises:
        FileNotFoundError: ``inputs`` names no video.
        ValueError: the files' frames differ in kind (channels, dtype: images among
            videos), or no input can be opened.
    """

    def __init__(
        self,
        inputs: str | os.PathLike[str] | Sequence[Any],
        *,
        size: tuple[int, int] | None = None,
        pix_fmt: PixFmt = "rgb24",
        step: int = 1,
        on_corrupt: OnCorrupt = "fail",
        colour: Colour = "ffmpeg",
        threads: bool | int = True,
        keyframes: bool = False,
        fps: float | str | Fraction | None = None,
        at: Sequence[float | str | Fraction] | None = None,
        num_frames: int | None = None,
        rate: Fraction | float | str | None = None,
        on_error: OnError = "skip",
        on_failed: Callable[[dict[str, Any]], None] | None = None,
        kinds: Sequence[InputKind] | None = None,
        file_timeout: float | None = None,
    ) -> None:
        if on_error not in ("skip", "fail"):
            raise ValueError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
        if file_timeout is not None and (isinstance(file_timeout, bool) or not file_timeout > 0):
            raise ValueError(f"file_timeout must be seconds above 0, or None to read in this "
                             f"process; got {file_timeout!r}")  # fmt: skip
        if (
            isinstance(inputs, list | tuple)
            and inputs
            and all(isinstance(i, Input) for i in inputs)
        ):
            self.inputs = list(inputs)  # a job's own list, in its order
        else:
            self.inputs = expand(inputs)
        self.on_error, self.on_failed = on_error, on_failed
        self._reader = None if file_timeout is None else ReaderProcess(file_timeout)
        self.rate = rate
        self._resume: tuple[int, int, int, int | None] | None = None
        self._fault_after: int | None = min(FAULT_AFTER, len(self.inputs))  # (the job's first)
        sampling: dict[str, Any] = {"keyframes": keyframes, "fps": fps, "at": at,
                                    "num_frames": num_frames}  # fmt: skip
        self._options: dict[str, Any] = (
            {
                "size": size,
                "pix_fmt": pix_fmt,
                "step": step,
                "on_corrupt": on_corrupt,
                "colour": colour,
            }
            | ({} if threads is True else {"threads": threads})
            | {key: value for key, value in sampling.items() if value not in (None, False)}
            | {"kinds": tuple(registered() if kinds is None else kinds)}
        )
        Sampling.of(step=step, **sampling)  # (a bad choice: refused before any input is read)
        self.failed: list[dict[str, Any]] = []
        self._reading: Footprint | None = None  # the largest decoder of them all
        self._memory: int | None = None  # what the run's plan gave it (use_memory)
        self._sources: dict[int, VideoSource | ImageSequenceSource | RemoteSource] = {}
        self._later: set[int] = set()  # looked at only when reached
        for k, item in enumerate(self.inputs):
            self._at_input(k)
            try:
                self._sources[k] = self._source(item)
            except READ_ERRORS as exc:
                self._fail(k, exc, frames=0)
                continue
            if size is not None:  # every file is read at this size: no need to look ahead
                self._later = set(range(k + 1, len(self.inputs)))
                break
        if not self._sources:
            reasons = "; ".join(f"{f['path']}: {f['reason']}" for f in self.failed[:3])
            raise ValueError(f"none of the {len(self.inputs)} inputs can be read ({reasons})")
        specs = {k: s.spec for k, s in self._sources.items()}
        first = next(iter(specs))
        self.spec = specs[max(specs, key=lambda k: specs[k].nbytes)]  # (the first largest)
        other = next((k for k, spec in specs.items() if not self.spec.holds(spec)), None)
        if other is not None:  # (not only the size: --size would not help)
            raise ValueError(
                f"the inputs' frames differ: {specs[first].describe()} in "
                f"{self.inputs[first].name!r}, {specs[other].describe()} in "
                f"{self.inputs[other].name!r}; one job reads frames of one kind: run them "
                "in jobs of their own"
            )
        self.several_sizes = _sizes_note(specs, self.inputs)
        lengths = [s.length for s in self._sources.values()]
        known = None not in lengths and not self._later
        self.length = sum(int(n or 0) for n in lengths) if known else None
        self.info = {
            "source": "videos",
            "inputs": [{"path": i.path, **i.columns} for i in self.inputs],
            "fps": self._sources[first].info.get("fps"),
        }
        self._found_failed = list(self.failed)
        self._by_bytes = False  # (fill_by_bytes)
        self._start_over()

    def _source(
        self, item: Input, start: int | None = None
    ) -> VideoSource | ImageSequenceSource | RemoteSource:
        """The source of ``item`` (a video or an image sequence), from ``start`` if given
        (read in the reader process where there is one)."""
        if self._reader is not None:
            return self._reader.open(item, rate=self.rate, start=start, options=self._options,
                                     memory=self._memory)  # fmt: skip
        source = open_item(item, rate=self.rate, start=start, **self._options)
        if self._memory is not None:
            source.use_memory(self._memory)
        return source

    def footprint(self) -> Footprint:
        """The largest decoder among the inputs, planned for before the first frame (each
        input not opened yet has its header read, once, on a thread a core: 2-3 ms a
        file on one; in the reader process where there is one, so that a file that
        hangs there is listed after the timeout)."""
        if self._reading is None:
            found = [s.footprint() for s in self._sources.values()]
            later = sorted(self._later)
            size, pix_fmt = self._options["size"], self._options["pix_fmt"]
            if self._reader is not None:  # in the child, each file within the time limit
                read = self._reader.headers([self.inputs[k] for k in later], size=size,
                                            pix_fmt=pix_fmt,
                                            kinds=self._options["kinds"])  # fmt: skip
                for k, got in zip(later, read, strict=True):
                    if isinstance(got, Footprint):
                        found.append(got)
                    else:  # listed now: it is not opened when reached
                        self._later.discard(k)
                        self._fail(k, got, frames=0)
                        self._found_failed.append(self.failed[-1])
            else:
                found += self._headers(later)
            found.append(Footprint("decoder"))
            least, wants = max(f.least for f in found), max(f.wants for f in found)
            self._reading = Footprint("decoder", least=least, wants=wants)
        return self._reading

    def _headers(self, later: list[int]) -> list[Footprint]:
        """The decoders of the inputs ``later``, from their headers, on a thread a core."""
        size, pix_fmt, kinds = (self._options[key] for key in ("size", "pix_fmt", "kinds"))
        threads = min(32, 2 * len(os.sched_getaffinity(0)))
        with ThreadPoolExecutor(threads, thread_name_prefix="hf-headers") as pool:
            return list(pool.map(lambda k: header_footprint(
                self.inputs[k], size=size, pix_fmt=pix_fmt, kinds=kinds), later))  # fmt: skip

    def pool_memory(self, nbytes: int) -> Any:
        """Shared memory of the reader process's, where there is one: it decodes into the
        slots."""
        return None if self._reader is None else self._reader.pool_memory(nbytes)

    def use_memory(self, nbytes: int) -> None:
        """Every input's decoder takes as many threads as ``nbytes`` holds."""
        self._memory = nbytes
        for source in self._sources.values():
            source.use_memory(nbytes)

    def _start_over(self) -> None:
        self.failed = list(self._found_failed)
        self._skip: set[int] = set()  # inputs a stage failed on (input_failed)
        self._stage_failures = 0
        self._k, frame, self._next, sample = self._resume or (0, -1, 0, None)  # (next id)
        self._read = 0  # frames of the current input so far
        self._since = 0.0
        self._figures: list[dict[str, Any]] = []
        if self._resume is not None:
            self._continue(frame, sample)

    def resume_after(
        self, position: int, frame: int, next_id: int, sample: int | None = None
    ) -> None:
        """Continue a job whose rows were kept up to frame ``frame`` of input ``position``
        (ids up to ``next_id - 1``): the inputs before it are not read again, that one
        goes on after ``frame`` (after its ``sample``-th sample, where a sampling counts
        them: ``meta["input_sample"]``), and ids go on from ``next_id``."""
        if not 0 <= position < len(self.inputs):
            raise ValueError(f"position {position} is not one of the {len(self.inputs)} inputs")
        self._resume = (position, frame, next_id, sample)
        self._start_over()

    def _continue(self, frame: int, sample: int | None) -> None:
        """Read input ``self._k`` after ``frame`` (after its ``sample``-th sample, where a
        sampling counts them); the next input where none is left."""
        item = self.inputs[self._k]
        self._at_input(self._k)
        source = self._sources.pop(self._k, None)
        if source is not None:
            source.close()
        self._later.discard(self._k)
        try:
            source = self._source(item)
            if source.sampling.sparse:  # the same choice of frames, after the last row's
                source.resume_from((frame if sample is None else sample) + 1)
                self._sources[self._k] = source
            elif source.length is not None and frame + 1 >= source.start + source.length:
                source.close()
                self._k += 1  # it was finished
            else:
                source.close()
                self._sources[self._k] = self._source(item, start=frame + 1)
        except READ_ERRORS as exc:
            self._fail(self._k, exc, frames=0)
            self._k += 1
        rest = [s.length for k, s in self._sources.items() if k >= self._k]
        known = None not in rest and not any(k >= self._k for k in self._later)
        self.length = sum(int(n or 0) for n in rest) if known else None

    def open(self) -> None:
        """Start from the first input (a second run reads every input again)."""
        self._close_sources()
        self._start_over()

    def _at_input(self, k: int) -> None:
        """Input ``k`` is the one opened or read now (a hook: nothing here)."""

    def read_into(self, out: np.ndarray) -> Chunk:
        while self._k < len(self.inputs):
            self._at_input(self._k)
            source = self._sources.get(self._k)
            if source is None and self._k in self._later:  # opened only now (size= given)
                try:
                    source = self._sources[self._k] = self._source(self.inputs[self._k])
                except READ_ERRORS as exc:
                    self._fail(self._k, exc, frames=0)
            if source is not None and self._k in self._skip:  # a stage failed on it
                source.close()
                self._next_input(done=False)
                continue
            if source is None:  # failed when it was looked at
                self._k += 1
                continue
            if self._read == 0 and not self._since:
                self._since = time.perf_counter()
            sized = None if source.spec == self.spec else source.spec  # (several sizes)
            try:
                chunk = source.read_into(out if sized is None else self._laid(out, sized))
            except READ_ERRORS as exc:
                source.close()
                self._fail(self._k, exc, frames=self._read)
                self._next_input(done=False)
                continue
            if not len(chunk):
                source.close()
                self._next_input(done=True)
                continue
            count = len(chunk)
            ids = np.arange(self._next, self._next + count, dtype=np.int64)
            self._next += count
            self._read += count
            meta = dict(chunk.meta)
            meta["input"] = np.full(count, self._k, dtype=np.int64)
            if "input_frame" in chunk.meta:  # a sampling that counts its samples
                meta["input_sample"] = chunk.index.astype(np.int64)
            else:
                meta["input_frame"] = chunk.index.astype(np.int64)
            return Chunk(ids, meta, sized)
        return Chunk(np.empty(0, np.int64))

    def fill_by_bytes(self, allowed: bool) -> None:
        """Where ``allowed``, a batch of an input smaller than the largest holds as many
        frames as its slot fits (a power of two), not the largest's batch: a 4K file
        among 640x360 ones makes the plan's batch 1, and the small files would run one
        frame a batch (0.76x the frames/s of a folder without it, a cheap function)."""
        self._by_bytes = allowed

    def _laid(self, out: np.ndarray, spec: FrameSpec) -> np.ndarray:
        """``out``'s memory as frames of ``spec``: as many as :meth:`fill_by_bytes` lets
        it hold, else ``len(out)``."""
        frames = laid(out, spec)
        if not self._by_bytes:
            return frames[: len(out)]
        return frames[: 1 << (min(len(frames), MAX_BATCH_SIZE).bit_length() - 1)]

    def input_failed(self, failure: InputFailure) -> bool:
        """A stage failed for good on input ``failure.input``: with ``on_error="skip"`` it is
        listed (with the frames written before) and its later frames are not read; the run
        fails instead where the function has failed on the first inputs it met and
        answered no frame at all (:data:`FAULT_AFTER`: a fault of the function, not of
        the files), and with ``on_error="fail"``."""
        item = self.inputs[failure.input]
        error = failure.error
        if self.on_error == "fail":
            error.add_note(
                f"in input {item.path!r}; pass on_error='skip' (drop --fail-fast) to go on "
                "without it"
            )
            return False
        self._stage_failures += 1
        guard = None if self._resume is not None else self._fault_after
        if guard is not None and not failure.written and self._stage_failures >= guard:
            error.add_note(
                f"stage {failure.stage!r} failed on each of the first {self._stage_failures} "
                "inputs and answered no frame: a fault in it, not in the files"
            )
            return False
        said = str(error).splitlines()[0] if str(error) else ""
        reason = f"{failure.stage} failed at frame {failure.frame}: {type(error).__name__}"
        self._skip.add(failure.input)  # (read_into, in the source's thread, moves on)
        self._add_failure(item, reason + (f": {said}" if said else ""), failure.kept)
        return True

    def _next_input(self, *, done: bool) -> None:
        if self._k in self._later:  # made when reached: let it go (a job of 100,000 files)
            self._sources.pop(self._k, None)
        if done:
            seconds = round(time.perf_counter() - self._since, 3)
            self._figures.append(
                {"path": self.inputs[self._k].path, "frames": self._read, "seconds": seconds}
            )
        self._k, self._read, self._since = self._k + 1, 0, 0.0

    def _fail(self, k: int, exc: BaseException, *, frames: int) -> None:
        item = self.inputs[k]
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if self.on_error == "fail":
            exc.add_note(
                f"in input {item.path!r}; pass on_error='skip' (drop --fail-fast) to go on "
                "without it"
            )
            raise exc
        self._add_failure(item, reason, frames)

    def _add_failure(self, item: Input, reason: str, frames: int) -> None:
        """List ``item`` as failed: its path (its range and the manifest's columns where it
        has them: a manifest may name one file twice), why, and the frames it gave."""
        ranged = {"start": item.start, "stop": item.stop} if item.start or item.stop else {}
        told = {key: _plain(value) for key, value in {**ranged, **item.columns}.items()}
        failure = {"path": item.path, **told, "reason": reason, "frames": frames}
        self.failed.append(failure)
        if self.on_failed is not None:
            self.on_failed(failure)
        else:  # (a loop of the user's own would not know it lost the file's frames)
            kept = f"; its first {frames} frames were given" if frames else ""
            warnings.warn(f"{item.path!r} is left out ({reason}){kept}; on_error='fail' "
                          "stops instead", stacklevel=2)  # fmt: skip

    def _close_sources(self) -> None:
        for source in self._sources.values():
            source.close()

    def close(self) -> None:
        """Close every input, and end the reader process if there is one."""
        self._close_sources()
        if self._reader is not None:
            self._reader.close()

    def progress_note(self) -> str:
        """``"file 12/400"``: the input being read, of all."""
        return f"file {min(self._k + 1, len(self.inputs))}/{len(self.inputs)}"

    def notes(self) -> dict[str, Any]:
        """How many inputs, each finished one's frames and seconds, and those that failed."""
        return {"inputs": len(self.inputs), "read": self._figures, "failed": self.failed}


def _sizes_note(specs: dict[int, FrameSpec], inputs: list[Input]) -> str | None:
    """``"1280x720 in 'a.mp4', 640x360 in 'b.mp4'"``: the first two sizes among the
    inputs ``specs`` (and how many more), each with the first input of it; ``None``
    where there is one size."""
    firsts: dict[tuple[int, ...], int] = {}
    for k, spec in specs.items():
        firsts.setdefault(spec.shape[:2], k)
    if len(firsts) == 1:
        return None
    named = [f"{w}x{h} in {inputs[k].name!r}" for (h, w), k in list(firsts.items())[:2]]
    more = f" and {len(firsts) - 2} more" if len(firsts) > 2 else ""
    return ", ".join(named) + more


def _plain(value: Any) -> Any:
    """``value`` as a failures file (JSON) holds it: a time as ``"12.5s"``, a number of
    numpy's as Python's, anything else JSON cannot hold as its text."""
    if isinstance(value, Seconds):
        return f"{float(value):g}s"
    if isinstance(value, np.generic):
        value = value.item()
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
