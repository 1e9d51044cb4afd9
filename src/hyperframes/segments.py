"""A long job cut into segments: each made by one pipeline into its own file, kept in a
folder with the job's manifest until the files are joined in order.

What a segment is made from (:class:`VideoJob`: frames of a video, cut at keyframes;
:class:`RenderJob`: ``fn(i)``, cut anywhere), how a range is cut
(:func:`plan_segments`), how one segment is made (:func:`process_segment`: its halo
decoded, the stages run, its own frames written), which segments a rerun of the same
job may keep (:func:`prepare`), the run's figures as segments finish (:class:`Tally`) and
the join (:func:`join`). :mod:`hyperframes.chunked` runs the segments, on Ray or here.

Longer than 300 lines: what a segment is, how it is made, kept and joined are one
format (the folder, its manifest, the segment files and their records).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from .engine.figures import merged_targets
from .engine.report import RunReport, StageReport
from .engine.watch import Progress, ProgressFn, RunSnapshot, StageSnapshot
from .errors import HyperframesError, MediaError
from .frames import FrameSpec
from .identity import record_segment
from .io.base import Chunk, Sink, Source
from .io.carry import Carry
from .io.frame_table import scan
from .io.inputs import Input
from .io.publish import publish, temp_beside, write_output
from .io.results import FORMATS as RESULTS
from .io.results import ResultsSink, join_files
from .io.tracks import Carrier
from .io.video import VideoSource
from .io.video_sink import VideoSink
from .pipeline import Pipeline

Build = Callable[[Pipeline], Pipeline]

MIN_SEGMENT_FRAMES, SEGMENTS_PER_CPU = 240, 2
"""The automatic plan on a cluster: segments of at least ten seconds at 24 fps, and
about two per CPU of the cluster (:func:`auto_segments`)."""


# -- jobs: what one segment task makes its pipeline from ------------------------------------


class _FramesJob:
    """A job cut into ranges of frames: a segment's pipeline reads its halo too, and
    passes on only its own frames."""

    def pipeline(self, start: int, stop: int, cpus: int, batch_size: int | None) -> Pipeline:
        raise NotImplementedError

    def probe(self, start: int) -> Pipeline:
        """A pipeline for ``build`` to add its stages to, to learn their halo."""
        return self.pipeline(start, start + 1, 1, None)

    def listed(self, segment: tuple[int, int]) -> list[dict[str, Any]]:
        """Inputs listed as failed before the segment is made: none (one input)."""
        return []

    def segment(
        self, segment: tuple[int, int], frames: int, halo: tuple[int, int], cpus: int,
        batch_size: int | None, beat: np.ndarray | None = None,
    ) -> tuple[Pipeline, Callable[[Sink], Sink]]:  # fmt: skip
        """The pipeline of ``segment`` with its halo, and what keeps its own frames of it."""
        start, stop = segment
        lo, hi = max(0, start - halo[0]), min(frames, stop + halo[1])
        return self.pipeline(lo, hi, cpus, batch_size), lambda sink: _Trim(sink, start, stop)


@dataclass(frozen=True)
class VideoJob(_FramesJob):
    """Frames of a video; frame ids are the video's own frame numbers."""

    path: str
    options: dict[str, Any] = field(default_factory=dict)

    def pipeline(self, start: int, stop: int, cpus: int, batch_size: int | None) -> Pipeline:
        source = VideoSource(self.path, start=start, stop=stop, threads=cpus, **self.options)
        return Pipeline.from_source(source, batch_size=batch_size)


@dataclass(frozen=True)
class FilesJob:
    """Many inputs (:class:`~.io.inputs.Input`), cut into runs of whole inputs: a segment
    is the inputs ``[start, stop)``, read as one :class:`~.io.video_files.VideoFiles`
    (``options``: its options), whose failed inputs the segment's result lists."""

    inputs: tuple[Input, ...]
    options: dict[str, Any] = field(default_factory=dict)
    given_up: tuple[tuple[int, str], ...] = ()
    """Inputs listed as failed without being read (their position, and why): those a
    process reading them stalled or died on."""

    def listed(self, segment: tuple[int, int]) -> list[dict[str, Any]]:
        """The failures of :attr:`given_up` in ``segment``."""
        start, stop = segment
        return [{"path": self.inputs[k].path, "reason": why, "frames": 0}
                for k, why in self.given_up if start <= k < stop]  # fmt: skip

    def probe(self, start: int) -> Pipeline:
        """A pipeline of one blank frame, for ``build`` to add its stages to (no input is
        opened: the first may be one that fails)."""
        return Pipeline.from_generator(
            lambda i: np.zeros((2, 2, 3), np.uint8), count=1, spec=FrameSpec((2, 2, 3))
        )

    def segment(
        self, segment: tuple[int, int], frames: int, halo: tuple[int, int], cpus: int,
        batch_size: int | None, beat: np.ndarray | None = None,
    ) -> tuple[Pipeline, Callable[[Sink], Sink]]:  # fmt: skip
        """The pipeline of the inputs ``segment`` but those given up (no halo: a window
        does not reach across files), every frame of it kept; with ``beat``, its reads
        are told there (see :class:`~.io.beating.BeatingFiles`)."""
        from .io.beating import BeatingFiles
        from .io.video_files import FAULT_AFTER

        skipped = {k for k, _ in self.given_up}
        chosen = [k for k in range(*segment) if k not in skipped]
        failed: list[dict[str, Any]] = []
        try:
            if not chosen:
                raise ValueError("no input is left to read")
            first = min(FAULT_AFTER, len(self.inputs)) if segment[0] == 0 else None
            source: Source = BeatingFiles(
                [self.inputs[k] for k in chosen], positions=chosen, beat=beat, threads=cpus,
                fault_after=first, on_failed=failed.append, **self.options,
            )  # fmt: skip
        except ValueError:
            if len(failed) < len(chosen):
                raise
            source = _Unread(failed)  # (a run of inputs none of which could be read)
        return Pipeline.from_source(source, batch_size=batch_size), lambda sink: sink


@dataclass(frozen=True)
class RenderJob(_FramesJob):
    """Frames rendered by ``fn(i)``; frame ids are the render's frame numbers."""

    fn: Callable[[int], np.ndarray]
    spec: FrameSpec

    def pipeline(self, start: int, stop: int, cpus: int, batch_size: int | None) -> Pipeline:
        return Pipeline.from_generator(
            self.fn, count=stop - start, spec=self.spec, workers=cpus, batch_size=batch_size,
            start=start,
        )  # fmt: skip


Job = VideoJob | RenderJob | FilesJob


class _Unread(Source):
    """A run of inputs none of which could be read: no frames, and the list of them."""

    def __init__(self, failed: list[dict[str, Any]]) -> None:
        self.failed, self.spec, self.length = failed, FrameSpec((2, 2, 3)), 0
        self.info = {"source": "videos", "inputs": []}

    def read_into(self, out: np.ndarray) -> Chunk:
        return Chunk(np.empty(0, np.int64))

    def notes(self) -> dict[str, Any]:
        return {"inputs": len(self.failed), "read": [], "failed": self.failed}


# -- planning -------------------------------------------------------------------------------


def plan_segments(
    start: int, stop: int, count: int, cuts: list[int] | None = None
) -> list[tuple[int, int]]:
    """``count`` half-open segments of ``[start, stop)`` as equal as the cut points allow.

    ``cuts`` are the frames a segment may start at (a video's keyframes); ``None`` allows
    any frame. With sparse cuts there may be fewer segments than asked.

    Example:
        >>> plan_segments(0, 100, 3)
        [(0, 33), (33, 67), (67, 100)]
        >>> plan_segments(0, 100, 3, cuts=[0, 50, 60])
        [(0, 50), (50, 60), (60, 100)]
    """
    if count < 1:
        raise ValueError(f"segments must be at least 1, got {count}")
    allowed = sorted({c for c in cuts if start < c < stop}) if cuts is not None else None
    bounds = [start]
    for k in range(1, min(count, stop - start)):
        ideal = start + round(k * (stop - start) / count)
        if allowed is None:
            cut = ideal
        else:
            later = [c for c in allowed if c > bounds[-1]]
            if not later:
                break
            cut = min(later, key=lambda c: (abs(c - ideal), c))
        if bounds[-1] < cut < stop:
            bounds.append(cut)
    return list(zip(bounds, [*bounds[1:], stop], strict=True))


def auto_segments(frames: int, cluster_cpus: float, cpus_per_segment: int) -> int:
    """How many segments the automatic plan makes: about :data:`SEGMENTS_PER_CPU` per CPU
    of the cluster, but none shorter than :data:`MIN_SEGMENT_FRAMES`.

    Example:
        >>> auto_segments(2000, cluster_cpus=2, cpus_per_segment=1)
        4
        >>> auto_segments(100_000, cluster_cpus=64, cpus_per_segment=2)
        64
        >>> auto_segments(300, cluster_cpus=16, cpus_per_segment=1)
        1
    """
    slots = max(1, int(cluster_cpus // cpus_per_segment))
    return max(1, min(SEGMENTS_PER_CPU * slots, frames // MIN_SEGMENT_FRAMES))


FILES_PER_SEGMENT = 8
"""Inputs of a segment of a job over many, at most (:func:`files_segments`)."""


def files_segments(inputs: int, slots: int) -> int:
    """How many runs of whole inputs a job over ``inputs`` is cut into, for ``slots``
    segments made at once: at least :data:`SEGMENTS_PER_CPU` a slot (so that a slow run
    does not hold up the end) and none of more than :data:`FILES_PER_SEGMENT` inputs (so
    that a rerun after a kill redoes few); one input a segment at most.

    Example:
        >>> files_segments(120, slots=2), files_segments(3, slots=2), files_segments(10, 4)
        (15, 3, 8)
    """
    wanted = max(SEGMENTS_PER_CPU * max(1, slots), -(-inputs // FILES_PER_SEGMENT))
    return max(1, min(inputs, wanted))


def video_frames(path: Path) -> tuple[list[int], list[int], Fraction]:
    """Every frame's pts in presentation order, the keyframes' indices, and the time base.

    Reads packets only (no decoding), with :func:`~hyperframes.io.frame_table.scan`.

    Raises:
        MediaError: the timestamps cannot number the frames, so cuts cannot be placed.
    """
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        table = scan(container, stream)
    if table.untrusted is not None:
        raise MediaError(
            f"{str(path)!r} cannot be cut into segments: {table.untrusted}; "
            "run without --chunks, or remux it with fresh timestamps"
        )
    if not len(table.pts) or base is None:
        raise MediaError(f"{str(path)!r} has no timestamped video packets; re-encode it")
    keyframes = table.keyframes.tolist() or [0]
    return table.pts.tolist(), keyframes, Fraction(base)


def halo_of(build: Build | None, pipeline: Pipeline) -> tuple[int, int]:
    """Frames before and after a segment that the windowed stages ``build`` adds need."""
    if build is None:
        return 0, 0
    before = after = 0
    for stage in build(pipeline).stages:
        footprint = stage.footprint()
        if footprint.stateful:
            raise ValueError(
                f"stage {stage.name!r} keeps state across frames, so a segment cannot be "
                "processed on its own; chunked runs take map stages (windowed or not) only"
            )
        before, after = before + footprint.halo[0], after + footprint.halo[1]
    return before, after


# -- the segment task -----------------------------------------------------------------------


class _Trim(Sink):
    """Passes on only the frames with ids in ``[start, stop)`` (drops the halo)."""

    def __init__(self, sink: Sink, start: int, stop: int) -> None:
        self.sink, self.start, self.stop = sink, start, stop

    def open(self, spec: Any, info: dict[str, Any]) -> None:
        self.sink.open(spec, info)

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        keep = (index >= self.start) & (index < self.stop)
        if keep.any():
            self.sink.write(frames[keep], index[keep], {k: v[keep] for k, v in meta.items()})

    def close(self, *, ok: bool) -> Any:
        return self.sink.close(ok=ok)


def _capped(pipeline: Pipeline, cpus: int) -> Pipeline:
    """``pipeline`` with no stage running more workers than the task's CPUs."""
    stages = tuple(dataclasses.replace(s, workers=min(s.workers, cpus)) for s in pipeline.stages)
    return dataclasses.replace(pipeline, stages=stages)


def process_segment(
    job: Job, part: str, segment: tuple[int, int], frames: int, halo: tuple[int, int],
    build: Build | None, sink_options: dict[str, Any], batch_size: int | None, cpus: int,
    memory: int | str | None, *, executor: str = "threads", progress: ProgressFn | None = None,
    beat: np.ndarray | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Make ``[start - halo, stop + halo)``, run the stages, encode ``[start, stop)``
    into ``part`` with ``cpus`` threads at most; returns the segment's report.

    ``memory`` is the segment's pools' budget (``None``: the machine's default);
    ``executor`` runs the segment's stages (a local one: ``"threads"``, ``"processes"``);
    ``beat``: where a job over many inputs tells a watcher of its reads."""
    pipeline, own = job.segment(segment, frames, halo, cpus, batch_size, beat)
    if build is not None:
        pipeline = build(pipeline)
    sink = _segment_sink(part, sink_options, cpus)
    trimmed = _capped(pipeline, cpus).to(own(sink))
    report = trimmed.run(memory=memory, executor=executor, progress=progress)
    written = sink.rows_written if isinstance(sink, ResultsSink) else sink.frames_written
    failed = job.listed(segment) + list(getattr(pipeline.source, "failed", []))
    record_segment(part, written, failed=failed)  # after the part: a killed task leaves none
    skipped = getattr(pipeline.source, "skipped", [])
    return {"report": report, "skipped": list(skipped), "written": written, "failed": failed}


def _segment_sink(part: str, sink_options: dict[str, Any], cpus: int) -> VideoSink | ResultsSink:
    """A segment's sink: results rows when the output is a results file, else a video
    encoded on the task's CPUs."""
    if Path(part).suffix.lower() in RESULTS:
        return ResultsSink(part, overwrite=True)
    options = {"threads": str(cpus)} | dict(sink_options.get("options") or {})
    return VideoSink(part, overwrite=True, **(sink_options | {"options": options}))


# -- keeping and joining --------------------------------------------------------------------


def segments_folder(output: Path) -> Path:
    """Where a segmented run into ``output`` keeps its segments until the join."""
    return output.with_name(f".{output.name}.segments")


def kept_job(output: Path) -> dict[str, Any] | None:
    """The job an interrupted segmented run into ``output`` recorded (``None``: none)."""
    try:
        job = json.loads((segments_folder(output) / "manifest.json").read_text()).get("job")
    except (OSError, ValueError, AttributeError):
        return None
    return job if isinstance(job, dict) else None


FACTS = {"inputs": "the inputs", "build": "the function's code", "render": "the render's code",
         "source options": "the reading options", "sink": "the encoder options",
         "halo": "the window", "source": "the input", "size": "the input's bytes",
         "mtime_ns": "the input's time", "range": "the frames", "count": "the frames",
         "fps": "the frame rate"}  # fmt: skip
"""What each of a job's facts is, in the words a refused resume names it by."""


def prepare(
    folder: Path, facts: dict[str, Any], plan: list[tuple[int, int]], *, fixed: bool,
    strict: bool = False, grow: Callable[[int], list[tuple[int, int]]] | None = None,
) -> list[tuple[int, int]]:  # fmt: skip
    """The segments to make: the folder's own plan when it holds the same job (and no
    number of segments was asked for), else ``plan`` in an emptied folder. With ``grow``
    (a resume that may take new inputs), a job over inputs that extend the kept job's
    keeps its plan and takes ``grow(kept inputs)``, the segments of the inputs added.

    Raises:
        HyperframesError: ``strict`` (a resume was asked for) and the folder holds finished
            segments of another job, which an emptied folder would lose; the line names
            what differs.
    """
    path = folder / "manifest.json"
    if folder.exists():
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            manifest = {}
        kept = [(int(a), int(b)) for a, b in manifest.get("segments", [])]
        then = manifest.get("job") or {}
        if then == facts and kept and (not fixed or len(kept) == len(plan)):
            return kept
        if kept and grow is not None and _grown(then, facts):
            plan = kept + grow(len(then["inputs"]))
            write_output(path, json.dumps({"job": facts, "segments": plan}), overwrite=True)
            return plan
        if strict and any(folder.glob("segment-*.json")):
            differ = [FACTS.get(k, k) for k in sorted(set(then) | set(facts))
                      if then.get(k) != facts.get(k)] or ["the count of segments"]  # fmt: skip
            raise HyperframesError(
                f"the segments kept in {str(folder)!r} were made by another job (changed "
                f"since: {', '.join(dict.fromkeys(differ))}), so there is nothing to resume; "
                "rerun without resume=True to start over (it removes them)"
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_output(
        path, json.dumps({"job": facts, "segments": [list(s) for s in plan]}), overwrite=True
    )
    return plan


def _grown(then: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether job ``now`` is job ``then`` over more inputs, added after its own."""
    before, after = then.get("inputs"), now.get("inputs")
    if not isinstance(before, list) or not isinstance(after, list):
        return False
    same = {k: v for k, v in then.items() if k != "inputs"} == {
        k: v for k, v in now.items() if k != "inputs"
    }
    return same and len(after) > len(before) and after[: len(before)] == before


class Tally:
    """A segmented run's figures as segments finish: progress, snapshots and the report."""

    def __init__(
        self, total: int, plan: list[tuple[int, int]], todo: list[int], t0: float,
        progress: ProgressFn | None, *, reused_frames: int | None = None,
    ) -> None:  # fmt: skip
        """``plan`` cuts ``total`` frames, or with ``reused_frames`` (the frames the kept
        segments hold) ``total`` inputs, whose frames are not known before they are read."""
        self.plan, self.t0, self.progress = plan, t0, progress
        self.unit = "frames" if reused_frames is None else "inputs"
        self.total = total if reused_frames is None else None  # (frames, for progress)
        self.reused = len(plan) - len(todo)
        self.reused_span = sum(b - a for k, (a, b) in enumerate(plan) if k not in set(todo))
        self.reused_frames = self.reused_span if reused_frames is None else reused_frames
        self.frames = 0  # made by this run (the report's frames and fps count only these)
        self.done: list[dict[str, Any]] = []
        self.results: dict[int, dict[str, Any]] = {}  # by segment

    def finished(self, k: int, result: dict[str, Any]) -> None:
        self.done.append(result)
        self.results[k] = result
        self.frames += result["written"]  # fewer than planned where frames were skipped
        if self.progress is not None:
            elapsed = time.perf_counter() - self.t0
            slowest = max(self._stages(), key=lambda s: s.busy_per_worker_s).name
            if self.unit == "inputs":
                read = self.reused_span + sum(b - a for a, b in map(self.plan.__getitem__,
                                                                    self.results))  # fmt: skip
                done = f"{read}/{self.plan[-1][1]} files"
            else:
                done = f"{self.reused + len(self.done)}/{len(self.plan)} segments"
            made = self.reused_frames + self.frames
            self.progress(Progress(made, self.total, elapsed, slowest, done))

    def _stages(self) -> list[StageReport]:
        summed: dict[str, StageReport] = {}
        for result in self.done:
            for s in result["report"].stages:
                was = summed.get(s.name)
                summed[s.name] = s if was is None else dataclasses.replace(
                    was, frames=was.frames + s.frames, batches=was.batches + s.batches,
                    busy_s=was.busy_s + s.busy_s, wait_in_s=was.wait_in_s + s.wait_in_s,
                    wait_out_s=was.wait_out_s + s.wait_out_s,
                    queue_high_water=max(was.queue_high_water, s.queue_high_water),
                )  # fmt: skip
        return list(summed.values())

    def figures(self) -> dict[str, Any]:
        return {
            "segments": len(self.plan),
            "segments_done": self.reused + len(self.done),
            "reused": self.reused,
        }

    def snapshot(self) -> RunSnapshot:
        stages = tuple(
            StageSnapshot(
                s.name, s.workers, s.frames, s.batches, s.busy_s, s.wait_in_s, s.wait_out_s
            )
            for s in self._stages()
        )
        batch = self.done[0]["report"].batch_size if self.done else 0
        elapsed = time.perf_counter() - self.t0
        return RunSnapshot(
            elapsed,
            self.reused_frames + self.frames,
            self.total,
            batch,
            stages,
            extra={"chunks": self.figures()},
        )

    def report(self, output: str, halo: tuple[int, int], cpus: float, per: int) -> RunReport:
        wall = time.perf_counter() - self.t0
        reports = [r["report"] for r in self.done]
        chunks = self.figures() | {
            "halo": list(halo),
            "cluster_cpus": cpus,
            "cpus_per_segment": per,
            "nodes": len({r["node"] for r in self.done}),
            f"segment_{self.unit}": [
                min(b - a for a, b in self.plan),
                max(b - a for a, b in self.plan),
            ],
            "reused_frames": self.reused_frames,
        }
        if self.unit == "inputs":
            chunks["reused_inputs"] = self.reused_span
        skipped = sorted(i for r in self.done for i in r["skipped"])
        if skipped:
            chunks["skipped_frames"] = skipped
        return RunReport(
            frames=self.frames, wall_s=round(wall, 6), fps=self.frames / wall if wall else 0.0,
            stages=tuple(self._stages()),
            pool_slots=max((r.pool_slots for r in reports), default=0),
            pool_high_water_slots=max((r.pool_high_water_slots for r in reports), default=0),
            pool_high_water_bytes=max((r.pool_high_water_bytes for r in reports), default=0),
            pool_bytes=max((r.pool_bytes for r in reports), default=0),
            reorder_high_water=max((r.reorder_high_water for r in reports), default=0),
            batch_size=reports[0].batch_size if reports else 0,
            setup_s=round(sum(r.setup_s for r in reports), 6),
            memory_budget=max((r.memory_budget for r in reports), default=0),
            sizing=f"per segment: {reports[0].sizing}" if reports else "",
            source_bytes=max((r.source_bytes for r in reports), default=0),
            output=output, extra={"chunks": chunks} | merged_targets([r.extra for r in reports]),
        )  # fmt: skip


def join(
    parts: list[Path], offsets: list[float], output: Path, carried: Carried | None = None,
    job: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Concatenate segment files into ``output``: videos by stream copy, shifting
    timestamps, with the streams ``carried`` names muxed beside them in one piece (so the
    sound has no seams where the segments meet); results files row after row (a Parquet
    file records ``job``, as :func:`~.io.results.join_files` says).

    Returns:
        What became of the carried streams (:meth:`~.io.tracks.Carrier.described`).
    """
    temp = temp_beside(output)
    if output.suffix.lower() in RESULTS:
        try:
            join_files(parts, temp, job)
            publish(temp, output)
        finally:
            temp.unlink(missing_ok=True)
        return {}
    carrier: Carrier | None = None
    try:
        with av.open(str(temp), "w") as out:
            with av.open(str(parts[0])) as first:
                stream = out.add_stream_from_template(first.streams.video[0])
            origin = 0.0 if carried is None else carried.origin
            if carried is not None:
                carrier = Carrier(carried.carry, carried.source, out, output.suffix, stream)
                carrier.start(origin)
            last_dts: int | None = None
            for part, offset in zip(parts, offsets, strict=True):
                with av.open(str(part)) as container:
                    source = container.streams.video[0]
                    assert source.time_base is not None
                    shift = round(offset / source.time_base)
                    for packet in container.demux(source):
                        if packet.pts is None:
                            continue
                        packet.pts += shift
                        if packet.dts is None:  # Matroska stores no decode times: the
                            # first packets of a file come without, before smaller ones
                            packet.dts = packet.pts if last_dts is None else last_dts + 1
                        else:
                            packet.dts += shift
                        if last_dts is not None and packet.dts <= last_dts:
                            packet.dts = last_dts + 1
                        last_dts = packet.dts
                        packet.stream = stream
                        out.mux(packet)
                        if carrier is not None:
                            carrier.until(origin + float(packet.pts * source.time_base))
            if carrier is not None and carried is not None:
                carrier.finish(carried.end)
        publish(temp, output)
        return carrier.described() if carrier is not None else {}
    finally:
        if carrier is not None:
            carrier.close()
        temp.unlink(missing_ok=True)


@dataclass(frozen=True)
class Carried:
    """The streams a chunked run's join carries: what (``carry``), from which file, and
    the span of it the video covers, in seconds of that file."""

    carry: Carry
    source: str
    origin: float
    end: float
