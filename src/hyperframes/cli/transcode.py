"""``hyperframes transcode``: decode, optionally filter or resize, encode; one input into
one output, or many into a folder. The options are read once into a :class:`TranscodeJob`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..io.inputs import is_many
from ..io.positions import Seconds
from .common import UsageError, emit_report, print_json, progress_for, reuse_of
from .many import PARTIAL, publish_failures, rate_for, refuse_rate
from .observe import observed, observed_run, workers_of
from .options import Encoding, Observe, Scale
from .per_input import cluster_of, each, side_by_side
from .sampling import sampling_of
from .scale import ray_for_chunks
from .streams import carry_of, frame_range, not_carried

if TYPE_CHECKING:
    from .. import RunReport
    from ..io.base import Sink
    from ..io.formats import OnCorrupt, PixFmt
    from ..io.inputs import Input
    from ..io.video import Colour, Rotation
    from ..modes import ReuseTarget


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
    rate: str | None = None
    colour: Colour = "ffmpeg"
    keyframes: bool = False
    fps: str | None = None
    at: str | None = None
    num_frames: int | None = None

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
    spread = is_many(job.input) and job.scale.executor in ("processes", "ray")
    if job.scale.workers is not None and job.map is None and job.chunks is None and not spread:
        raise UsageError(
            "--workers sets the threads of --map's function, and this transcode has none "
            "(decoding and encoding use every core on their own); drop --workers"
        )
    if is_many(job.input):
        return transcode_many(job, args)
    report, extra = transcode(job)
    emit_report(job.observe, report, **extra)
    return 0


def transcode_many(job: TranscodeJob, args: argparse.Namespace) -> int:
    """``transcode INPUTS FOLDER``: each input into ``FOLDER`` under its own name (the
    folders it was found in kept, ``--suffix`` for another container), one after the
    other or side by side (:func:`.per_input.each`); one that fails is listed, the rest go on."""
    from ..io.inputs import expand

    inputs = expand(job.input)  # (a folder of neither videos nor images says so first)
    folder = Path(job.output)
    if folder.suffix and not folder.is_dir():
        raise UsageError(
            f"with many inputs OUTPUT is a folder (one output per input, named after it), "
            f"got {str(folder)!r}; name a folder, and --suffix for the outputs' container"
        )
    for flag, given in (("--chunks", job.chunks is not None), ("--loop", job.loop > 1),
                        ("--start/--stop", job.start != 0 or job.stop is not None)):  # fmt: skip
        if given:
            raise UsageError(f"{flag} takes one input for now; drop {flag}")
    refuse_rate(job.rate, inputs)
    workers, scale, observe = side_by_side(job.scale, job.observe)
    with cluster_of(job.scale, function=job.map) as ray:
        done, failed = each(
            inputs, functools.partial(transcode_into, dataclasses.replace(
                job, scale=scale, observe=observe), folder, args.suffix),
            fail_fast=args.fail_fast, file_timeout=args.file_timeout,
            written=operator.methodcaller("output_in", folder, args.suffix), workers=workers,
            ray=ray, bar=progress_for(job.observe, "transcode"),
        )  # fmt: skip
    listed = publish_failures(failed, args.failures, folder, total=len(inputs))
    summary = {"inputs": len(inputs), "frames": sum(d["frames"] for d in done),
               "outputs": done, "failed": failed}  # fmt: skip
    if listed:
        summary["failures"] = listed
    if job.observe.json:
        print_json(summary)
    else:
        print(f"{len(done)} of {len(inputs)} inputs transcoded into {folder} "
              f"({summary['frames']} frames)")  # fmt: skip
    return PARTIAL if failed else 0


def transcode_into(
    job: TranscodeJob, folder: Path, suffix: str | None, item: Input
) -> dict[str, Any]:
    """One input of ``transcode INPUTS FOLDER``: ``job`` for ``item``, into ``folder``
    under its name (``suffix``: another container); its output and frames."""
    target = item.output_in(folder, suffix)
    target.parent.mkdir(parents=True, exist_ok=True)
    each_job = dataclasses.replace(
        job, input=item.path, output=str(target), start=item.start, stop=item.stop,
        rate=rate_for(job.rate, item.path),
    )  # fmt: skip
    report, _ = transcode(each_job)
    return {"output": str(target), "frames": report.frames}


def transcode(job: TranscodeJob) -> tuple[RunReport, dict[str, Any]]:
    """Run ``job``; returns the report and extra figures."""
    from .. import Pipeline
    from ..io.base import Source
    from ..io.inputs import is_image_sequence
    from ..io.loop import Looped, Retimed
    from ..io.probe import probe
    from ..io.sources import open_input
    from ..io.video_sink import VideoSink

    if Path(job.input).resolve() == Path(job.output).resolve():
        raise ValueError("the output is the input; write to another path")

    images = is_image_sequence(job.input)
    facts = {} if images else probe(job.input)
    start, stop = frame_range(job.input, job.start, job.stop, rate=job.rate if images else None)
    planar = not images and not images_out(job.output) and planar_path(job, facts)
    # an image sequence as its files hold it (alpha, 16 bits), unless a function reads it
    pix_fmt: PixFmt = "yuv420p" if planar else "native" if images and not job.map else "rgb24"
    if job.map is not None and job.chunks is not None:
        raise UsageError("--map runs in one process for now; drop --chunks")
    if images and job.chunks is not None:
        raise UsageError("--chunks cuts a video at its keyframes, not images; drop --chunks")
    sampling = sampling_of(job)
    if job.chunks is not None and set(sampling) - {"step"}:
        raise UsageError("--keyframes, --fps, --at and --num-frames read in one process; "
                         "drop --chunks")  # fmt: skip
    carry = None
    if not _dropped(job) and not images:  # the other streams go along in step with the frames
        carry = carry_of(job.output, audio=job.audio, audio_codec=job.audio_codec,
                         subtitles=job.subtitles)  # fmt: skip
    if job.chunks is not None:
        if job.every > 1:
            raise UsageError("--every does not combine with --chunks yet; drop one")
        chunked = transcode_chunked(job, (start, stop), pix_fmt, carry)
        return not_carried(*chunked, facts, dropped=_dropped(job))

    def make() -> Source:
        # the source resizes every frame to --size as it decodes it, so a stream whose
        # frame size changes part-way comes out at one size
        video: dict[str, Any] = {"rotation": job.rotation, "colour": job.colour}
        if images:
            video = {}
        made = open_input(
            job.input, start=start, stop=stop, on_corrupt=job.on_corrupt, pix_fmt=pix_fmt,
            size=job.size, rate=job.rate, **video, **sampling,
        )  # fmt: skip
        if job.fps is not None:  # R frames a second: each shown at the instant it was asked for
            return Retimed(made)
        if job.at is not None:  # the frames asked for, one after the other at the input's rate
            return Retimed(made, rate=float(made.info.get("fps") or 25))
        return made

    source: Source = Looped(make, times=job.loop) if job.loop > 1 else make()
    options = job.encoding.options(input_pix_fmt="yuv420p" if planar else None, carry=carry)
    sink: Sink = image_sink(job, source.info) if images_out(job.output) else VideoSink(
        job.output, overwrite=job.encoding.overwrite, **options
    )  # fmt: skip
    pipeline = Pipeline.from_source(source, batch_size=job.batch_size)
    if job.map is not None:
        from ..models import load

        fn = load(job.map)
        pipeline = pipeline.map(fn, workers=workers_of(job.scale), reuse=job.reuse)
    report, extra = observed_run(job.observe, job.scale, pipeline.to(sink), "transcode")
    skipped = getattr(source, "skipped", [])
    if skipped:
        extra["skipped_frames"] = skipped
    return not_carried(report, extra, facts, dropped=_dropped(job))


def _dropped(job: TranscodeJob) -> str:
    """Why none of the input's other streams can go along ("" where they can)."""
    if job.loop > 1:
        return f"--loop plays the input {job.loop} times; its other streams are not carried"
    if job.at is not None:
        return "--at shows the frames asked for one after the other, out of the input's time"
    if images_out(job.output):
        return "the output is images, which hold no other streams"
    return ""


def images_out(output: str) -> bool:
    """Whether ``output`` names images: a pattern (``frames/f_%05d.png``) or a folder
    (one that exists, or a name ending in ``/``)."""
    from ..io.inputs import is_image

    return is_image(output) or os.path.isdir(output) or output.endswith(os.sep)


def image_sink(job: TranscodeJob, info: dict[str, Any]) -> Sink:
    """The images ``job`` writes: named by its pattern, else as the input's images were
    (an image sequence's own pattern and numbers), else ``frame_000000.png`` on by frame."""
    from ..io.image_names import PRINTF
    from ..io.image_sink import ImageSequenceSink
    from ..io.inputs import is_image

    folder, name = os.path.split(job.output) if is_image(job.output) else (job.output, None)
    if name is not None and not (PRINTF.search(name) or "{index" in name):
        raise UsageError(
            f"{job.output!r} names one image, and a transcode writes one a frame; put a "
            "number in the name ('frames/frame_%06d.png') or name a folder ('frames/')"
        )
    naming: dict[str, Any] = {"pattern": name} if name else {}
    if not name and info.get("pattern"):  # the input's own names
        first, step, count = info["first_number"], info["number_step"], info["frames"]
        naming = {"pattern": info["pattern"],
                  "numbers": range(first, first + step * count * job.loop, step)}  # fmt: skip
    return ImageSequenceSink(folder or ".", overwrite=job.encoding.overwrite, **naming)


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
                            "rotation": job.rotation, "colour": job.colour},
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
