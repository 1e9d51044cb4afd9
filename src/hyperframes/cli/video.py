"""``hyperframes info`` and ``transcode``: real media in and out.

:func:`register` builds the parsers without PyAV, OpenCV or the pipeline: a command
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    Seconds,
    UsageError,
    add_function_options,
    emit_report,
    frame_size,
    position,
    positive_int,
    print_json,
    reuse_of,
)
from .observe import add_long_options, observed, observed_run, workers_of
from .options import Encoding, Observe, Scale
from .scale import add_chunk_options, ray_for_chunks
from .streams import add_stream_options, carry_of, frame_range, not_carried

if TYPE_CHECKING:
    import numpy as np

    from .. import RunReport
    from ..io.formats import OnCorrupt, PixFmt
    from ..io.video import Rotation
    from ..modes import ReuseTarget


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="what a video file or a hyperframe store is")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_info)

    p = sub.add_parser("transcode", help="decode -> optional resize -> encode")
    p.add_argument("input")
    p.add_argument("output")
    add_encoder_options(p)
    p.add_argument("--size", type=frame_size, default=None, help="resize to WxH")
    p.add_argument(
        "--start",
        type=position,
        default=0,
        help="the first frame: an index (120), seconds (4.5s) or [HH:]MM:SS.mmm",
    )
    p.add_argument(
        "--stop", type=position, default=None, help="where to stop (not included), as --start"
    )
    p.add_argument(
        "--every",
        type=positive_int,
        default=1,
        help="keep every K-th frame; each is shown until the next, so the output "
        "lasts as long as the input and its sound is kept whole",
    )
    p.add_argument("--loop", type=positive_int, default=1, help="play the input N times")
    add_stream_options(p)
    p.add_argument(
        "--on-corrupt",
        choices=("fail", "skip"),
        default="fail",
        help="a frame that cannot be decoded: fail with its index, or skip and report it",
    )
    p.add_argument(
        "--rotation",
        choices=("apply", "keep"),
        default=None,
        help="a rotation tag (phone clips): keep it on the output (the default where the "
        "planes go through unconverted) or turn the frames upright (the default otherwise)",
    )
    p.add_argument(
        "--map", default=None, metavar="MODULE:NAME",
        help="a filter between decode and encode: a function of a batch of RGB frames (or "
        "a class with setup/__call__, made once per worker) returning the frames to write",
    )  # fmt: skip
    add_function_options(p)
    add_long_options(p, workers_help="threads running --map's function (decoding and encoding "
                     "thread on their own)")  # fmt: skip
    add_chunk_options(p)
    p.set_defaults(run=run_transcode, reads=("input",), writes=("output",))


def add_encoder_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--codec", default="libx264", help="libx264, libx265, ffv1, libvpx-vp9, mpeg4")
    p.add_argument("--crf", type=int, default=None, help="constant quality (lower is better)")
    p.add_argument("--preset", default=None, help="encoder speed preset, e.g. veryfast")
    p.add_argument("--pix-fmt", default=None, help="encoded pixel format, e.g. yuv420p")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


def resize_stage(width: int, height: int) -> Any:
    import cv2
    import numpy as np

    def resize(frames: np.ndarray) -> np.ndarray:
        out = np.empty((len(frames), height, width, frames.shape[-1]), frames.dtype)
        for src, dst in zip(frames, out, strict=True):
            cv2.resize(src, (width, height), dst=dst, interpolation=cv2.INTER_AREA)
        return out

    return resize


def run_info(args: argparse.Namespace) -> int:
    from ..io.probe import probe
    from .store import is_store, store_info

    facts = store_info(args.path) if is_store(args.path) else probe(args.path)
    if args.json:
        print_json(facts)
        return 0
    for key, value in facts.items():
        if key == "streams" and value:  # one line each, as ffprobe lists them
            for k, stream in enumerate(value):
                print(f"{key if k == 0 else '':<18}{stream_line(stream)}")
        else:
            print(f"{key:<18}{value}")
    return 0


def stream_line(stream: dict[str, Any]) -> str:
    """``#1 audio aac (eng), 48000 Hz, 2 channels, 4.01 s``: a stream as ``info`` shows it."""
    from ..io.streams import label

    line = f"#{stream['index']} {label(stream)}"
    details = [f"{stream['rate']} Hz" if stream.get("rate") else "",
               f"{stream['channels']} channels" if stream.get("channels") else "",
               f"{stream['duration']:g} s" if stream.get("duration") is not None else "",
               "the chapters' track" if stream.get("discarded") else ""]  # fmt: skip
    return ", ".join([line, *(d for d in details if d)])


@dataclass(frozen=True)
class TranscodeJob:
    """A transcode, as its options ask for it: read once from the command line
    (:meth:`of`), or made by a command that transcodes on its way (``demo``)."""

    input: str
    output: str
    encoding: Encoding = field(default_factory=Encoding)
    observe: Observe = field(default_factory=Observe)
    scale: Scale = field(default_factory=Scale)
    size: tuple[int, int] | None = None
    start: int | Seconds = 0
    stop: int | Seconds | None = None
    every: int = 1
    loop: int = 1
    audio: str = "keep"
    audio_codec: str | None = None
    subtitles: str = "keep"
    on_corrupt: OnCorrupt = "fail"
    rotation: Rotation | None = None
    map: str | None = None
    reuse: ReuseTarget | None = None
    chunks: int | None = None
    batch_size: int | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> TranscodeJob:
        """The job of ``transcode``'s options (``--reuse-target`` checked with ``--map``)."""
        groups = {"encoding", "observe", "scale", "reuse"}
        own = [f.name for f in dataclasses.fields(cls) if f.name not in groups]
        reuse = reuse_of(args) if args.map is not None else None
        return cls(encoding=args.encoding, observe=args.observe, scale=args.scale, reuse=reuse,
                   **{name: vars(args)[name] for name in own})  # fmt: skip


def run_transcode(args: argparse.Namespace) -> int:
    job = TranscodeJob.of(args)
    if job.scale.workers is not None and job.map is None and job.chunks is None:
        raise UsageError(
            "--workers sets the threads of --map's function, and this transcode has none "
            "(decoding and encoding use every core on their own); drop --workers"
        )
    report, extra = transcode(job)
    emit_report(job.observe, report, **extra)
    return 0


def transcode(job: TranscodeJob) -> tuple[RunReport, dict[str, Any]]:
    """Run ``job``; returns the report and extra figures."""
    from .. import Pipeline
    from ..io.loop import Looped
    from ..io.probe import probe
    from ..io.video import VideoSource
    from ..io.video_sink import VideoSink

    if Path(job.input).resolve() == Path(job.output).resolve():
        raise ValueError("the output is the input; write to another path")

    facts = probe(job.input)
    start, stop = frame_range(job.input, job.start, job.stop)
    planar = planar_path(job, facts)
    pix_fmt: PixFmt = "yuv420p" if planar else "rgb24"
    if job.map is not None and job.chunks is not None:
        raise UsageError("--map runs in one process for now; drop --chunks")
    carry = None
    if job.loop == 1:  # the other streams go along where the frames keep the input's clock
        carry = carry_of(job.output, audio=job.audio, audio_codec=job.audio_codec,
                         subtitles=job.subtitles)  # fmt: skip
    if job.chunks is not None:
        if job.every > 1:
            raise UsageError("--every does not combine with --chunks yet; drop one")
        chunked = transcode_chunked(job, (start, stop), pix_fmt, carry)
        return not_carried(*chunked, facts, loop=job.loop)

    def make() -> VideoSource:
        # the source resizes every frame to --size as it decodes it, so a stream whose
        # frame size changes part-way comes out at one size
        return VideoSource(
            job.input, start=start, stop=stop, on_corrupt=job.on_corrupt, pix_fmt=pix_fmt,
            size=job.size, rotation=job.rotation, step=job.every,
        )  # fmt: skip

    source: VideoSource | Looped = Looped(make, times=job.loop) if job.loop > 1 else make()
    options = job.encoding.options(input_pix_fmt="yuv420p" if planar else None, carry=carry)
    sink = VideoSink(job.output, overwrite=job.encoding.overwrite, **options)
    pipeline = Pipeline.from_source(source, batch_size=job.batch_size)
    if job.map is not None:
        from ..models import load

        fn = load(job.map)
        pipeline = pipeline.map(fn, workers=workers_of(job.scale), reuse=job.reuse)
    report, extra = observed_run(job.observe, job.scale, pipeline.to(sink), "transcode")
    skipped = getattr(source, "skipped", [])
    if skipped:
        extra["skipped_frames"] = skipped
    return not_carried(report, extra, facts, loop=job.loop)


def transcode_chunked(
    job: TranscodeJob, frames: tuple[int, int | None], pix_fmt: PixFmt, carry: Any
) -> tuple[RunReport, dict[str, Any]]:
    """``transcode --chunks`` of ``frames`` (start, stop): segments at keyframes as Ray
    tasks, joined by stream copy."""
    from ..chunked import run_chunked

    if job.loop > 1:
        raise UsageError("--chunks cuts one input at its keyframes; it cannot take --loop")
    planar = {"input_pix_fmt": "yuv420p"} if pix_fmt == "yuv420p" else {}
    executor = ray_for_chunks(job.scale)

    def run(bar: Any, watch: Any) -> RunReport:
        return run_chunked(
            job.input, job.output, start=frames[0], stop=frames[1],
            source_options={"size": job.size, "pix_fmt": pix_fmt, "on_corrupt": job.on_corrupt,
                            "rotation": job.rotation},
            executor=executor, segments=job.chunks or None, batch_size=job.batch_size,
            memory=job.scale.memory, overwrite=job.encoding.overwrite, progress=bar,
            monitor=watch, carry=carry, **job.encoding.options(**planar),
        )  # fmt: skip

    report, extra = observed(job.observe, "transcode", run)
    skipped = report.extra["chunks"].get("skipped_frames")
    if skipped:
        extra["skipped_frames"] = skipped
    return report, extra


def planar_path(job: TranscodeJob, facts: dict[str, Any]) -> bool:
    """Whether a transcode can stay in yuv420p from decoder to encoder (no colour conversion):
    a yuv420p input (``facts`` as :func:`~hyperframes.io.probe.probe` gives them), a yuv420p
    encoder, and even sizes throughout."""
    size = job.size or (facts["width"], facts["height"])
    codec, pix_fmt = job.encoding.codec, job.encoding.pix_fmt
    encoded = pix_fmt or ("yuv420p" if codec != "ffv1" else None)
    return (
        job.rotation != "apply"  # planes cannot be turned
        and job.map is None  # a filter takes RGB frames
        and facts.get("pix_fmt") == "yuv420p"
        and encoded == "yuv420p"
        and all(v % 2 == 0 for v in (*size, facts["width"], facts["height"]))
    )
