"""``hyperframes render``: frames made by a function of the frame number, encoded in order.

A long local render is made in segments kept until the end, so that ``--resume``
continues an interrupted one; ``--chunks`` runs the segments on Ray.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import UsageError, emit_report, frame_size, positive_float, positive_int
from .observe import add_long_options, observed, workers_of
from .scale import add_chunk_options, executor_for, ray_for_chunks, ship_module_of
from .streams import carry_of
from .video import add_encoder_options

if TYPE_CHECKING:
    from .. import RunReport


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="render frames with MODULE:FUNCTION f(i) -> array")
    p.add_argument("function", metavar="MODULE:FUNCTION")
    p.add_argument("output")
    p.add_argument("--frames", type=positive_int, required=True)
    p.add_argument("--size", type=frame_size, required=True, help="WxH")
    p.add_argument("--fps", type=positive_float, default=30.0, help="frames per second")
    add_encoder_options(p)
    p.add_argument(
        "--audio",
        default=None,
        metavar="FILE",
        help="a soundtrack to mux beside the frames (its sound streams, from its "
        "start, cut at the render's end)",
    )
    p.add_argument(
        "--audio-codec",
        default=None,
        metavar="CODEC",
        help="re-encode the soundtrack into aac, opus, flac, mp3, vorbis, alac or "
        "pcm_s16le (default: copied where the container takes it)",
    )
    add_long_options(p)
    add_chunk_options(p)
    p.add_argument(
        "--resume", action="store_true",
        help="continue a render that was interrupted (a local render of 2,000 frames or "
        "more is made in segments, kept until the end: a rerun makes only those missing)",
    )  # fmt: skip
    p.set_defaults(run=run_render, reads=("audio",), writes=("output",))


def run_render(args: argparse.Namespace) -> int:
    from .. import FrameSpec, Pipeline, VideoSink
    from ..chunked import LOCAL_SEGMENT_FRAMES
    from ..models import load

    fn = load(args.function)
    args.carry = soundtrack(args)
    if args.chunks is not None:
        report, written = render_chunked_from(args, fn)
        emit_report(args.observe, report, **written)
        return 0
    if args.resume and args.executor == "ray":
        raise UsageError(
            "--resume continues a local render; a render on Ray resumes with --chunks "
            "(a rerun makes only the missing segments)"
        )
    executor = executor_for(args.scale)
    if isinstance(executor, str) and (args.resume or args.frames >= 2 * LOCAL_SEGMENT_FRAMES):
        report, written = render_here(args, fn, executor)
        emit_report(args.observe, report, **written)
        return 0
    width, height = args.size
    sink = VideoSink(
        args.output,
        overwrite=args.overwrite,
        **args.encoding.options(fps=args.fps, carry=args.carry),
    )
    pipeline = Pipeline.from_generator(
        fn,
        count=args.frames,
        spec=FrameSpec((height, width, 3)),
        workers=workers_of(args.scale),
        batch_size=args.batch_size,
    )
    ship_module_of(fn, executor)
    report, written = observed(
        args.observe,
        "render",
        lambda bar, watch: pipeline.to(sink).run(
            progress=bar, monitor=watch, memory=args.memory, executor=executor
        ),
    )
    from ..transcoding import streams_report

    streams_report(report)
    emit_report(args.observe, report, **written)
    return 0


def soundtrack(args: argparse.Namespace) -> Any:
    """The :class:`~hyperframes.io.carry.Carry` of ``--audio FILE`` (its sound only), or
    ``None``; a file without sound is refused before any work."""
    if args.audio is None:
        if args.audio_codec is not None:
            raise UsageError(
                "--audio-codec re-encodes the soundtrack of --audio; pass --audio FILE"
            )
        return None
    from ..io.streams import sound_streams

    if not sound_streams(args.audio):
        raise UsageError(
            f"--audio {args.audio!r} holds no sound; name an audio or video file with some"
        )
    return carry_of(args.output, audio_codec=args.audio_codec, metadata=False,
                    sound_only=True, source=args.audio)  # fmt: skip


def render_here(args: argparse.Namespace, fn: Any, executor: str) -> tuple[RunReport, Any]:
    """A local render in segments made one after another and kept until the join, so
    that ``--resume`` continues an interrupted one."""
    from ..chunked import render_chunked
    from ..transcoding import streams_report

    def run(bar: Any, watch: Any) -> RunReport:
        return render_chunked(
            fn, args.output, count=args.frames, size=args.size, fps=args.fps,
            executor=executor, workers=workers_of(args.scale), resume=args.resume,
            batch_size=args.batch_size, memory=args.memory, overwrite=args.overwrite,
            progress=bar, monitor=watch, carry=args.carry, **args.encoding.options(),
        )  # fmt: skip

    report, written = observed(args.observe, "render", run)
    return streams_report(report), written


def render_chunked_from(args: argparse.Namespace, fn: Any) -> tuple[RunReport, dict[str, Any]]:
    """``render --chunks``: the frame range in segments as Ray tasks, joined by stream copy."""
    from ..chunked import render_chunked
    from ..transcoding import streams_report

    executor = ray_for_chunks(args.scale)
    ship_module_of(fn, executor)

    def run(bar: Any, watch: Any) -> RunReport:
        return render_chunked(
            fn, args.output, count=args.frames, size=args.size, fps=args.fps,
            executor=executor, segments=args.chunks or None, batch_size=args.batch_size,
            memory=args.memory, overwrite=args.overwrite, progress=bar, monitor=watch,
            carry=args.carry, **args.encoding.options(),
        )  # fmt: skip

    report, written = observed(args.observe, "render", run)
    return streams_report(report), written
