"""``hf.transcode``: one input (a video, or an image sequence) into one output (a video,
or numbered images), resized, sampled or filtered on the way, with the input's sound,
subtitles, attachments and chapters carried wherever the output can hold them, and
named in the report wherever it cannot (never dropped without a word).

The ``transcode`` command is this function with its options read from the command line.

Longer than 300 lines: one function's path from its arguments to its report (the checks,
the source, the sink, the run, and what became of the other streams), each step a small
private function beside the others.

Example:
    >>> import hyperframes as hf
    >>> report = hf.transcode("film.mkv", "preview.mp4", source_options={"size": (640, 360),
    ...                       "fps": 5}, crf=28)  # doctest: +SKIP
    >>> report.extra["streams"]  # doctest: +SKIP
    {'copied': [...], 'warnings': ['not in the output: ...']}
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .io.carry import Carry
from .io.video_sink import EncoderOptions

if TYPE_CHECKING:
    from .engine.report import RunReport
    from .engine.watch import Monitor, ProgressFn
    from .executors import Executor
    from .io.base import Sink, Source
    from .io.formats import PixFmt
    from .io.positions import Seconds
    from .modes import ReuseTarget

CARRY_ALL = Carry()
"""``transcode``'s default: every other stream the output can hold goes along."""
SOURCE_OPTIONS = frozenset({"size", "rotation", "colour", "on_corrupt", "rate", "step",
                            "keyframes", "fps", "at", "num_frames", "threads"})  # fmt: skip
"""What ``source_options`` may hold: the options of the source that reads the input
(:class:`~hyperframes.VideoSource`, or :class:`~hyperframes.ImageSequenceSource` for
images, which takes ``rate`` and the sampling but not ``rotation``, ``colour``, ``threads``)."""


def transcode(
    input: str | os.PathLike[str],
    output: str | os.PathLike[str],
    fn: Callable[..., Any] | None = None,
    *,
    start: int | Seconds = 0,
    stop: int | Seconds | None = None,
    source_options: dict[str, Any] | None = None,
    loop: int = 1,
    carry: Carry | None = CARRY_ALL,
    workers: int = 2,
    reuse: ReuseTarget | None = None,
    chunks: int | None = None,
    batch_size: int | None = None,
    memory: int | str | None = None,
    executor: str | Executor | None = None,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    monitor: Monitor | None = None,
    **encoder: Unpack[EncoderOptions],
) -> RunReport:
    """Decode ``input``, optionally filter it with ``fn``, and encode it into ``output``.

    Args:
        input: a video file, or an image sequence (a folder of images, a pattern such as
            ``frames/f_%04d.png``, a glob).
        output: a video file (its extension picks the container), or images: a pattern
            with a number in it, or a folder (one that exists, or a name ending in ``/``),
            where the frames take the input's own image names when it had some.
        fn: a function of a batch of RGB frames (n, H, W, 3) giving the frames to encode,
            as :meth:`~hyperframes.Pipeline.map` takes it; ``None`` re-encodes.
        start, stop: the frames to read, as indices, or
            :class:`~hyperframes.io.positions.Seconds` of the frames' timestamps.
        source_options: what the source takes (:data:`SOURCE_OPTIONS`): ``size``,
            ``rotation``, ``colour``, ``on_corrupt``, ``rate`` (an image sequence's frame
            rate), and the frames chosen (``step``, ``keyframes``, ``fps``, ``at``,
            ``num_frames``). With ``fps`` each frame is shown at the instant it was asked
            for; with ``at`` one after the other at the input's rate.
        loop: play the input this many times (its other streams are then not carried).
        carry: what goes along with the frames (:class:`~hyperframes.Carry`: sound,
            subtitles, attachments, metadata, chapters); ``None`` carries nothing, silently.
        workers: the workers of ``fn``.
        reuse: a :class:`~hyperframes.ReuseTarget` for ``fn``.
        chunks: run in keyframe-aligned segments joined by stream copy
            (:func:`~hyperframes.run_chunked`): ``0`` lets it choose how many, ``None``
            runs one pipeline.
        batch_size, memory, executor, progress, monitor: as
            :meth:`~hyperframes.Pipeline.run` takes them (``executor`` as
            :func:`~hyperframes.run_chunked` takes it with ``chunks``).
        overwrite: replace an existing ``output``.
        encoder: the encoder's options (``codec``, ``crf``, ``preset``, ``pix_fmt``,
            ``options``), as :class:`~hyperframes.VideoSink` takes them.

    Returns:
        The run's report. ``extra["streams"]`` says what became of each of the input's
        other streams (copied, re-encoded, converted, attached, dropped, with why) and its
        chapters, with a warning line for what the output lacks; ``extra["skipped_frames"]``
        the frames ``on_corrupt="skip"`` left out, where there were any.

    Raises:
        ValueError: what :func:`check` refuses, before any work (the output is the input
            or names one image, an unknown source option, ``reuse`` without ``fn``,
            ``chunks`` with what they cannot take), and what the source, the sink or the
            run raise.
        FileExistsError: ``output`` exists and ``overwrite`` is false.
    """
    from .io.file_reader import frames_of
    from .io.inputs import is_image_sequence
    from .io.probe import probe

    input, output = os.fspath(input), os.fspath(output)
    options = dict(source_options or {})
    check(input, output, source_options=options, fn=fn, reuse=reuse, loop=loop, chunks=chunks)
    images = is_image_sequence(input)
    facts = {} if images else probe(input)
    start, stop = frames_of(input, start, stop, rate=options.get("rate"))
    planar = not images and not images_out(output) and planar_path(facts, options, fn, encoder)
    # an image sequence as its files hold it (alpha, 16 bits), unless a function reads it;
    # a video's alpha and deep samples kept in RGB as far as the output holds them
    pix_fmt: PixFmt = "yuv420p" if planar else "native" if images and fn is None else "rgb24"
    narrowed = None
    if pix_fmt == "rgb24" and not images and fn is None:
        pix_fmt, narrowed = kept_rgb(facts.get("pix_fmt"), output, encoder)
    dropped = _dropped(output, loop=loop, at=options.get("at"))
    carried = None if dropped or images else carry
    if carried is not None:
        carried.check(output)
    if planar:
        encoder = encoder | {"input_pix_fmt": "yuv420p"}
    if chunks is not None:
        report = _chunked(
            input, output, (start, stop), options | {"pix_fmt": pix_fmt}, chunks=chunks,
            executor=executor, batch_size=batch_size, memory=memory, overwrite=overwrite,
            progress=progress, monitor=monitor, carry=carried, **encoder,
        )  # fmt: skip
    else:
        source = _source(input, (start, stop), options, pix_fmt=pix_fmt, loop=loop)
        sink = _sink(output, source.info, loop=loop, overwrite=overwrite, carry=carried, **encoder)
        report = _run(source, sink, fn, workers=workers, reuse=reuse, batch_size=batch_size,
                      memory=memory, executor=executor or "threads", progress=progress,
                      monitor=monitor)  # fmt: skip
    if narrowed:
        report.extra["pixels"] = {"warnings": [narrowed]}
    return _not_carried(report, facts, dropped=dropped)


def kept_rgb(
    stream_pix_fmt: str | None, output: str, encoder: EncoderOptions
) -> tuple[PixFmt, str | None]:
    """The RGB frames that keep what a video's samples hold (where no function reads
    them): its alpha, which an output that cannot hold it then refuses in one line (as
    it refuses an image sequence's), and samples of more than 8 bits where the output
    holds them (FFV1, or a ``pix_fmt`` of as many bits; PNG and TIFF images); elsewhere
    8 bits, with the line that says so (a 10-bit film to H.264 is a common delivery)."""
    from .io.formats import rgb_keeping
    from .io.probe import samples

    alpha, bits = samples(stream_pix_fmt)
    if bits <= 8:
        return rgb_keeping(alpha=alpha, deep=False), None
    holds, where = holds_deep(output, encoder)
    return rgb_keeping(alpha=alpha, deep=holds), None if holds else (
        f"the input's {bits}-bit samples are written in 8 bits, which {where} holds; "
        "--codec ffv1 (.mkv) or .png images keep them"
    )


def holds_deep(output: str, encoder: EncoderOptions) -> tuple[bool, str]:
    """Whether ``output`` (images, named or in a folder of ``.png``; or a video of
    ``encoder``'s) holds samples of more than 8 bits (FFV1, a ``pix_fmt`` of as many,
    PNG and TIFF), and what it is, in words, for the line that says it does not."""
    from .io.formats import DEEP_IMAGES
    from .io.inputs import is_image
    from .io.probe import samples

    if images_out(output):
        suffix = os.path.splitext(output)[1].lower() if is_image(output) else ".png"
        return suffix in DEEP_IMAGES, f"{suffix} images"
    codec, chosen = encoder.get("codec", "libx264"), encoder.get("pix_fmt")
    holds = samples(chosen)[1] > 8 if chosen else codec == "ffv1"
    return holds, f"{codec} in {chosen or 'yuv420p'}"


def check(
    input: str, output: str, *, source_options: dict[str, Any] | None = None, fn: Any = None,
    reuse: ReuseTarget | None = None, loop: int = 1, chunks: int | None = None,
) -> None:  # fmt: skip
    """Refuse, before any work, what :func:`transcode` cannot do with these arguments
    (the command line's usage errors).

    Raises:
        ValueError: the output is the input, or names one image; an unknown source
            option; ``reuse`` without ``fn``; ``chunks`` with what it cannot take.
    """
    from .io.image_names import PRINTF
    from .io.inputs import is_image, is_image_sequence

    if Path(input).resolve() == Path(output).resolve():
        raise ValueError("the output is the input; write to another path")
    name = os.path.basename(output)
    if is_image(output) and not (PRINTF.search(name) or "{index" in name):
        raise ValueError(
            f"{output!r} names one image, and a transcode writes one a frame; put a "
            "number in the name ('frames/frame_%06d.png') or name a folder ('frames/')"
        )
    if reuse is not None and fn is None:
        raise ValueError("reuse shares a function's answers, and there is no fn; drop reuse")
    unknown = set(source_options or {}) - SOURCE_OPTIONS
    if unknown:
        raise ValueError(
            f"source_options takes {', '.join(sorted(SOURCE_OPTIONS))}; got {sorted(unknown)}"
        )
    if chunks is None:
        return
    sampled = set(source_options or {}) & {"keyframes", "fps", "at", "num_frames"}
    for given, why in (
        (fn is not None, "a function runs in one process for now; drop chunks"),
        (is_image_sequence(input), "chunks cut a video at its keyframes, not images"),
        (loop > 1, "chunks cut one input at its keyframes; they cannot take loop"),
        (bool(sampled), "keyframes, fps, at and num_frames read in one process; drop chunks"),
        ((source_options or {}).get("step", 1) > 1, "a step does not combine with chunks yet"),
        ("rate" in (source_options or {}), "a video plays at its own rate; drop rate"),
    ):  # fmt: skip
        if given:
            raise ValueError(why)


def _dropped(output: str, *, loop: int, at: Any) -> str:
    """Why none of the input's other streams can go along ("" where they can)."""
    if loop > 1:
        return f"the input is played {loop} times over; its other streams are not carried"
    if at is not None:
        return "the frames asked for by time (at) come one after the other, out of the input's time"
    if images_out(output):
        return "the output is images, which hold no other streams"
    return ""


def images_out(output: str) -> bool:
    """Whether ``output`` names images: a pattern (``frames/f_%05d.png``) or a folder
    (one that exists, or a name ending in ``/``)."""
    from .io.inputs import is_image

    return is_image(output) or os.path.isdir(output) or output.endswith(os.sep)


def planar_path(
    facts: dict[str, Any], options: dict[str, Any], fn: Any, encoder: EncoderOptions
) -> bool:
    """Whether the frames can stay in yuv420p from decoder to encoder (no colour
    conversion): a yuv420p input (``facts`` as :func:`~hyperframes.io.probe.probe` gives
    them), a yuv420p encoder, no function, and even sizes throughout."""
    size = options.get("size") or (facts["width"], facts["height"])
    codec, pix_fmt = encoder.get("codec", "libx264"), encoder.get("pix_fmt")
    encoded = pix_fmt or ("yuv420p" if codec != "ffv1" else None)
    return (
        options.get("rotation") != "apply"  # planes cannot be turned
        and fn is None  # a function takes RGB frames
        and facts.get("pix_fmt") == "yuv420p"
        and encoded == "yuv420p"
        and all(v % 2 == 0 for v in (*size, facts["width"], facts["height"]))
    )


def _source(
    input: str, frames: tuple[int, int | None], options: dict[str, Any], *,
    pix_fmt: PixFmt, loop: int,
) -> Source:  # fmt: skip
    """The frames to encode: ``input`` read with ``options``, retimed where a sampling
    asks for it, played ``loop`` times."""
    from .io.loop import Looped, Retimed
    from .io.sources import open_input

    def make() -> Source:
        # the source resizes every frame as it decodes it, so a stream whose frame size
        # changes part-way comes out at one size
        made = open_input(input, start=frames[0], stop=frames[1], pix_fmt=pix_fmt, **options)
        if options.get("fps") is not None:  # each shown at the instant it was asked for
            return Retimed(made)
        if options.get("at") is not None:  # one after the other at the input's rate
            return Retimed(made, rate=float(made.info.get("fps") or 25))
        return made

    return Looped(make, times=loop) if loop > 1 else make()


def _sink(
    output: str, info: dict[str, Any], *, loop: int, overwrite: bool, carry: Carry | None,
    **encoder: Any,
) -> Sink:  # fmt: skip
    """The images or the video ``output`` names."""
    from .io.video_sink import VideoSink

    if not images_out(output):
        return VideoSink(output, overwrite=overwrite, carry=carry, **encoder)
    from .io.image_sink import ImageSequenceSink
    from .io.inputs import is_image

    folder, name = os.path.split(output) if is_image(output) else (output, None)
    naming: dict[str, Any] = {"pattern": name} if name else {}
    if not name and info.get("pattern"):  # the input's own names
        first, step, count = info["first_number"], info["number_step"], info["frames"]
        naming = {"pattern": info["pattern"],
                  "numbers": range(first, first + step * count * loop, step)}  # fmt: skip
    return ImageSequenceSink(folder or ".", overwrite=overwrite, **naming)


def _run(source: Source, sink: Sink, fn: Any, *, workers: int, reuse: Any,
         batch_size: int | None, **run: Any) -> RunReport:  # fmt: skip
    """One pipeline from ``source`` through ``fn`` (where there is one) into ``sink``."""
    from .pipeline import Pipeline

    pipeline = Pipeline.from_source(source, batch_size=batch_size)
    if fn is not None:
        pipeline = pipeline.map(fn, workers=workers, reuse=reuse)
    report = pipeline.to(sink).run(**run)
    skipped = getattr(source, "skipped", [])
    if skipped:
        report.extra["skipped_frames"] = skipped
    return report


def _chunked(
    input: str, output: str, frames: tuple[int, int | None], reading: dict[str, Any], *,
    chunks: int, **run: Any,
) -> RunReport:  # fmt: skip
    """Keyframe-aligned segments, joined by stream copy (:func:`~hyperframes.run_chunked`)."""
    from .chunked import run_chunked

    reading.pop("step", None)  # (1: anything else was refused)
    report = run_chunked(input, output, start=frames[0], stop=frames[1],
                         source_options=reading, segments=chunks or None, **run)  # fmt: skip
    skipped = report.extra["chunks"].get("skipped_frames")
    if skipped:
        report.extra["skipped_frames"] = skipped
    return report


def _not_carried(report: RunReport, facts: dict[str, Any], *, dropped: str) -> RunReport:
    """Say what became of the input's other streams: ``dropped`` says why none of them
    could go along, where that is so."""
    if dropped:
        others = [s for s in facts.get("streams", []) if not s.get("discarded")]
        report.extra["streams"] = {"dropped": [s | {"why": dropped} for s in others]}
        if facts.get("chapters"):
            report.extra["streams"]["chapters_dropped"] = facts["chapters"]
    return streams_report(report)


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
    from .io.streams import label

    return f"{label(stream)} (stream {stream['index']}: {stream['why']})"
