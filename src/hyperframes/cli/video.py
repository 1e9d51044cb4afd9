"""``hyperframes info`` and ``transcode``: real media in and out.

:func:`register` builds the parsers without PyAV, OpenCV or the pipeline: a command
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
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
from .scale import add_chunk_options, ray_for_chunks
from .streams import add_stream_options, carry_of, frame_range, not_carried

if TYPE_CHECKING:
    import numpy as np

    from .. import RunReport
    from ..io.formats import PixFmt
    from ..io.video_sink import VideoSink


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


def encoder_options(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """The :class:`VideoSink` options the encoder flags ask for."""
    chosen = {"codec": args.codec, "crf": args.crf, "preset": args.preset, "pix_fmt": args.pix_fmt}
    return chosen | extra


def sink_for(args: argparse.Namespace, **extra: Any) -> VideoSink:
    from ..io.video_sink import VideoSink

    return VideoSink(args.output, overwrite=args.overwrite, **encoder_options(args, **extra))


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


def run_transcode(args: argparse.Namespace) -> int:
    if args.workers is not None and args.map is None and args.chunks is None:
        raise UsageError(
            "--workers sets the threads of --map's function, and this transcode has none "
            "(decoding and encoding use every core on their own); drop --workers"
        )
    report, extra = transcode(args)
    emit_report(args, report, **extra)
    return 0


def transcode(args: argparse.Namespace) -> tuple[RunReport, dict[str, Any]]:
    """Run the transcode described by ``args``; returns the report and extra figures."""
    from .. import Pipeline
    from ..io.loop import Looped
    from ..io.probe import probe
    from ..io.video import VideoSource

    if Path(args.input).resolve() == Path(args.output).resolve():
        raise ValueError("the output is the input; write to another path")

    facts = probe(args.input)
    args.start, args.stop = frame_range(args.input, args.start, args.stop)
    planar = planar_path(args, facts)
    pix_fmt: PixFmt = "yuv420p" if planar else "rgb24"
    filter_spec = args.map
    if filter_spec is not None:
        reuse_of(args)  # (checked before any work)
        if args.chunks is not None:
            raise UsageError("--map runs in one process for now; drop --chunks")
    carry = None
    if args.loop == 1:  # the other streams go along where the frames keep the input's clock
        carry = carry_of(args.output, audio=args.audio, audio_codec=args.audio_codec,
                         subtitles=args.subtitles)  # fmt: skip
    if args.chunks is not None:
        if args.every > 1:
            raise UsageError("--every does not combine with --chunks yet; drop one")
        return not_carried(*transcode_chunked(args, pix_fmt, carry), facts, args)

    def make() -> VideoSource:
        # the source resizes every frame to --size as it decodes it, so a stream whose
        # frame size changes part-way comes out at one size
        return VideoSource(
            args.input, start=args.start, stop=args.stop, on_corrupt=args.on_corrupt,
            pix_fmt=pix_fmt, size=args.size, rotation=args.rotation, step=args.every,
        )  # fmt: skip

    source: VideoSource | Looped = Looped(make, times=args.loop) if args.loop > 1 else make()
    sink = sink_for(args, input_pix_fmt="yuv420p" if planar else None, carry=carry)
    pipeline = Pipeline.from_source(source, batch_size=args.batch_size)
    if filter_spec is not None:
        from ..models import load

        fn = load(filter_spec)
        pipeline = pipeline.map(fn, workers=workers_of(args), reuse=reuse_of(args))
    report, extra = observed_run(args, pipeline.to(sink), "transcode")
    skipped = getattr(source, "skipped", [])
    if skipped:
        extra["skipped_frames"] = skipped
    return not_carried(report, extra, facts, args)


def transcode_chunked(
    args: argparse.Namespace, pix_fmt: PixFmt, carry: Any
) -> tuple[RunReport, dict[str, Any]]:
    """``transcode --chunks``: segments at keyframes as Ray tasks, joined by stream copy."""
    from ..chunked import run_chunked

    if args.loop > 1:
        raise UsageError("--chunks cuts one input at its keyframes; it cannot take --loop")
    planar = {"input_pix_fmt": "yuv420p"} if pix_fmt == "yuv420p" else {}
    executor = ray_for_chunks(args.scale)

    def run(bar: Any, watch: Any) -> RunReport:
        return run_chunked(
            args.input, args.output, start=args.start, stop=args.stop,
            source_options={"size": args.size, "pix_fmt": pix_fmt, "on_corrupt": args.on_corrupt,
                            "rotation": args.rotation},
            executor=executor, segments=args.chunks or None, batch_size=args.batch_size,
            memory=args.memory, overwrite=args.overwrite, progress=bar, monitor=watch,
            carry=carry, **encoder_options(args, **planar),
        )  # fmt: skip

    report, extra = observed(args, "transcode", run)
    skipped = report.extra["chunks"].get("skipped_frames")
    if skipped:
        extra["skipped_frames"] = skipped
    return report, extra


def planar_path(args: argparse.Namespace, facts: dict[str, Any]) -> bool:
    """Whether a transcode can stay in yuv420p from decoder to encoder (no colour conversion):
    a yuv420p input (``facts`` as :func:`~hyperframes.io.probe.probe` gives them), a yuv420p
    encoder, and even sizes throughout."""
    size = args.size or (facts["width"], facts["height"])
    encoded = args.pix_fmt or ("yuv420p" if args.codec != "ffv1" else None)
    return (
        args.rotation != "apply"  # planes cannot be turned
        and args.map is None  # a filter takes RGB frames
        and facts.get("pix_fmt") == "yuv420p"
        and encoded == "yuv420p"
        and all(v % 2 == 0 for v in (*size, facts["width"], facts["height"]))
    )
