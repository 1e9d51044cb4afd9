"""``hyperframes pack``, ``unpack``, ``frame`` and ``verify``: the hyperframe store.

``hyperframes info STORE`` uses :func:`store_info` and :func:`is_store` from here. The
store (LMDB, the codecs) is imported by the command that runs, not by :func:`register`.

Longer than 300 lines: four commands over one store share its options and its resume
rules (what a default pack stores, the grouping a partial store was packed with).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any

from ..choices import INTRAS, Tier
from ..errors import StoreCorrupt
from ..io.inputs import Input, is_many
from .common import UsageError, frame_size, positive_int, print_json, progress_for
from .many import (
    PARTIAL,
    add_many_options,
    add_rate_option,
    print_rows,
    publish_failures,
    rate_for,
    refuse_rate,
)
from .observe import add_long_options, observed_run, workers_of
from .per_input import cluster_of, each, side_by_side
from .sampling import add_sampling_options, is_sampled, sampling_of
from .streams import frame_range

__all__ = ["is_store", "register", "store_info"]

VIDEO_SUFFIXES = frozenset({".mp4", ".mkv", ".mov", ".avi", ".webm"})


def is_store(path: str | os.PathLike[str]) -> bool:
    """:func:`hyperframes.store.is_store`, imported when called."""
    from .. import store

    return store.is_store(path)


def store_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`hyperframes.store.store_info`, imported when called."""
    from .. import store

    return store.store_info(path)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pack", help="group a video into hyperframes and store them")
    p.add_argument(
        "input", metavar="IN", help="a video, an image sequence (a folder of images, "
        "'frames/frame_%%04d.png', a quoted glob of images), or many videos (a folder, a "
        "quoted glob, a manifest): then STORE is a folder, a store per input in it",
    )  # fmt: skip
    p.add_argument("store", metavar="STORE")
    add_rate_option(p)
    add_many_options(p)
    p.add_argument(
        "--size", type=frame_size, default=None, metavar="WxH",
        help="resize every frame to WxH (needed when the frame size changes part-way)",
    )  # fmt: skip
    add_sampling_options(
        p, every_help="store every K-th frame (the store numbers its frames 0, 1, 2...; "
        "each keeps its time; so with --fps, --at, --num-frames, --keyframes)",
        keyframes_help="store only the key frames",
    )  # fmt: skip
    p.add_argument("--threshold", type=float, default=None, help="grouping MSE threshold")
    p.add_argument("--min-len", type=positive_int, default=None, help="shortest group")
    p.add_argument("--max-len", type=positive_int, default=None, help="longest group")
    p.add_argument("--psnr", type=float, default=None, help="lossy: target PSNR in dB")
    p.add_argument(
        "--intra", choices=INTRAS, default="gradient",
        help="how frames stored whole are coded: gradient (fast) or webp (RGB stores: "
        "lossless WebP, 16-25%% smaller, 7-20x slower to pack) or ffv1 (stores of planes: "
        "FFV1 keyframes, 0.88-1.01x FFV1's size on moving video, a random frame 1.0-1.6x "
        "FFV1's CPU) or x264 (stores of planes, the size mode: lossless H.264, 1.1-4.4x "
        "smaller than gradient on moving video, a random frame 8-50x slower to read); "
        "16-bit frames (a simulation's, a sensor's) are coded against a smooth surface "
        "fitted to each wherever that is smaller, whichever is chosen (0.69x the bytes on "
        "a noisy simulation, read in order as fast, a random frame from one record)",
    )  # fmt: skip
    p.add_argument(
        "--gop", type=positive_int, default=None, metavar="K",
        help="with --intra x264: a keyframe every K frames (default 32; smaller reads a "
        "random frame faster, larger stores smaller)",
    )  # fmt: skip
    p.add_argument(
        "--pix-fmt", choices=("native", "rgb24"), default=None,
        help="native (default): keep the decoder's planes bit-exact (yuv420p, 4:2:2, "
        "4:4:4, gray, 10-bit; other formats and --size store RGB, with the input's alpha "
        "and 16 bits where it has them; --intra webp stores rgb24); rgb24: store RGB",
    )  # fmt: skip
    either = p.add_mutually_exclusive_group()
    either.add_argument(
        "--resume", action="store_true",
        help="continue a partial store packed from the same input",
    )  # fmt: skip
    either.add_argument("--overwrite", action="store_true", help="replace an existing store")
    add_long_options(p, workers_help="encoding threads")
    p.set_defaults(run=run_pack, reads=("input",), writes=("store", "failures"))

    p = sub.add_parser("unpack", help="write a store's frames as a video or image folder")
    p.add_argument("store", metavar="STORE")
    p.add_argument("output", metavar="OUT", help="a video file (.mkv, .mp4...), a folder, "
                   "or images named by a pattern ('frames/f_%%05d.png')")  # fmt: skip
    p.add_argument("--codec", default=None, help="video codec; ffv1 (lossless) by default")
    p.add_argument(
        "--pattern", default=None, metavar="NAME",
        help="a folder's image names, e.g. 'img_%%05d.png' or 'img_{index:05d}.jpg' "
        "(default: as the packed images were named, else frame_000000.png on)",
    )  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_long_options(p, workers_help=None)  # the store decodes on its own threads
    p.set_defaults(run=run_unpack, reads=("store",), writes=("output",))

    p = sub.add_parser("frame", help="write one frame of a store as an image")
    p.add_argument("store", metavar="STORE")
    p.add_argument("index", type=int, metavar="INDEX", help="frame index (negative: from end)")
    p.add_argument("output", metavar="OUT.png")
    p.add_argument("--overwrite", action="store_true", help="replace an existing image")
    p.set_defaults(run=run_frame, reads=("store",), writes=("output",))

    p = sub.add_parser("verify", help="check every checksum of a store")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_verify, reads=("store",))


def run_pack(args: argparse.Namespace) -> int:
    if is_many(args.input):
        return pack_many(args)
    data = pack(args)
    if args.json:
        print_json(data)
    elif data.pop("nothing_to_do", False):
        print(f"{args.store} is complete ({data['frames']} frames); nothing to resume")
    else:
        for key, value in data.items():
            print(f"{key:<14}{value}")
    return 0


def pack_many(args: argparse.Namespace) -> int:
    """``pack INPUTS FOLDER``: a store for each input in ``FOLDER``, named after it (the
    folders it was found in kept), one after the other; ``--resume`` resumes each (a
    complete one is left as it is). An input that cannot be read is listed and the rest
    go on (exit code :data:`~.many.PARTIAL`)."""
    from ..io.inputs import expand

    inputs = expand(args.input)
    refuse_rate(args.rate, inputs)
    if any(i.start or i.stop is not None for i in inputs) or args.start or args.stop is not None:
        raise UsageError("pack INPUTS stores whole inputs; drop --start/--stop and the "
                         "manifest's start and stop")  # fmt: skip
    folder = Path(args.store)
    workers, scale, observe = side_by_side(args.scale, args.observe)
    own = argparse.Namespace(**{**vars(args), "scale": scale, "observe": observe,
                                "memory": scale.memory})  # fmt: skip
    with cluster_of(args.scale) as ray:
        done, failed = each(inputs, functools.partial(pack_into, own, folder),
                            fail_fast=args.fail_fast, file_timeout=args.file_timeout,
                            workers=workers, ray=ray,
                            bar=progress_for(args.observe, "pack"))  # fmt: skip
    publish_failures(failed, args.failures, folder, total=len(inputs))
    print_rows(done, failed, lambda row: (
        f"{row['path']}  -> {row['store']}: {row['frames']} frames, {row['new_frames']} new, "
        f"{row['ratio']} of raw"
    ), as_json=args.json)  # fmt: skip
    return PARTIAL if failed else 0


def pack_into(args: argparse.Namespace, folder: Path, item: Input) -> dict[str, Any]:
    """One input of ``pack INPUTS FOLDER``: its store in ``folder``, named after it, and
    the figures."""
    target = item.output_in(folder, ".hfs")
    target.parent.mkdir(parents=True, exist_ok=True)
    given = {"input": item.path, "store": str(target), "rate": rate_for(args.rate, item.path)}
    data = pack(argparse.Namespace(**{**vars(args), **given}))
    data.pop("nothing_to_do", None)
    data.pop("path", None)  # the store's: ``store`` names it, ``path`` the input
    return {"store": str(target), **data}


def pack(args: argparse.Namespace) -> dict[str, Any]:
    """Pack ``args.input`` into ``args.store`` as the options say; the figures (as
    ``--json`` prints them; ``nothing_to_do`` where a resume found the store complete)."""
    from .. import Pipeline
    from ..choices import GOP, check_gop
    from ..engine.sizing import default_budget
    from ..hyper.grouping.grouper import GroupingOptions
    from ..io.loop import Renumbered
    from ..io.sources import open_input
    from ..store import StoreSink, StoreWriter
    from ..store.resume import check_resumed_frame, resume_point
    from ..store.sink import plan_pack

    tier: Tier = "lossless" if args.psnr is None else "psnr"
    chosen = is_sampled(args) or args.start != 0 or args.stop is not None
    if chosen and args.resume:
        raise UsageError("--resume continues a pack of whole inputs; a pack of some frames "
                         "starts again: pass --overwrite")  # fmt: skip
    start, complete = resume_point(args.store) if args.resume else (0, False)
    pix_fmt = _pack_pix_fmt(args, resuming=args.resume and (start > 0 or complete))
    reading = {"size": args.size, "pix_fmt": pix_fmt, "rate": args.rate}
    if chosen:  # some frames, numbered 0, 1, 2... in the store, each with its own time
        first, stop = frame_range(args.input, args.start, args.stop, rate=args.rate)
        whole: Any = Renumbered(open_input(args.input, start=first, stop=stop, **reading,
                                           **sampling_of(args)))  # fmt: skip
    else:
        whole = open_input(args.input, **reading)
    # grouping: what the user says, else what the resumed store was packed with, else the
    # defaults, with the longest group fitted to the memory budget (see plan_pack)
    # (x264: a group's start is a keyframe, so groups are cut by length only, one GOP each)
    packed = _packed_grouping(args.store) if args.resume and start else {}
    defaults = GroupingOptions(threshold=1.0) if args.intra == "x264" else GroupingOptions()
    threshold = _first(args.threshold, packed.get("threshold"), defaults.threshold)
    min_len = _first(args.min_len, packed.get("min_len"), defaults.min_len)
    budget = args.memory or default_budget()
    asked = _first(args.max_len, packed.get("max_len"), None)
    plan = plan_pack(
        whole.spec, budget, min_len=min_len, batch_size=args.batch_size, max_len=asked,
        workers=workers_of(args.scale), source=whole.footprint(),
    )  # fmt: skip
    longest = plan.max_len
    if args.intra == "x264" and asked is None:
        longest = x264_max_len(longest, check_gop(args.gop, "x264") or GOP)
    options = GroupingOptions(threshold=threshold, min_len=min_len, max_len=longest)
    grouping = {"threshold": threshold, "min_len": min_len, "max_len": longest}
    if args.resume and (start or complete):
        done = complete or (whole.length is not None and start >= whole.length)
        StoreWriter(  # checks the input and the settings, and that no one else writes
            args.store, _store_spec(args.store), whole.info, tier=tier, psnr=args.psnr,
            intra=args.intra, gop=args.gop, grouping=grouping, resume=True,
        ).close(complete=done)  # fmt: skip
        if done:
            return {**_pack_data(store_info(args.store), fps=0.0, new=0, wall=0.0),
                    "nothing_to_do": True}  # fmt: skip
        check_resumed_frame(args.store, args.input, start - 1, **reading)
    source = whole if chosen else open_input(args.input, start=start, **reading)
    sink = StoreSink(  # records the grouping the .group() stage below uses
        args.store, tier=tier, psnr=args.psnr, intra=args.intra, gop=args.gop,
        workers=workers_of(args.scale),
        resume=args.resume, overwrite=args.overwrite,
    )  # fmt: skip
    pipeline = (
        Pipeline.from_source(source, batch_size=args.batch_size)
        .group(threshold=options.threshold, min_len=options.min_len, max_len=options.max_len)
        .to(sink)
    )
    # the budget max_len fits
    report, _ = observed_run(args.observe, args.scale, pipeline, "pack", memory=budget)
    if whole.info.get("other_streams"):
        print(
            f"hyperframes: warning: a store keeps the frames only, so unpack cannot give back "
            f"{whole.info['other_streams']} of {args.input!r}; keep the original for them",
            file=sys.stderr,
        )
    return _pack_data(report.output, fps=report.fps, new=report.frames, wall=report.wall_s)


def x264_max_len(longest: int, gop: int) -> int:
    """The longest x264 group: one GOP of ``gop`` frames where ``longest`` allows it. Longer
    groups would store the same keyframes, and a read copies and checks its whole group's
    record before decoding the GOP it needs."""
    return min(longest, gop)


def _pack_pix_fmt(args: argparse.Namespace, *, resuming: bool) -> Any:
    """``"native"`` when the video's planes can be kept (and a resumed store holds planes),
    else RGB, with the input's alpha and samples of more than 8 bits (``"rgb24"`` where
    asked for, or for ``--intra webp``)."""
    from ..io.formats import rgb_keeping
    from ..store import FrameStore

    if args.pix_fmt == "rgb24":
        return "rgb24"
    if args.intra == "webp":  # WebP codes RGB
        if args.pix_fmt == "native":
            raise ValueError("--intra webp codes RGB frames; drop --pix-fmt native")
        return "rgb24"
    if resuming:  # as the store holds its frames
        with FrameStore(args.store, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
            if store.header.pixels is not None:
                return "native"
            spec = store.header.spec
            alpha = len(spec.shape) == 3 and spec.shape[-1] == 4
            return rgb_keeping(alpha=alpha, deep=spec.dtype.itemsize > 1)
    return default_planes(args.input, resized=args.size is not None)


def default_planes(path: str, *, resized: bool = False) -> Any:
    """What a default pack of the video at ``path`` stores: ``"native"`` (the decoder's
    planes) when its layout can be kept and it is not ``resized``, else RGB that keeps
    its alpha and its samples of more than 8 bits (a store holds both)."""
    from ..io.formats import rgb_keeping
    from ..io.inputs import is_image_sequence
    from ..io.layouts import NATIVE
    from ..io.probe import samples
    from ..io.video import VideoSource

    if is_image_sequence(path):
        return "native"  # the images as their files hold them
    stream_pix_fmt = VideoSource(path).info.get("source_pix_fmt")
    if stream_pix_fmt in NATIVE and not resized:
        return "native"
    alpha, bits = samples(stream_pix_fmt)
    return rgb_keeping(alpha=alpha, deep=bits > 8)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _packed_grouping(path: str) -> dict[str, Any]:
    """The grouping options a partial store was packed with ({} when it records none)."""
    from ..store import FrameStore

    with FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
        return dict(store.header.grouping or {})


def _store_spec(path: str) -> Any:
    from ..store import FrameStore

    with FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
        return store.header.spec  # as stored (planes, for a store of planes)


def _pack_data(summary: dict[str, Any], *, fps: float, new: int, wall: float) -> dict[str, Any]:
    keys = ("path", "frames", "hyperframes", "raw_bytes", "stored_bytes", "ratio", "psnr_min")
    data = {key: summary.get(key) for key in keys}
    data.update(fps=round(fps, 3), new_frames=new, wall_s=round(wall, 3),
                resumed_from=summary.get("resumed_from", data["frames"]))  # fmt: skip
    return data


def run_unpack(args: argparse.Namespace) -> int:
    from .. import Pipeline
    from ..io.image_sink import ImageSequenceSink
    from ..io.video_sink import VideoSink, encodes_planes
    from ..store.source import StoreSource

    out = Path(args.output)
    video = out.suffix.lower() in VIDEO_SUFFIXES
    codec = args.codec or "ffv1"
    facts = store_info(args.store)
    pixels = facts.get("pixels") or {}
    native = video and encodes_planes(codec, pixels.get("layout"), pixels.get("width", 0),
                                      pixels.get("height", 0))  # fmt: skip
    folder, naming = (out, {}) if video else _image_output(out, args, facts)
    named = out if video else folder / str(naming.get("pattern", "frame_%06d.png"))
    pix_fmt = "native" if native else _rgb_of(pixels, named, codec)
    source = StoreSource(args.store, pix_fmt=pix_fmt)
    try:
        if video:
            sink: Any = VideoSink(
                out, codec=codec, overwrite=args.overwrite,
                input_pix_fmt="native" if native else None,
            )  # fmt: skip
        else:
            sink = ImageSequenceSink(folder, overwrite=args.overwrite, **naming)
        pipeline = Pipeline.from_source(source, batch_size=args.batch_size).to(sink)
        report, written = observed_run(args.observe, args.scale, pipeline, "unpack")
    finally:
        source.close()
    data = {"output": str(out), "frames": report.frames, "fps": round(report.fps, 3), **written}
    others = (facts.get("source") or {}).get("other_streams")
    if others:  # recorded by pack: what the store never held
        data["not_given_back"] = others
        print(
            f"hyperframes: warning: the store holds the frames only: {others} of the packed "
            "input are not in the output; take them from the original",
            file=sys.stderr,
        )
    if not facts.get("complete", True):
        data["complete"] = False
        print(
            f"hyperframes: warning: store {args.store!r} is incomplete (its pack did not finish "
            f"or is still running): {out} holds the {report.frames} frames it had",
            file=sys.stderr,
        )
    if args.json:
        print_json(data)
    else:
        print(f"{report.frames} frames -> {out}")
    return 0


def _rgb_of(pixels: dict[str, Any], output: Path, codec: str | None = None) -> str:
    """The RGB a store of planes (``pixels``: their layout) is read as for ``output`` (an
    image, a pattern, or a video of ``codec``): ``"rgb48"`` where its samples have more
    than 8 bits and the output holds them (:func:`~hyperframes.transcoding.holds_deep`),
    else ``"rgb24"``, said in a warning line where that drops bits (a store of RGB gives
    its frames as stored either way)."""
    from ..io.probe import samples
    from ..transcoding import holds_deep

    bits = samples(pixels.get("layout"))[1]
    if bits <= 8:
        return "rgb24"
    holds, where = holds_deep(str(output), {"codec": codec} if codec else {})
    if not holds:  # (as transcode tells of it: 8 bits are asked for)
        said = f"the store's {bits}-bit samples are written in 8 bits, which {where} can hold"
        print(f"hyperframes: warning: {said}; FFV1 (.mkv) or .png keep them", file=sys.stderr)
    return "rgb48" if holds else "rgb24"


def _image_output(
    out: Path, args: argparse.Namespace, facts: dict[str, Any]
) -> tuple[Path, dict[str, Any]]:
    """The folder the images go to and their names: ``OUT`` a folder (named as
    :func:`_naming` says), or a pattern in one (``frames/f_%05d.png``), as ``transcode``
    takes it."""
    from ..io.inputs import is_image

    if not is_image(out):
        return out, _naming(args, facts)
    if args.pattern is not None:
        raise ValueError(
            f"{str(out)!r} names the images, and so does --pattern {args.pattern!r}: give "
            "a folder with --pattern, or the pattern alone"
        )
    return out.parent, {"pattern": out.name}


def _naming(args: argparse.Namespace, facts: dict[str, Any]) -> dict[str, Any]:
    """The images' names: ``--pattern``, else those of the packed image sequence (its
    pattern and numbers), else the sink's own."""
    if args.pattern is not None:
        return {"pattern": args.pattern}
    source = facts.get("source") or {}
    if not source.get("pattern"):
        return {}
    first, step = source["first_number"], source["number_step"]
    return {"pattern": source["pattern"],
            "numbers": range(first, first + step * facts["frames"], step)}  # fmt: skip


def run_frame(args: argparse.Namespace) -> int:
    import cv2

    from ..frames import FrameSpec
    from ..io.image_sink import check_kept
    from ..io.inputs import IMAGE_SUFFIXES
    from ..io.publish import check_output, write_output
    from ..store import FrameStore

    out = Path(args.output)
    kind = out.suffix.lower()
    if kind not in IMAGE_SUFFIXES:
        kinds = ", ".join(sorted(IMAGE_SUFFIXES))
        raise ValueError(f"cannot write an image named {args.output!r}; use one of {kinds}")
    check_output(out, overwrite=args.overwrite)
    pixels = store_info(args.store).get("pixels") or {}
    rgb = _rgb_of(pixels, out)
    with FrameStore(args.store, read_ahead=False, pix_fmt=rgb) as store:
        frame = store[args.index]
    check_kept(FrameSpec.of(frame), kind)  # (alpha or 16 bits a JPEG would drop)
    channels = 1 if frame.ndim == 2 else frame.shape[-1]
    if channels == 3:
        frame = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
    elif channels == 4:
        frame = cv2.cvtColor(frame, cv2.COLOR_RGBA2BGRA)
    # encoded in memory: the path never reaches OpenCV, which cannot take every file name
    done, data = cv2.imencode(kind, frame)
    if not done:
        raise ValueError(f"cannot encode this frame as {kind}; use .png")
    write_output(out, data.tobytes(), overwrite=args.overwrite)
    print(args.output)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from ..store import FrameStore

    with FrameStore(args.store, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
        bad = store.verify()
        frames, complete = len(store), store.complete
        expected = store.info.source.get("frames")
        packed_from = store.info.source.get("path") or "INPUT"
    if args.json:
        print_json({
            "path": args.store, "frames": frames, "complete": complete, "ok": not bad,
            "bad_frames": bad,
        })  # fmt: skip
    elif not bad:
        held = f"{frames} frames"
        if not complete:
            of = f" of {expected}" if isinstance(expected, int) and expected >= frames else ""
            again = f"pack {packed_from} {args.store} --resume"
            held = f"incomplete: {frames}{of} frames ({again} continues it)"
        print(f"{args.store}: {held}, every checksum matches")
    if bad:
        shown = ", ".join(map(str, bad[:20])) + (" ..." if len(bad) > 20 else "")
        error = StoreCorrupt(f"{len(bad)} of {frames} frames are damaged: {shown}")
        print(f"hyperframes: error: {error}", file=sys.stderr)
        return 1
    return 0
