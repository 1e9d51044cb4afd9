"""Chunked runs on Ray: one long job cut into segments, a Ray task each, joined by stream copy.

Three kinds of job:

* :func:`run_chunked` processes a video. It is cut at keyframes; each task decodes its
  segment (plus a *halo*: the frames windowed stages need on either side), runs the
  stages ``build`` adds, and encodes only the segment's own frames.
* :func:`render_chunked` renders ``fn(i)`` for a frame range, cut anywhere. With a local
  executor (``executor="threads"``) the segments are made one after another on this
  machine: that is how ``hyperframes render`` makes a long render resumable.
* :func:`run_files` reads many inputs into one results file, cut into runs of whole
  inputs. With ``executor="processes"`` the runs are made side by side in processes of
  this machine, each reading its own files, its reads watched for the file timeout.

The output is a video, or a results file (``.jsonl``, ``.parquet``: the rows of a
``map(..., into=)`` stage, see :mod:`~hyperframes.io.results`), joined in order the same way.

Sizing: by default about two segments per CPU of the cluster (so that a slow node does
not hold up the end), each at least ``segments.MIN_SEGMENT_FRAMES`` long (so that a
task's start-up, a second or less, is small against it); ``segments=N`` asks for N. A task
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

Longer than 300 lines: the three public calls document every option; the run on Ray, the
runs here one after another and side by side share one body (``hyperframes.segments``
holds what a segment is).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

import numpy as np

from .engine.report import RunReport
from .engine.sizing import available_memory, default_budget, parse_memory
from .engine.watch import Monitor, Progress, ProgressFn
from .errors import HyperframesError
from .executors.ray import RayExecutor, check_shippable, node_id
from .executors.worker import SharedBlocks, Worker, WorkerDied
from .frames import FrameSpec
from .identity import code_identity, segment_ok, segment_record
from .io.carry import Carry
from .io.inputs import Input
from .io.publish import check_output, host_name
from .io.pulse import BEAT_BYTES, BEGUN, BUSY, POSITION, new_beat
from .io.reader_process import FileStalled
from .io.results import FORMATS as RESULTS
from .io.results import format_of
from .io.video_files import VideoFiles
from .io.video_sink import EncoderOptions, VideoSink
from .segments import (
    Build,
    Carried,
    FilesJob,
    Job,
    RenderJob,
    Tally,
    VideoJob,
    auto_segments,
    files_segments,
    halo_of,
    join,
    plan_segments,
    prepare,
    process_segment,
    segments_folder,
    video_frames,
)  # fmt: skip


class ChunkOptions(EncoderOptions, total=False):
    """The options of :func:`run_chunked` and :func:`render_chunked` (see the latter), and
    the encoder's (:class:`~hyperframes.io.video_sink.EncoderOptions`)."""

    executor: RayExecutor | str | None
    workers: int | None
    resume: bool
    segments: int | None
    cpus_per_segment: int
    batch_size: int | None
    memory: int | str | None
    work_dir: str | os.PathLike[str] | None
    keep_segments: bool
    overwrite: bool
    progress: ProgressFn | None
    monitor: Monitor | None
    carry: Carry | None


LOCAL_SEGMENT_FRAMES, MAX_LOCAL_SEGMENTS = 1_000, 200
"""Frames of a segment of a local run, and the most segments (:func:`local_segments`)."""


# -- the run --------------------------------------------------------------------------------


def run_chunked(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    build: Build | None = None,
    *,
    start: int = 0,
    stop: int | None = None,
    source_options: dict[str, Any] | None = None,
    **options: Unpack[ChunkOptions],
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
    job = VideoJob(str(path.resolve()), dict(source_options or {}))  # workers' folders differ
    stat = path.stat()
    facts = {
        "source": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
        "range": [start, stop], "source options": repr(sorted(job.options.items())),
    }  # fmt: skip

    def offset(frame: int) -> float:
        return float((pts[frame] - pts[start]) * base)

    carry, carried = options.get("carry"), None
    if carry is not None:  # the input's other streams, over the span the frames cover
        step = pts[-1] - pts[-2] if len(pts) > 1 else round(1 / (30 * base))
        end = pts[stop] if stop < len(pts) else pts[-1] + step
        span = float(pts[start] * base), float(end * base)
        carried = Carried(carry, carry.source or job.path, *span)
    return _run(
        job, output, build, (start, stop), len(pts), keyframes, offset, facts, carried, **options
    )


def render_chunked(
    fn: Callable[[int], np.ndarray],
    output: str | os.PathLike[str],
    *,
    count: int,
    size: tuple[int, int],
    fps: float = 30.0,
    build: Build | None = None,
    **options: Unpack[ChunkOptions],
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
            default a new one: a local Ray, or the cluster of ``RAY_ADDRESS``), or a local
            executor's name (``"threads"``, ``"processes"``): the segments are then made
            one after another on this machine, each with ``workers`` workers, a run of
            ``resume=False`` refuses to reuse what an interrupted run kept (it says so);
            ``segments``: how many (default: from the cluster's CPUs, locally one per
            :data:`LOCAL_SEGMENT_FRAMES`);
            ``cpus_per_segment``: CPUs each task reserves and uses (default 1);
            ``batch_size``: frames per batch inside a segment;
            ``memory``: each segment's budget for its pools (default: its share of the
            node's memory, by its CPUs);
            ``work_dir``: where segments are kept until the join (default: a hidden
            folder next to the output); ``keep_segments``: keep it after the join;
            ``overwrite``: replace an existing output; ``progress``: called as segments
            finish; ``monitor``: watches the run (metrics exporters); ``carry``: the
            streams to mux beside the video at the join (a
            :class:`~hyperframes.io.carry.Carry`; a render's needs a ``source``, such as a
            soundtrack; a video's carries from its input by default), in one piece, so
            the sound has no seams where segments meet; any other keyword goes to each
            segment's :class:`~hyperframes.io.video_sink.VideoSink`.

    Example:
        >>> report = render_chunked(frame_of, "out.mkv", count=30_000,
        ...                         size=(1920, 1080), codec="ffv1")  # doctest: +SKIP
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    width, height = size
    job = RenderJob(fn, FrameSpec((height, width, 3)))
    facts = {"render": code_identity(fn), "count": count, "size": [width, height], "fps": fps}

    def offset(frame: int) -> float:
        return frame / fps

    carry, carried = options.get("carry"), None
    if carry is not None:
        if carry.source is None:
            raise ValueError("a render has no input to carry streams from; pass carry.source")
        carried = Carried(carry, carry.source, 0.0, count / fps)
    return _run(
        job, output, build, (0, count), count, None, offset, facts, carried, fps=fps, **options
    )


def run_files(
    inputs: str | os.PathLike[str] | list[Any],
    output: str | os.PathLike[str],
    build: Build | None = None,
    *,
    source_options: dict[str, Any] | None = None,
    record: dict[str, Any] | None = None,
    **options: Unpack[ChunkOptions],
) -> RunReport:
    """Read many inputs into one results file, runs of whole inputs side by side: Ray
    tasks over the cluster, or with ``executor="processes"`` one process of this machine
    per worker (``workers``, by default one per core), each reading its own files with a
    decoder of its own, so that one file's open and first frames overlap another's decoding.

    Args:
        inputs: a folder, a glob, a manifest or a list (as
            :class:`~hyperframes.io.video_files.VideoFiles` takes them).
        output: the results file (``.parquet``, ``.jsonl``): every input's rows, in the
            inputs' order, each naming its input (``path`` and a manifest's columns).
        build: adds the stages, as for :func:`run_chunked` (map stages; a window does not
            reach across files, so none is taken).
        source_options: each run's :class:`~hyperframes.io.video_files.VideoFiles`
            options (``size``, ``on_error``, ``file_timeout``...; not ``on_failed``).
        record: the job, recorded in a Parquet output as a
            :class:`~hyperframes.io.results.ResultsSink`'s ``job`` is.
        options: as :func:`render_chunked` takes them; ``segments``: runs of inputs
            (default: :func:`~hyperframes.segments.files_segments`).

    Returns:
        The run's report; ``extra["source"]`` lists the inputs that could not be read
        (``failed``), those of runs a rerun reused too.
    """
    from .io.inputs import expand, inputs_record
    from .io.kinds import registered

    given = list(inputs) if isinstance(inputs, list | tuple) else None
    items = given if given and all(isinstance(i, Input) for i in given) else expand(inputs)
    job = FilesJob(tuple(items), {"kinds": tuple(registered())} | dict(source_options or {}))
    if "on_failed" in job.options:
        raise ValueError("run_files lists failed inputs in its report; drop on_failed")
    if job.options.get("size") is None:  # each run would check only its own inputs
        VideoFiles(items, on_failed=lambda f: None, **job.options).close()  # (refused: frames
        # of several kinds; the inputs that fail are listed by the runs that read them)
    rows = {k: v for k, v in job.options.items()
            if k not in ("on_error", "file_timeout", "kinds")}  # fmt: skip
    facts = {"inputs": inputs_record(items), "source options": repr(sorted(rows.items()))}
    # (how failures are met is not the job: a run stopped by one goes on without it)
    span = (0, len(items))
    return _run(job, output, build, span, len(items), None, lambda k: 0.0, facts, None,
                record=record, **options)  # fmt: skip


def _run(
    job: Job,
    output: str | os.PathLike[str],
    build: Build | None,
    span: tuple[int, int],
    frames: int,
    cuts: list[int] | None,
    offset: Callable[[int], float],
    facts: dict[str, Any],
    carried: Carried | None,
    *,
    fps: float | None = None,
    executor: RayExecutor | str | None = None,
    workers: int | None = None,
    resume: bool = True,
    segments: int | None = None,
    cpus_per_segment: int = 1,
    batch_size: int | None = None,
    memory: int | str | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    keep_segments: bool = False,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    monitor: Monitor | None = None,
    carry: Carry | None = None,  # (the caller's ``carried`` says what of it to join)
    record: dict[str, Any] | None = None,
    **encoder: Unpack[EncoderOptions],
) -> RunReport:
    sink_options: dict[str, Any] = dict(encoder) | ({"fps": fps} if fps is not None else {})
    t0 = time.perf_counter()
    target = check_output(output, overwrite=overwrite)
    if cpus_per_segment < 1:
        raise ValueError(f"cpus_per_segment must be at least 1, got {cpus_per_segment}")
    if target.suffix.lower() in RESULTS:  # a results file: rows, joined in order
        format_of(target)
    else:  # bad sink options fail here, not on Ray
        VideoSink(target, overwrite=True, **sink_options)
    halo = halo_of(build, job.probe(span[0]))
    files = isinstance(job, FilesJob)
    if files and halo != (0, 0):
        raise ValueError("a window does not reach across files; run over many inputs "
                         "without window= (or read each input on its own)")  # fmt: skip
    local = isinstance(executor, str)
    side_by_side = local and files and executor == "processes"
    wanted: Callable[[int], int]  # how many segments for a span of so many frames (inputs)
    if side_by_side:  # a process per worker, each making segment after segment
        slots = workers = workers or len(os.sched_getaffinity(0))
        cpus_per_segment, cluster_cpus = 1, float(workers)
        wanted = lambda n: segments or files_segments(n, slots)  # noqa: E731
    elif local:  # one segment after another on this machine, each with every worker
        cpus_per_segment = workers or 1
        cluster_cpus = float(cpus_per_segment)
        wanted = lambda n: segments or local_segments(n)  # noqa: E731
    else:
        ray = (executor or RayExecutor()).ray  # type: ignore[union-attr]
        check_shippable(ray, build, "the build function")
        check_shippable(ray, job, "the job (a render's function, or inputs' options)")
        cluster_cpus = float(ray.cluster_resources().get("CPU", 1))
        slots = max(1, int(cluster_cpus // cpus_per_segment))
        wanted = lambda n: segments or (  # noqa: E731
            files_segments(n, slots) if files
            else auto_segments(n, cluster_cpus, cpus_per_segment)
        )  # fmt: skip
    sink = repr(sorted(sink_options.items()))
    facts |= {"build": code_identity(build), "halo": list(halo), "sink": sink}
    folder = Path(work_dir) if work_dir else segments_folder(target)
    folder = folder.resolve()  # the tasks' working folders are not the driver's
    if overwrite and folder.is_dir():  # overwrite reuses nothing an earlier run kept
        shutil.rmtree(folder)
    cut = plan_segments(*span, wanted(span[1] - span[0]), cuts)

    def grow(start: int) -> list[tuple[int, int]]:  # the segments of inputs added since
        return plan_segments(start, span[1], wanted(span[1] - start))

    plan = prepare(folder, facts, cut, fixed=bool(segments), strict=local and resume,
                   grow=grow if files and resume else None)  # fmt: skip
    parts = [folder / f"segment-{k:05d}{target.suffix}" for k in range(len(plan))]
    todo = [k for k, part in enumerate(parts) if not segment_ok(part)]
    if todo and len(todo) < len(plan) and not resume:
        raise HyperframesError(
            f"a run of the same job into {str(target)!r} stopped with {len(plan) - len(todo)} "
            f"of {len(plan)} segments made (kept in {str(folder)!r}); pass resume=True to "
            "continue it, or pass overwrite=True to start over"
        )
    records = [segment_record(part) for k, part in enumerate(parts) if k not in set(todo)]
    reused_frames = sum(int(r.get("frames", 0)) for r in records) if files else None
    watch = Tally(span[1] - span[0], plan, todo, t0, progress, reused_frames=reused_frames)
    if monitor is not None:
        monitor.start(watch.snapshot)
    report: RunReport | None = None
    args = (frames, halo, build, sink_options, batch_size, cpus_per_segment, memory)
    try:
        if side_by_side:  # (each process reads its own files, told to a guard here)
            assert workers is not None and isinstance(job, FilesJob)
            timeout = job.options.get("file_timeout")
            here = {key: value for key, value in job.options.items() if key != "file_timeout"}
            job = dataclasses.replace(job, options=here)
            _run_side_by_side(job, parts, plan, todo, args, workers, watch, folder, timeout)
        elif local:
            _run_here(job, parts, plan, todo, args, str(executor), watch)
        else:
            spread = {"num_cpus": cpus_per_segment, "scheduling_strategy": "SPREAD"}
            task = ray.remote(_segment_task).options(**spread)
            refs = {task.remote(job, str(parts[k]), plan[k], *args): k for k in todo}
            _wait_all(ray, refs, plan, folder, watch)
        streams = join(parts, [offset(a) for a, _ in plan], target, carried, record)
        report = watch.report(str(target), halo, cluster_cpus, cpus_per_segment)
        if streams:
            report.extra["streams"] = streams
        if files:  # the inputs that failed, in order, those of reused segments too
            failed = [
                f
                for k, part in enumerate(parts)
                for f in (
                    watch.results[k]["failed"]
                    if k in watch.results
                    else segment_record(part).get("failed", [])
                )
            ]
            report.extra["source"] = {"inputs": span[1], "failed": failed}
    except BaseException as stop:  # say what a rerun keeps
        kept = len(plan) - len(todo) + len(watch.done)
        again = "rerun with resume=True" if local else "rerun the same command"
        told = f"{kept} of {len(plan)} segments kept in {str(folder)!r}: {again} to continue"
        if isinstance(stop, KeyboardInterrupt):
            stop.kept = told  # type: ignore[attr-defined]  # the command line prints it
        elif local and kept:  # (on Ray, the failed segment's error says it)
            stop.add_note(told)
        raise
    finally:
        if monitor is not None:
            monitor.stop(report)
    if not keep_segments:
        shutil.rmtree(folder, ignore_errors=True)
    return report


def local_segments(frames: int) -> int:
    """How many segments a local run of ``frames`` frames is cut into: about one per
    :data:`LOCAL_SEGMENT_FRAMES`, at most :data:`MAX_LOCAL_SEGMENTS` (an interrupted run
    loses at most one segment's work).

    Example:
        >>> local_segments(1_500), local_segments(20_000), local_segments(1_000_000)
        (1, 20, 200)
    """
    return max(1, min(MAX_LOCAL_SEGMENTS, frames // LOCAL_SEGMENT_FRAMES))


def _run_here(
    job: Job,
    parts: list[Path],
    plan: list[tuple[int, int]],
    todo: list[int],
    args: tuple[Any, ...],
    executor: str,
    watch: Tally,
) -> None:
    """Make the segments ``todo`` one after another in this process, with ``executor``;
    the progress counts frames as they are written."""
    node = host_name()
    for k in todo:
        made = watch.reused_frames + watch.frames

        def tell(p: Progress, made: int = made) -> None:
            if watch.progress is not None:
                elapsed = time.perf_counter() - watch.t0
                watch.progress(Progress(made + p.frames, watch.total, elapsed, p.slowest_stage))

        result = process_segment(
            job, str(parts[k]), plan[k], *args, executor=executor, progress=tell
        )
        watch.finished(k, result | {"node": node})


def _run_side_by_side(
    job: Job,
    parts: list[Path],
    plan: list[tuple[int, int]],
    todo: list[int],
    args: tuple[Any, ...],
    workers: int,
    watch: Tally,
    folder: Path,
    timeout: float | None,
) -> None:
    """Make the segments ``todo`` in ``workers`` processes of this machine, each taking
    the next one as it finishes one; after a failure none is handed out, those running
    finish (and are kept), and the first failure in the plan's order is raised.

    Each process reads its own inputs and tells its reads in a beat (shared memory,
    :mod:`~.io.beating`): one that runs longer than ``timeout`` seconds stops the process,
    as does a process that dies in a read, and the segment is made again in a new one
    without that input, which is listed as failed with why."""
    *head, memory = args  # the job's budget, shared by the processes
    whole = parse_memory(memory) if memory is not None else default_budget(available_memory())
    each = max(1, whole // workers)
    left, lock = list(reversed(todo)), threading.Lock()
    stop, ended = threading.Event(), threading.Event()  # no more handed out; all ended
    failed: list[tuple[int, BaseException]] = []
    processes: list[Worker] = []
    running: dict[int, tuple[Worker, np.ndarray]] = {}  # by id(worker)
    stalled: dict[int, int] = {}  # id(worker): the position of the input it stalled on
    beats, node = SharedBlocks(), host_name()

    def take() -> int | None:
        with lock:
            return left.pop() if left and not stop.is_set() else None

    def start() -> Worker | None:
        worker = Worker(_watched_segment, name="hf-segments", daemon=False, preload=(__name__,))
        with lock:
            processes.append(worker)
            if stop.is_set():  # (the run was stopped while it started)
                worker.close()
                return None
        return worker

    def drive() -> None:
        k, this = take(), job
        worker = None if k is None else start()
        beat = new_beat(beats.create(BEAT_BYTES))
        while worker is not None and k is not None:
            beat[:] = (-1, 0, 0)
            with lock:
                running[id(worker)] = (worker, beat)
            try:
                result = worker.call(beat, this, str(parts[k]), plan[k], *head, each)
            except BaseException as exc:
                with lock:
                    running.pop(id(worker), None)
                    why = _given_up(exc, stalled.pop(id(worker), None), beat, timeout)
                if why is None or stop.is_set() or not isinstance(this, FilesJob):
                    with lock:
                        failed.append((k, exc))
                    stop.set()
                    return
                worker.close()  # the segment again, in a new process, without that input
                this, worker = dataclasses.replace(this, given_up=(*this.given_up, why)), start()
                continue
            with lock:
                running.pop(id(worker), None)
                watch.finished(k, result | {"node": node})
            k, this = take(), job

    def guard() -> None:  # stop a process whose read has run past the timeout
        assert timeout is not None
        seen: dict[int, tuple[int, float]] = {}
        while not ended.wait(GUARD_S):
            now = time.monotonic()
            with lock:
                now_running = list(running.items())
            for key, (worker, beat) in now_running:
                begun, busy = int(beat[BEGUN]), int(beat[BUSY])
                was = seen.get(key)
                if not busy or was is None or was[0] != begun:
                    seen[key] = (begun, now)
                elif now - was[1] >= timeout:
                    with lock:
                        if key in running:
                            stalled[key] = int(beat[POSITION])
                    worker.close()
                    seen.pop(key, None)

    threads = [threading.Thread(target=drive, name=f"hf-segments-{n}", daemon=True)
               for n in range(min(workers, len(todo)))]  # fmt: skip
    if timeout is not None:
        threads.append(threading.Thread(target=guard, name="hf-segments-guard", daemon=True))
    try:
        for thread in threads:
            thread.start()
        for thread in threads[: min(workers, len(todo))]:
            while thread.is_alive():
                thread.join(0.25)  # (a Ctrl-C reaches this thread between waits)
    finally:  # interrupted: the segments running are stopped (finished ones are kept)
        stop.set()
        ended.set()
        with lock:
            for worker in processes:
                worker.close()
        for thread in threads:
            thread.join()
        beats.unlink_all()
    if failed:
        _raise_first(failed, plan, folder, job)


GUARD_S = 0.25
"""How often the guard of :func:`_run_side_by_side` looks at the beats."""


def _watched_segment(beat: np.ndarray, *args: Any) -> dict[str, Any]:
    """:func:`process_segment` in a process of :func:`_run_side_by_side`'s, its reads told
    in ``beat``."""
    return process_segment(*args, beat=beat)


def _given_up(
    error: BaseException, stalled_at: int | None, beat: np.ndarray, timeout: float | None
) -> tuple[int, str] | None:
    """The input to make a segment again without, and why: the one a read ran past the
    timeout on, or the one a process died reading; ``None``: the segment failed."""
    if stalled_at is not None and stalled_at >= 0:
        return stalled_at, str(FileStalled.after(timeout or 0))
    if isinstance(error, WorkerDied) and beat[BUSY] and beat[POSITION] >= 0:
        return int(beat[POSITION]), f"the process reading it stopped: {error}"
    return None


def _segment_task(
    job: Job, part: str, segment: tuple[int, int], frames: int, halo: tuple[int, int],
    build: Build | None, sink_options: dict[str, Any], batch_size: int | None, cpus: int,
    memory: int | str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`process_segment` as a Ray task, whose budget by default is its share of the
    node's memory (its CPUs of the node's); its result names the node it ran on."""
    if memory is None:
        available = available_memory()
        share = cpus / max(cpus, os.cpu_count() or 1)
        memory = default_budget(None if available is None else int(available * share))
    made = process_segment(
        job, part, segment, frames, halo, build, sink_options, batch_size, cpus, memory
    )
    return made | {"node": node_id()}


def _wait_all(
    ray: Any, refs: dict[Any, int], plan: list[tuple[int, int]], folder: Path, watch: Tally
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
        _raise_first(failed, plan, folder, None)


def _raise_first(
    failed: list[tuple[int, BaseException]], plan: list[tuple[int, int]], folder: Path,
    job: Job | None,
) -> None:  # fmt: skip
    """Raise for the failed segment first in the plan, saying how many failed."""
    k, error = min(failed, key=lambda f: f[0])
    a, b = plan[k]
    if isinstance(job, FilesJob):
        names = (
            job.inputs[a].name
            if b - a == 1
            else f"{job.inputs[a].name} .. {job.inputs[b - 1].name}"
        )
        what = f"inputs {a}-{b - 1}: {names}"
    else:
        what = f"frames {a}-{b - 1}"
    text = str(error).strip()
    message = text.splitlines()[0] if text else type(error).__name__
    kept = (
        ""
        if job is not None
        else (
            f"; finished ones are kept in {str(folder)!r}: rerun the same command to do only the "
            "missing ones"
        )
    )  # fmt: skip  (a local run's error has a note that says what it kept)
    raised = HyperframesError(
        f"segment {k} ({what}) failed: {message} ({len(failed)} of {len(plan)} segments "
        f"failed{kept})"
    )
    for note in getattr(error, "__notes__", []):  # where in the segment, and why
        raised.add_note(note)
    raise raised from error
