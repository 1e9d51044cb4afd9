"""``hyperframes demo``: run the engine on a synthetic sequence and print the run report."""

from __future__ import annotations

import argparse

import numpy as np

from .. import FrameSpec, Pipeline
from .common import add_run_options, emit_report, positive_int, progress_for


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the engine on a synthetic sequence, print the report")
    p.add_argument("--frames", type=positive_int, default=3000, help="frames to render")
    p.add_argument("--size", default="640x360", help="frame size WxH")
    add_run_options(p)
    p.set_defaults(run=run)


def render_frame(i: int, height: int, width: int) -> np.ndarray:
    """A moving gradient: frame ``i`` of the synthetic sequence."""
    x = (np.arange(width, dtype=np.uint16) + 4 * i) % 256
    y = np.arange(height, dtype=np.uint16)[:, None] % 256
    frame = np.empty((height, width, 3), np.uint8)
    frame[..., 0] = x
    frame[..., 1] = y
    frame[..., 2] = (x + y) // 2
    return frame


def run(args: argparse.Namespace) -> int:
    width, height = (int(v) for v in args.size.lower().split("x"))
    spec = FrameSpec((height, width, 3), np.uint8)
    checksum = 0

    def total(ids: np.ndarray, frames: np.ndarray) -> None:
        nonlocal checksum
        checksum = (checksum + int(frames[:, ::16, ::16].sum())) % 2**32

    pipeline = (
        Pipeline.from_generator(
            lambda i: render_frame(i, height, width),
            count=args.frames,
            spec=spec,
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
