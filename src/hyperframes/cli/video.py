"""``hyperframes info`` and ``transcode``'s options: real media in and out (the transcode
itself is ``cli/transcode.py``).

:func:`register` builds the parsers without PyAV, OpenCV or the pipeline: a command
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING, Any

from ..io.inputs import is_image_sequence, is_many
from .common import (
    UsageError,
    add_function_options,
    frame_size,
    positive_int,
    print_json,
)
from .many import (
    PARTIAL,
    add_file_timeout_option,
    add_many_options,
    add_rate_option,
    print_rows,
    refuse_rate,
)
from .observe import add_long_options
from .per_input import each
from .sampling import add_sampling_options
from .scale import add_chunk_options
from .streams import add_stream_options
from .transcode import run_transcode

if TYPE_CHECKING:
    import numpy as np

    from ..io.inputs import Input


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="what a video file or a hyperframe store is")
    p.add_argument(
        "path", help="a video, an image sequence (a folder of images, 'frames/frame_%%04d.png'), "
        "a store, or many videos (a folder, a glob, a manifest)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_rate_option(p)
    add_file_timeout_option(p)
    p.set_defaults(run=run_info)

    p = sub.add_parser("transcode", help="decode -> optional resize -> encode")
    p.add_argument(
        "input", help="a video, an image sequence (a folder of images, "
        "'frames/frame_%%04d.png', a quoted glob of images), or many videos (a folder, a "
        "quoted glob, a manifest): then OUTPUT is a folder, one output per input",
    )  # fmt: skip
    add_rate_option(p)
    p.add_argument("output")
    p.add_argument(
        "--suffix", default=None, metavar=".EXT",
        help="many inputs: the outputs' suffix, e.g. .mkv (default: each input's own)",
    )  # fmt: skip
    add_many_options(p)
    add_encoder_options(p)
    p.add_argument("--size", type=frame_size, default=None, help="resize to WxH")
    add_sampling_options(
        p, every_help="keep every K-th frame; each is shown until the next, so the output "
        "lasts as long as the input and its sound is kept whole (so does --num-frames; "
        "--fps R writes R frames a second, --at the frames asked for one after the other)",
        keyframes_help="keep only the key frames, each shown until the next (the frames "
        "between are not decoded): a quick overview of a long video",
    )  # fmt: skip
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
    p.set_defaults(run=run_transcode, reads=("input",), writes=("output", "failures"))


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
    from .store import is_store, store_info

    if not is_store(args.path) and is_many(args.path):
        return info_many(args)
    if (is_store(args.path) or not is_image_sequence(args.path)) and args.rate is not None:
        raise UsageError(f"{args.path!r} has a frame rate of its own; --rate is an image "
                         "sequence's: drop it")  # fmt: skip
    facts = store_info(args.path) if is_store(args.path) else facts_of(args.path, args.rate)
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


def input_facts(rate: str | None, item: Input) -> dict[str, Any]:
    """One input of ``info INPUTS``: what it is (a store: what ``info STORE`` says)."""
    from .store import is_store, store_info

    return store_info(item.path) if is_store(item.path) else facts_of(item.path, rate)


def facts_of(path: str, rate: str | None) -> dict[str, Any]:
    """What a video (``probe``) or an image sequence (its source's ``info``, at ``rate``)
    is."""
    from ..io.probe import probe
    from ..io.sources import open_input

    if is_image_sequence(path):
        return open_input(path, pix_fmt="native", rate=rate).info
    return probe(path)


def info_many(args: argparse.Namespace) -> int:
    """``info INPUTS``: a line per input (``--json``: an object a line), those that cannot
    be read with their reason; exit code :data:`~.many.PARTIAL` when some could not."""
    from ..io.inputs import expand

    inputs = expand(args.path)
    refuse_rate(args.rate, inputs)
    done, failed = each(inputs, functools.partial(input_facts, args.rate), fail_fast=False,
                        file_timeout=args.file_timeout)  # fmt: skip
    for row in done:
        row.pop("seconds", None)
    print_rows(done, failed, _line, as_json=args.json)
    return PARTIAL if failed else 0


def _line(row: dict[str, Any]) -> str:
    """One input of ``info INPUTS`` in a line: a video's codec, size, rate, frames and
    seconds; a store's size, rate and frames."""
    if "stored_bytes" in row:  # a store (``info STORE``'s facts)
        height, width = row["shape"][:2]
        return (f"{row['path']}  store {width}x{height} {row.get('fps') or '?'} fps "
                f"{row['frames']} frames")  # fmt: skip
    return (
        f"{row['path']}  {row.get('codec')} {row.get('width')}x{row.get('height')} "
        f"{row.get('fps') or '?'} fps {row.get('frames')} frames {row.get('duration')} s"
    )


def stream_line(stream: dict[str, Any]) -> str:
    """``#1 audio aac (eng), 48000 Hz, 2 channels, 4.01 s``: a stream as ``info`` shows it."""
    from ..io.streams import label

    line = f"#{stream['index']} {label(stream)}"
    details = [f"{stream['rate']} Hz" if stream.get("rate") else "",
               f"{stream['channels']} channels" if stream.get("channels") else "",
               f"{stream['duration']:g} s" if stream.get("duration") is not None else "",
               "the chapters' track" if stream.get("discarded") else ""]  # fmt: skip
    return ", ".join([line, *(d for d in details if d)])
