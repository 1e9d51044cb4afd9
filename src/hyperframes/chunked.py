"""Chunked processing of one long video on Ray: segments at keyframes, joined by stream copy.

The video is cut at keyframes into segments of about ``segment_frames`` frames. One Ray
task per segment decodes it (plus a *halo*: the frames windowed stages need on either
side), runs the pipeline that ``build`` makes on it locally, and encodes only the
segment's own frames into a segment file. Segment files are committed atomically and
listed in a manifest, so a rerun after a failure redoes only the missing segments. The
segments are then joined into the output by stream copy (no re-encoding).

With a lossless codec the output frames are identical to a local run's; with a lossy
one each segment is encoded on its own, so frames match up to encoding.

Example:
    >>> def build(p):  # doctest: +SKIP
    ...     return p.map(denoise, window=(2, 2), workers=2)
    >>> run_chunked("in.mp4", "out.mkv", build, codec="ffv1")  # doctest: +SKIP
    ChunkedReport(frames=..., segments=..., reused=0, ...)
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from .engine.window import HaloStream
from .errors import MediaError
from .executors.ray import RayExecutor
from .io.base import Sink
from .io.publish import publish
from .io.video import VideoSource
from .io.video_sink import VideoSink
from .pipeline import Pipeline

Build = Callable[[Pipeline], Pipeline]


@dataclass(frozen=True)
class ChunkedReport:
    """What a chunked run did: the output, the segments made now and the ones reused."""

    output: str
    frames: int
    segments: int
    reused: int
    halo: tuple[int, int]
    wall_s: float


def frame_times(path: Path) -> tuple[list[int], list[int], Fraction]:
    """Every frame's pts in presentation order, the keyframes' indices, and the time base.

    Reads packets only (no decoding).
    """
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        packets = [(p.pts, p.is_keyframe) for p in container.demux(stream) if p.pts is not None]
    if not packets or base is None:
        raise MediaError(f"{str(path)!r} has no timestamped video packets; re-encode it")
    packets.sort()
    pts = [p for p, _ in packets]
    keyframes = [i for i, (_, key) in enumerate(packets) if key]
    return pts, keyframes or [0], Fraction(base)


def segments_of(total: int, keyframes: list[int], segment_frames: int) -> list[tuple[int, int]]:
    """Half-open ``[start, stop)`` segments that start at keyframes, each >= segment_frames."""
    if segment_frames < 1:
        raise ValueError(f"segment_frames must be at least 1, got {segment_frames}")
    cuts = [0]
    for k in sorted(set(keyframes)):
        if k >= cuts[-1] + segment_frames and k < total:
            cuts.append(k)
    return [(a, b) for a, b in zip(cuts, [*cuts[1:], total], strict=True) if b > a]


def halo_of(build: Build, source: VideoSource) -> tuple[int, int]:
    """Frames before and after a segment that the pipeline's windowed stages need."""
    pipeline = build(Pipeline.from_source(source))
    before = after = 0
    for stage in pipeline.stages:
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


def process_segment(
    source: str, part: str, start: int, stop: int, halo: tuple[int, int], build: Build,
    sink_options: dict[str, Any], batch_size: int,
) -> int:  # fmt: skip
    """Decode ``[start - halo, stop + halo)``, run the pipeline, encode ``[start, stop)``."""
    lo = max(0, start - halo[0])
    video = VideoSource(source, start=lo, stop=stop + halo[1])
    sink = VideoSink(part, overwrite=True, **sink_options)
    build(Pipeline.from_source(video, batch_size=batch_size)).to(_Trim(sink, start, stop)).run()
    return sink.frames_written


def join(parts: list[Path], offsets: list[float], output: Path) -> None:
    """Concatenate segment files into ``output`` by stream copy, shifting timestamps."""
    temp = output.with_name(f".{output.stem}.partial{output.suffix}")
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


def run_chunked(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    build: Build,
    *,
    executor: RayExecutor | None = None,
    segment_frames: int = 1024,
    batch_size: int = 32,
    work_dir: str | os.PathLike[str] | None = None,
    keep_segments: bool = False,
    overwrite: bool = False,
    task_options: dict[str, Any] | None = None,
    **sink_options: Any,
) -> ChunkedReport:
    """Process ``source`` into ``output`` in keyframe-aligned segments, one Ray task each.

    Args:
        source: the input video.
        output: the output video; its extension picks the container.
        build: adds the stages: ``build(pipeline) -> pipeline`` (map stages, windowed or
            not). It is sent to the workers, so it must be picklable by Ray.
        segment_frames: the least frames per segment; segments start at keyframes.
        batch_size: frames per batch inside a segment.
        work_dir: where segments are kept until the join; by default a hidden folder
            next to the output. Rerunning with the same inputs reuses finished segments.
        keep_segments: keep the segment folder after a successful join.
        overwrite: replace an existing output.
        executor: the Ray connection to use; by default a new
            :class:`~hyperframes.executors.ray.RayExecutor` (which starts a local Ray or
            joins ``RAY_ADDRESS``).
        task_options: Ray options of every segment task (``num_cpus``...).
        sink_options: options of each segment's :class:`~hyperframes.io.video_sink.VideoSink`
            (``codec``, ``crf``, ``preset``, ``pix_fmt``, ``options``).

    Returns:
        A :class:`ChunkedReport`.

    Raises:
        FileExistsError: ``output`` exists and ``overwrite`` is false.
        ValueError: the pipeline has stateful stages, or a bad option.
        Exception: the first failing segment's error, after every other segment finished.
    """
    t0 = time.perf_counter()
    source, output = Path(source), Path(output)
    if output.exists() and not overwrite:
        raise FileExistsError(f"{str(output)!r} exists; pass overwrite=True to replace it")
    pts, keyframes, base = frame_times(source)
    halo = halo_of(build, VideoSource(source, stop=1))
    segments = segments_of(len(pts), keyframes, segment_frames)
    folder = Path(work_dir) if work_dir else output.with_name(f".{output.name}.segments")
    parts = _prepare(folder, source, segments, halo, sink_options, output.suffix)
    todo = [k for k, part in enumerate(parts) if not part.exists()]
    ray = (executor or RayExecutor()).ray
    task = ray.remote(process_segment).options(**(task_options or {"num_cpus": 1}))
    refs = {
        task.remote(
            str(source), str(parts[k]), *segments[k], halo, build, sink_options, batch_size
        ): k
        for k in todo
    }
    _wait_all(ray, list(refs))
    offsets = [float((pts[start] - pts[0]) * base) for start, _ in segments]
    join(parts, offsets, output)
    if not keep_segments:
        shutil.rmtree(folder, ignore_errors=True)
    return ChunkedReport(
        str(output), len(pts), len(segments), len(segments) - len(todo), halo,
        round(time.perf_counter() - t0, 3),
    )  # fmt: skip


def _prepare(
    folder: Path,
    source: Path,
    segments: list[tuple[int, int]],
    halo: tuple[int, int],
    sink_options: dict[str, Any],
    suffix: str,
) -> list[Path]:
    """The segment paths; a manifest from another job empties the folder first."""
    stat = source.stat()
    manifest = {
        "source": str(source.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "segments": [list(s) for s in segments],
        "halo": list(halo),
        "sink": repr(sorted(sink_options.items())),
    }
    path = folder / "manifest.json"
    if folder.exists():
        try:
            same = json.loads(path.read_text()) == manifest
        except (OSError, ValueError):
            same = False
        if not same:
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    return [folder / f"segment-{k:05d}{suffix}" for k in range(len(segments))]


def _wait_all(ray: Any, refs: list[Any]) -> None:
    """Wait for every task; then raise the first failure (finished segments are kept)."""
    first: BaseException | None = None
    pending = refs
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            ray.get(done[0])
        except Exception as exc:
            cause = getattr(exc, "cause", None)
            first = first or (cause if isinstance(cause, BaseException) else exc)
    if first is not None:
        raise first
