"""``hyperframes transcode``: decode, optionally filter or resize, encode; one input into
one output, or many into a folder. The options are read once into a :class:`TranscodeJob`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..io.inputs import is_image_sequence, is_many
from ..io.positions import Seconds
from .common import UsageError, emit_report, print_json, progress_for, reuse_of
from .many import PARTIAL, publish_failures, rate_for, refuse_rate
from .observe import observed, workers_of
from .options import Encoding, Observe, Scale
from .per_input import cluster_of, each, side_by_side
from .sampling import sampling_of
from .scale import executor_for, ray_for_chunks
from .streams import carry_of, frame_range

if TYPE_CHECKING:
    from .. import RunReport
    from ..io.formats import OnCorrupt
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
    """Run ``job`` (:func:`hyperframes.transcode`, its options checked in the words of the
    command line first); returns the report and what was written where."""
    from .. import transcoding

    images = is_image_sequence(job.input)
    sampling = sampling_of(job)
    refuse_chunks(job, images=images, sampled=set(sampling) - {"step"})
    try:
        transcoding.check(job.input, job.output)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    start, stop = frame_range(job.input, job.start, job.stop, rate=job.rate if images else None)
    carry = None
    if not images and not transcoding.images_out(job.output):
        carry = carry_of(job.output, audio=job.audio, audio_codec=job.audio_codec,
                         subtitles=job.subtitles)  # fmt: skip
    video = {} if images else {"rotation": job.rotation, "colour": job.colour}
    given = {"size": job.size, "rate": job.rate}
    source_options = sampling | video | {k: v for k, v in given.items() if v is not None}
    fn = None
    if job.map is not None:
        from ..models import load

        fn = load(job.map)
    if job.chunks is not None:
        executor: Any = ray_for_chunks(job.scale)
    else:
        executor = executor_for(job.scale)

    def run(bar: Any, watch: Any) -> RunReport:
        return transcoding.transcode(
            job.input, job.output, fn, start=start, stop=stop, loop=job.loop, carry=carry,
            source_options=source_options | {"on_corrupt": job.on_corrupt},
            workers=workers_of(job.scale), reuse=job.reuse, chunks=job.chunks,
            batch_size=job.batch_size, memory=job.scale.memory, executor=executor,
            overwrite=job.encoding.overwrite, progress=bar, monitor=watch,
            **job.encoding.options(),
        )  # fmt: skip

    report, written = observed(job.observe, "transcode", run)
    skipped = report.extra.get("skipped_frames")
    return report, written | ({"skipped_frames": skipped} if skipped else {})


def refuse_chunks(job: TranscodeJob, *, images: bool, sampled: set[str]) -> None:
    """Refuse ``--chunks`` with what it cannot take, before any work."""
    if job.chunks is None:
        return
    for given, why in (
        (job.map is not None, "--map runs in one process for now; drop --chunks"),
        (images, "--chunks cuts a video at its keyframes, not images; drop --chunks"),
        (job.loop > 1, "--chunks cuts one input at its keyframes; it cannot take --loop"),
        (job.every > 1, "--every does not combine with --chunks yet; drop one"),
        (bool(sampled), "--keyframes, --fps, --at and --num-frames read in one process; "
                        "drop --chunks"),
    ):  # fmt: skip
        if given:
            raise UsageError(why)
