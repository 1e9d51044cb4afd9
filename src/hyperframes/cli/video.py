"""``hyperframes info`` and ``transcode``: real media in and out.

:func:`register` builds the parsers without PyAV, OpenCV or the pipeline: a command
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    Seconds,
    UsageError,
    add_function_options,
    check_function_options,
    emit_report,
    frame_size,
    position,
    positive_int,
    print_json,
)
from .observe import add_long_options, observed, observed_run, workers_of
from .scale import add_chunk_options, ray_for_chunks

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


def add_stream_options(p: argparse.ArgumentParser) -> None:
    """What goes along with the frames: the input's sound and subtitles."""
    p.add_argument(
        "--audio",
        choices=("keep", "none"),
        default="keep",
        help="the input's sound: keep it (the default) or leave it out",
    )
    p.add_argument(
        "--audio-codec",
        default=None,
        metavar="CODEC",
        help="re-encode the sound into aac, opus, flac, mp3, vorbis, alac or "
        "pcm_s16le (default: copied as it is where the container takes it, else "
        "AAC for MP4/MOV and Opus for WebM/MKV)",
    )
    p.add_argument(
        "--subtitles",
        choices=("keep", "none"),
        default="keep",
        help="the input's subtitles: keep them (converted where the container "
        "needs it) or leave them out",
    )


def carry_of(output: str, **choices: Any) -> Any:
    """The :class:`~hyperframes.io.carry.Carry` of ``choices``, checked against the
    ``output``'s container before any work."""
    from ..io.carry import Carry, container_codecs

    try:
        carry = Carry(**choices)
        suffix = Path(output).suffix.lower()
        supported = container_codecs(suffix)
        if supported is not None:  # (else the sink names the unknown container)
            carry.check(suffix, supported)
    except ValueError as exc:
        raise UsageError(str(exc).replace("audio_codec", "--audio-codec")) from None
    return carry


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
    else:
        for key, value in facts.items():
            print(f"{key:<18}{value}")
    return 0


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
    filter_spec = getattr(args, "map", None)  # demo's runs have no --map nor --chunks
    if filter_spec is not None:
        check_function_options(args)
        if args.chunks is not None:
            raise UsageError("--map runs in one process for now; drop --chunks")
    carry = None
    if args.loop == 1:  # the other streams go along where the frames keep the input's clock
        carry = carry_of(args.output, audio=args.audio, audio_codec=args.audio_codec,
                         subtitles=args.subtitles)  # fmt: skip
    if getattr(args, "chunks", None) is not None:
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
        pipeline = pipeline.map(
            fn, workers=workers_of(args), reuse_target=args.reuse_target, agree=args.agree
        )
    report, extra = observed_run(args, pipeline.to(sink), "transcode")
    skipped = getattr(source, "skipped", [])
    if skipped:
        extra["skipped_frames"] = skipped
    return not_carried(report, extra, facts, args)


def frame_range(
    path: str, start: int | Seconds, stop: int | Seconds | None
) -> tuple[int, int | None]:
    """``--start``/``--stop`` as frame indices: a time is the first frame shown at or after
    it (by the frames' own timestamps, so right on a variable frame rate)."""
    if not isinstance(start, Seconds) and not isinstance(stop, Seconds):
        return start, stop
    from ..segments import video_frames

    pts, _, base = video_frames(Path(path))
    times = sorted(float((p - pts[0]) * base) for p in pts)

    def index(at: int | Seconds) -> int:
        if not isinstance(at, Seconds):
            return at
        if at > times[-1] + 1e-6 and at is start:
            raise UsageError(
                f"--start {at:g}s is past the last frame ({times[-1]:.3f}s); pass an earlier time"
            )
        return next((k for k, t in enumerate(times) if t >= at - 1e-6), len(times))

    return index(start), None if stop is None else index(stop)


def not_carried(
    report: RunReport, extra: dict[str, Any], facts: dict[str, Any], args: argparse.Namespace
) -> tuple[RunReport, dict[str, Any]]:
    """Say what became of the input's other streams (copied, re-encoded, converted,
    attached, dropped, with why) and of its chapters: ``report.extra["streams"]``, and a
    warning line for what the output lacks, never silence."""
    if args.loop > 1:  # played N times: nothing kept in step with it
        why = f"--loop plays the input {args.loop} times; its other streams are not carried"
        report.extra["streams"] = {"dropped": [s | {"why": why} for s in facts.get("streams", [])]}
        if facts.get("chapters"):
            report.extra["streams"]["chapters_dropped"] = facts["chapters"]
    return streams_report(report), extra


def streams_report(report: RunReport) -> RunReport:
    """``report.extra["streams"]``: what became of the other streams (from the sink's
    notes, or a chunked run's join), with a warning line naming what the output lacks."""
    sink = report.extra.get("sink", {})
    streams = sink.pop("streams", None) or report.extra.pop("streams", {})
    if "sink" in report.extra and not sink:
        report.extra.pop("sink")
    dropped = [_named(s) for s in streams.get("dropped", [])]
    if streams.get("chapters_dropped"):
        dropped.append(f"{streams['chapters_dropped']} chapters")
    if dropped:
        streams["warnings"] = [f"not in the output: {', '.join(dropped)}"]
    if streams:
        report.extra["streams"] = streams
    return report


def _named(stream: dict[str, Any]) -> str:
    language = f" ({stream['language']})" if stream.get("language") else ""
    return (
        f"{stream['type']} {stream['codec']}{language} (stream {stream['index']}: {stream['why']})"
    )


def transcode_chunked(
    args: argparse.Namespace, pix_fmt: PixFmt, carry: Any
) -> tuple[RunReport, dict[str, Any]]:
    """``transcode --chunks``: segments at keyframes as Ray tasks, joined by stream copy."""
    from ..chunked import run_chunked

    if args.loop > 1:
        raise UsageError("--chunks cuts one input at its keyframes; it cannot take --loop")
    planar = {"input_pix_fmt": "yuv420p"} if pix_fmt == "yuv420p" else {}
    executor = ray_for_chunks(args)

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
        getattr(args, "rotation", None) != "apply"  # planes cannot be turned
        and getattr(args, "map", None) is None  # a filter takes RGB frames
        and facts.get("pix_fmt") == "yuv420p"
        and encoded == "yuv420p"
        and all(v % 2 == 0 for v in (*size, facts["width"], facts["height"]))
    )
