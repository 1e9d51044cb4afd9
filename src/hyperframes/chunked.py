"""Chunked runs on Ray: one long job cut into segments, a Ray task each, joined by stream copy.

Two kinds of job:

* :func:`run_chunked` processes a video. It is cut at keyframes; each task decodes its
  segment (plus a *halo*: the frames windowed stages need on either side), runs the
  stages ``build`` adds, and encodes only the segment's own frames.
* :func:`render_chunked` renders ``fn(i)`` for a frame range, cut anywhere.

The output is a video, or a results file (``.jsonl``, ``.parquet``: the rows of a
``map(..., into=)`` stage, see :mod:`~hyperframes.io.results`), joined in order the same way.

Sizing: by default about two segments per CPU of the cluster (so that a slow node does
not hold up the end), each at least :data:`MIN_SEGMENT_FRAMES` long (so that a task's
start-up, a second or less, is small against it); ``segments=N`` asks for N. A task
reserves ``cpus_per_segment`` CPUs (one by default) and uses that many and no more: the
decoder's and encoder's threads and the stages' workers follow it, so a node runs as
many segments at once as it has CPUs and is never oversubscribed.

Resuming: segment files are written under a hidden name and renamed when complete,
next to a manifest of the job. Rerunning the same job (same input, stages, options)
reuses the finished segments and does only the missing ones, also after the driver or
a node died. Every node must see the input and the output's folder at the same path
(one machine, or a shared file system).

With a lossless codec the output frames are identical to a local run's; with a lossy one
each segment is encoded on its own, so frames match up to encoding.

Example:
    >>> def build(p):  # doctest: +SKIP
    ...     return p.map(denoise, window=(2, 2))
    >>> report = run_chunked("in.mp4", "out.mkv", build, codec="ffv1")  # doctest: +SKIP
    >>> report.extra["chunks"]["segments"]  # doctest: +SKIP
    8

Longer than 300 lines: the two kinds of job share planning, the segment task, the
manifest, the join and the run's report, which read best together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from ._identity import code_identity, record_segment, segment_ok
from .engine.report import RunReport, RunSnapshot, StageReport, StageSnapshot
from .engine.runner import Monitor, Progress, ProgressFn
from .engine.sizing import available_memory, default_budget
from .engine.window import HaloStream
from .errors import HyperframesError, MediaError
from .executors.ray import RayExecutor, check_shippable, node_id
from .frames import FrameSpec
from .io.base import Sink
from .io.frame_table import scan
from .io.publish import check_output, publish, temp_beside, write_output
from .io.results import FORMATS as RESULTS
from .io.results import ResultsSink, format_of, join_files
from .io.video import VideoSource
from .io.video_sink import VideoSink
from .pipeline import Pipeline

Build = Callable[[Pipeline], Pipeline]

MIN_SEGMENT_FRAMES = 240
"""The fewest frames of a segment the automatic plan makes (ten seconds at 24 fps)."""

SEGMENTS_PER_CPU = 2
"""Segments per CPU of the cluster in the automatic plan."""


# -- jobs: what one segment task makes its pipeline from ------------------------------------


@dataclass(frozen=True)
class _VideoJob:
    """Frames of a video; frame ids are the video's own frame numbers."""

    path: str
    options: dict[str, Any] = field(default_factory=dict)

    def pipeline(self, start: int, stop: int, cpus: int, batch_size: int | None) -> Pipeline:
        source = VideoSource(self.path, start=start, stop=stop, threads=cpus, **self.options)
        return Pipeline.from_source(source, batch_size=batch_size)

    def first_id(self, start: int) -> int:
        return start


@dataclass(frozen=True)
class _Shifted:
    """``fn(i + offset)``: a segment renders its frames as ids from 0."""

    fn: Callable[[int], np.ndarray]
    offset: int

    def __call__(self, i: int) -> np.ndarray:
        return self.fn(i + self.offset)

    @property
    def __name__(self) -> str:  # the stage's name in reports
        return getattr(self.fn, "__name__", "render")


@dataclass(frozen=True)
class _RenderJob:
    """Frames rendered by ``fn(i)``; frame ids start at 0 in each segment."""

    fn: Callable[[int], np.ndarray]
    spec: FrameSpec

    def pipeline(self, start: int, stop: int, cpus: int, batch_size: int | None) -> Pipeline:
        fn = _Shifted(self.fn, start)
        return Pipeline.from_generator(
            fn, count=stop - start, spec=self.spec, workers=cpus, batch_size=batch_size
        )

    def first_id(self, start: int) -> int:
        return 0


_Job = _VideoJob | _RenderJob


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
        if stage.make_stream is None:
            continue
        stream = stage.make_stream(1)  # any batch size: only the window is read
        if not isinstance(stream, HaloStream):
            raise ValueError(
                f"stage {stage.name!r} keeps state across frames, so a segment cannot be "
                "processed on its own; chunked runs take map stages (windowed or not) only"
            )
        before, after = before + stream.before, after + stream.after
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
    job: _Job, part: str, segment: tuple[int, int], frames: int, halo: tuple[int, int],
    build: Build | None, sink_options: dict[str, Any], batch_size: int | None, cpus: int,
    memory: int | str | None,
) -> dict[str, Any]:  # fmt: skip
    """Make ``[start - halo, stop + halo)``, run the stages, encode ``[start, stop)``
    into ``part`` with ``cpus`` threads at most; returns the segment's report.

    ``memory`` is the segment's pools' budget; by default its share of the node (its CPUs
    of the node's), as :func:`~hyperframes.engine.sizing.default_budget` sizes it."""
    if memory is None:
        available = available_memory()
        share = cpus / max(cpus, os.cpu_count() or 1)
        memory = default_budget(None if available is None else int(available * share))
    start, stop = segment
    lo, hi = max(0, start - halo[0]), min(frames, stop + halo[1])
    pipeline = job.pipeline(lo, hi, cpus, batch_size)
    if build is not None:
        pipeline = build(pipeline)
    sink = _segment_sink(part, sink_options, cpus)
    first = job.first_id(lo) - lo
    trimmed = _capped(pipeline, cpus).to(_Trim(sink, start + first, stop + first))
    report = trimmed.run(memory=memory)
    written = sink.rows_written if isinstance(sink, ResultsSink) else sink.frames_written
    record_segment(part, written)  # after the part: a killed task leaves none
    skipped = getattr(pipeline.source, "skipped", [])
    return {
        "report": report, "node": node_id(), "skipped": list(skipped), "written": written,
    }  # fmt: skip


def _segment_sink(part: str, sink_options: dict[str, Any], cpus: int) -> VideoSink | ResultsSink:
    """A segment's sink: results rows when the output is a results file, else a video
    encoded on the task's CPUs."""
    if Path(part).suffix.lower() in RESULTS:
        return ResultsSink(part, overwrite=True)
    options = {"threads": str(cpus)} | dict(sink_options.get("options") or {})
    return VideoSink(part, overwrite=True, **(sink_options | {"options": options}))


# -- the run --------------------------------------------------------------------------------


def run_chunked(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    build: Build | None = None,
    *,
    start: int = 0,
    stop: int | None = None,
    source_options: dict[str, Any] | None = None,
    **options: Any,
) -> RunReport:
    """Process the video ``source`` into ``output`` in keyframe-aligned segments, a Ray
    task each, joined by stream copy.

    Args:
        source: the input video.
        output: the output video; its extension picks the container.
        build: adds the stages, ``build(pipeline) -> pipeline`` (map stages, windowed or
            not); ``None`` transcodes. It is sent to the workers, so Ray must be able to
            pickle it.
        start, stop: the frame range to process (``stop=None``: to the end).
        source_options: options of each segment's
            :class:`~hyperframes.io.video.VideoSource` (``size``, ``pix_fmt``, ``on_corrupt``).
        options: as :func:`render_chunked` takes them (``executor``, ``segments``,
            ``cpus_per_segment``, ``batch_size``, ``work_dir``, ``keep_segments``,
            ``overwrite``, ``progress``, ``monitor``) and the
            :class:`~hyperframes.io.video_sink.VideoSink` options (``codec``, ``crf``...).

    Returns:
        The run's :class:`~hyperframes.engine.report.RunReport`: stage figures summed over
        the segments, and ``extra["chunks"]`` (segments, reused, halo, nodes).

    Raises:
        FileExistsError: ``output`` exists and ``overwrite`` is false.
        ValueError: stateful stages, a bad option or range.
        HyperframesError: a segment failed (after every other segment finished; the
            finished ones are kept for a rerun).
    """
    path = Path(source)
    pts, keyframes, base = video_frames(path)
    stop = len(pts) if stop is None else min(stop, len(pts))
    if not 0 <= start < stop:
        raise ValueError(f"start={start}, stop={stop}: no frames of {len(pts)} to process")
    job = _VideoJob(str(path.resolve()), dict(source_options or {}))  # workers' folders differ
    stat = path.stat()
    facts = {
        "source": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
        "range": [start, stop], "source options": repr(sorted(job.options.items())),
    }  # fmt: skip

    def offset(frame: int) -> float:
        return float((pts[frame] - pts[start]) * base)

    return _run(job, output, build, (start, stop), len(pts), keyframes, offset, facts, **options)


def render_chunked(
    fn: Callable[[int], np.ndarray],
    output: str | os.PathLike[str],
    *,
    count: int,
    size: tuple[int, int],
    fps: float = 30.0,
    build: Build | None = None,
    **options: Any,
) -> RunReport:
    """Render ``fn(i)`` for ``i`` in ``0..count-1`` into ``output`` in segments, a Ray task
    each, joined by stream copy.

    Args:
        fn: renders frame ``i`` as a ``(height, width, 3)`` uint8 array; sent to the
            workers, so Ray must be able to pickle it.
        output: the output video; its extension picks the container.
        count: frames to render.
        size: ``(width, height)`` of the frames.
        fps: frames per second of the output.
        build: stages to add after the render, as for :func:`run_chunked`.
        options:
            ``executor``: the :class:`~hyperframes.executors.ray.RayExecutor` to use (by
            default a new one: a local Ray, or the cluster of ``RAY_ADDRESS``);
            ``segments``: how many (default: from the cluster's CPUs);
            ``cpus_per_segment``: CPUs each task reserves and uses (default 1);
            ``batch_size``: frames per batch inside a segment;
            ``memory``: each segment's budget for its pools (default: its share of the
            node's memory, by its CPUs);
            ``work_dir``: where segments are kept until the join (default: a hidden
            folder next to the output); ``keep_segments``: keep it after the join;
            ``overwrite``: replace an existing output; ``progress``: called as segments
            finish; ``monitor``: watches the run (metrics exporters); any other keyword
            goes to each segment's :class:`~hyperframes.io.video_sink.VideoSink`.

    Example:
        >>> report = render_chunked(frame_of, "out.mkv", count=30_000,
        ...                         size=(1920, 1080), codec="ffv1")  # doctest: +SKIP
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    width, height = size
    job = _RenderJob(fn, FrameSpec((height, width, 3)))
    facts = {"render": code_identity(fn), "count": count, "size": [width, height], "fps": fps}

    def offset(frame: int) -> float:
        return frame / fps

    return _run(job, output, build, (0, count), count, None, offset, facts, fps=fps, **options)


def _run(
    job: _Job,
    output: str | os.PathLike[str],
    build: Build | None,
    span: tuple[int, int],
    frames: int,
    cuts: list[int] | None,
    offset: Callable[[int], float],
    facts: dict[str, Any],
    *,
    executor: RayExecutor | None = None,
    segments: int | None = None,
    cpus_per_segment: int = 1,
    batch_size: int | None = None,
    memory: int | str | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    keep_segments: bool = False,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    monitor: Monitor | None = None,
    **sink_options: Any,
) -> RunReport:
    t0 = time.perf_counter()
    target = check_output(output, overwrite=overwrite)
    if cpus_per_segment < 1:
        raise ValueError(f"cpus_per_segment must be at least 1, got {cpus_per_segment}")
    if target.suffix.lower() in RESULTS:  # a results file: rows, joined in order
        format_of(target)
    else:  # bad sink options fail here, not on Ray
        VideoSink(target, overwrite=True, **sink_options)
    halo = halo_of(build, job.pipeline(span[0], span[0] + 1, 1, None))
    ray = (executor or RayExecutor()).ray
    check_shippable(ray, build, "the build function")
    check_shippable(ray, job, "the render function")
    sink = repr(sorted(sink_options.items()))
    facts |= {"build": code_identity(build), "halo": list(halo), "sink": sink}
    folder = Path(work_dir) if work_dir else target.with_name(f".{target.name}.segments")
    folder = folder.resolve()  # the tasks' working folders are not the driver's
    cluster_cpus = float(ray.cluster_resources().get("CPU", 1))
    wanted = segments or auto_segments(span[1] - span[0], cluster_cpus, cpus_per_segment)
    plan = _prepare(folder, facts, plan_segments(*span, wanted, cuts), fixed=bool(segments))
    parts = [folder / f"segment-{k:05d}{target.suffix}" for k in range(len(plan))]
    todo = [k for k, part in enumerate(parts) if not segment_ok(part)]
    watch = _Watch(span[1] - span[0], plan, todo, t0, progress)
    if monitor is not None:
        monitor.start(watch.snapshot)
    report: RunReport | None = None
    try:
        spread = {"num_cpus": cpus_per_segment, "scheduling_strategy": "SPREAD"}
        task = ray.remote(process_segment).options(**spread)
        args = (frames, halo, build, sink_options, batch_size, cpus_per_segment, memory)
        refs = {task.remote(job, str(parts[k]), plan[k], *args): k for k in todo}
        _wait_all(ray, refs, plan, folder, watch)
        join(parts, [offset(a) for a, _ in plan], target)
        report = watch.report(str(target), halo, cluster_cpus, cpus_per_segment)
    finally:
        if monitor is not None:
            monitor.stop(report)
    if not keep_segments:
        shutil.rmtree(folder, ignore_errors=True)
    return report


def _prepare(
    folder: Path, facts: dict[str, Any], plan: list[tuple[int, int]], *, fixed: bool
) -> list[tuple[int, int]]:
    """The segments to make: the folder's own plan when it holds the same job (and no
    number of segments was asked for), else ``plan`` in an emptied folder."""
    path = folder / "manifest.json"
    if folder.exists():
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            manifest = {}
        kept = [tuple(s) for s in manifest.get("segments", [])]
        if manifest.get("job") == facts and kept and (not fixed or len(kept) == len(plan)):
            return [(int(a), int(b)) for a, b in kept]
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_output(
        path, json.dumps({"job": facts, "segments": [list(s) for s in plan]}), overwrite=True
    )
    return plan


class _Watch:
    """The chunked run's figures as segments finish: progress, snapshots and the report."""

    def __init__(
        self,
        total: int,
        plan: list[tuple[int, int]],
        todo: list[int],
        t0: float,
        progress: ProgressFn | None,
    ) -> None:
        self.total, self.plan, self.t0, self.progress = total, plan, t0, progress
        self.reused = len(plan) - len(todo)
        self.reused_frames = sum(b - a for k, (a, b) in enumerate(plan) if k not in set(todo))
        self.frames = 0  # made by this run (the report's frames and fps count only these)
        self.done: list[dict[str, Any]] = []

    def finished(self, k: int, result: dict[str, Any]) -> None:
        self.done.append(result)
        self.frames += result["written"]  # fewer than planned where frames were skipped
        if self.progress is not None:
            elapsed = time.perf_counter() - self.t0
            slowest = max(self._stages(), key=lambda s: s.busy_per_worker_s).name
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
            "segment_frames": [min(b - a for a, b in self.plan), max(b - a for a, b in self.plan)],
            "reused_frames": self.reused_frames,
        }
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
            output=output, extra={"chunks": chunks},
        )  # fmt: skip


def _wait_all(
    ray: Any, refs: dict[Any, int], plan: list[tuple[int, int]], folder: Path, watch: _Watch
) -> None:
    """Wait for every task; then raise for the first failure (finished segments are kept)."""
    failed: list[tuple[int, BaseException]] = []
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            k = refs[done[0]]
            try:
                watch.finished(k, ray.get(done[0]))
            except Exception as exc:
                cause = getattr(exc, "cause", None)
                failed.append((k, cause if isinstance(cause, BaseException) else exc))
    except BaseException:  # interrupted: stop the tasks still out (finished ones are kept)
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
    if failed:
        k, error = min(failed, key=lambda f: f[0])
        a, b = plan[k]
        text = str(error).strip()
        message = text.splitlines()[0] if text else type(error).__name__
        raise HyperframesError(
            f"segment {k} (frames {a}-{b - 1}) failed: {message} ({len(failed)} of "
            f"{len(plan)} segments failed; finished ones are kept in {str(folder)!r}: rerun "
            "the same command to do only the missing ones)"
        ) from error


def join(parts: list[Path], offsets: list[float], output: Path) -> None:
    """Concatenate segment files into ``output``: videos by stream copy, shifting
    timestamps; results files row after row."""
    temp = temp_beside(output)
    if output.suffix.lower() in RESULTS:
        try:
            join_files(parts, temp)
            publish(temp, output)
        finally:
            temp.unlink(missing_ok=True)
        return
    try:
        with av.open(str(temp), "w") as out:
            with av.open(str(parts[0])) as first:
                stream = out.add_stream_from_template(first.streams.video[0])
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
                        packet.dts = packet.pts if packet.dts is None else packet.dts + shift
                        if last_dts is not None and packet.dts <= last_dts:
                            packet.dts = last_dts + 1
                        last_dts = packet.dts
                        packet.stream = stream
                        out.mux(packet)
        publish(temp, output)
    finally:
        temp.unlink(missing_ok=True)
