"""``hyperframes tune IN``: a short sweep of batch size x workers on the first frames of IN.

Every setting decodes the first ``--frames`` frames of the input, runs the ``--stage``
functions and encodes to a temporary file, ``--repeats`` times, rounds interleaved so a
change in machine load hits every setting alike. By rule (:data:`RULE`), settings within
the noise of the best median count as equal and the smallest wins; settings whose pools
would pass ``--memory`` are not run and say so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import frame_size, memory_size, positive_int, print_json
from .video import resize_stage

if TYPE_CHECKING:
    import numpy as np

    from .. import RunReport, VideoSource

RULE = (
    "median frames/s of the repeats (rounds interleaved); settings within max(tolerance, "
    "measured noise) of the best median are equal; fewest workers, then smallest batch, wins"
)
MAX_TOLERANCE = 0.2


@dataclass
class Result:
    """One setting of the sweep and what it measured."""

    batch_size: int
    workers: int
    pool_mib: float
    fps: list[float] = field(default_factory=list)
    bound: list[str] = field(default_factory=list)
    skipped: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.fps) if self.fps else 0.0

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats: this setting's noise."""
        return (max(self.fps) - min(self.fps)) / self.median if self.median else 0.0

    @property
    def bound_by(self) -> str:
        return Counter(self.bound).most_common(1)[0][0] if self.bound else ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(fps_median=round(self.median, 2), spread=round(self.spread, 4))
        out["bound_by"] = self.bound_by
        return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="sweep batch size x workers on a sample of a video")
    p.add_argument("input")
    p.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="STAGE",
        help="a stage to run: resize=WxH, blur, invert or MODULE:FUNCTION (repeatable)",
    )
    p.add_argument("--frames", type=positive_int, default=120, help="frames of the sample")
    p.add_argument("--batch-sizes", type=powers, default=None, help="e.g. 4,8,16")
    p.add_argument("--workers", type=counts, default=None, help="e.g. 1,2")
    p.add_argument("--repeats", type=positive_int, default=3, help="runs per setting")
    p.add_argument("--tolerance", type=float, default=0.05, help="speeds this close are equal")
    p.add_argument("--codec", default="libx264", help="encoder, or 'none' to skip encoding")
    p.add_argument("--preset", default="ultrafast", help="encoder preset (libx264/libx265)")
    p.add_argument("--memory", type=memory_size, default=None, metavar="SIZE",
                   help="each setting's pool budget, e.g. 512MiB (default: RAM / 4)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run, reads=("input",))


def powers(text: str) -> list[int]:
    values = counts(text)
    bad = [v for v in values if v & (v - 1) or v > 4096]
    if bad:
        raise argparse.ArgumentTypeError(
            f"batch sizes must be powers of two up to 4096, got {bad}; try 8,16,32"
        )
    return values


def counts(text: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,2,4, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers of at least 1, got {text!r}")
    return values


def stage_function(spec: str) -> Callable[[np.ndarray], Any]:
    """The function of one ``--stage``: a built-in name or ``MODULE:FUNCTION``."""
    import cv2
    import numpy as np

    if spec.startswith("resize="):
        width, height = frame_size(spec.partition("=")[2])
        fn: Callable[[np.ndarray], Any] = resize_stage(width, height)
        return fn
    if spec == "invert":
        return lambda frames: np.bitwise_not(frames, out=frames)
    if spec == "blur":

        def blur(frames: np.ndarray) -> np.ndarray:
            for frame in frames:
                cv2.GaussianBlur(frame, (7, 7), 0, dst=frame)
            return frames

        return blur
    if ":" in spec:
        from ..models import load

        return load(spec)
    raise ValueError(f"unknown --stage {spec!r}; use resize=WxH, blur, invert or MODULE:FUNCTION")


def default_grid(frames: int, stages: int) -> tuple[list[int], list[int]]:
    """Batch sizes 4..64 with at least four batches in the sample; workers 1, 2 and all CPUs."""
    sizes = [b for b in (4, 8, 16, 32, 64) if b * 4 <= frames] or [4]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = sorted({1, 2, min(cpus or 1, 8)}) if stages else [1]
    return sizes, workers


def choose(results: list[Result], tolerance: float) -> tuple[Result, float]:
    """The recommended setting by :data:`RULE`, and the tolerance used (pure)."""
    ran = [r for r in results if r.fps and not r.skipped]
    if not ran:
        raise ValueError("no setting could run; raise --memory or lower --batch-sizes")
    noise = statistics.median(r.spread for r in ran)
    used = min(MAX_TOLERANCE, max(tolerance, noise))
    best = max(r.median for r in ran)
    equal = [r for r in ran if r.median >= best * (1 - used)]
    return min(equal, key=lambda r: (r.workers, r.batch_size)), used


def effects(results: list[Result], pick: Result) -> dict[str, float | None]:
    """How much each knob mattered: best / worst median along it, the other held at ``pick``."""

    def ratio(rows: list[Result]) -> float | None:
        speeds = [r.median for r in rows if r.fps]
        return round(max(speeds) / min(speeds), 3) if len(speeds) > 1 and min(speeds) else None

    return {
        "batch_size": ratio([r for r in results if r.workers == pick.workers]),
        "workers": ratio([r for r in results if r.batch_size == pick.batch_size]),
    }


def bound_stage(report: RunReport, *, encoding: bool) -> str:
    """The stage with the most busy time per worker (decode and encode by those names)."""
    slowest = max(report.stages, key=lambda s: s.busy_per_worker_s)
    names = {"source": "decode", "sink": "encode" if encoding else "sink"}
    return names.get(slowest.name, slowest.name)


def run(args: argparse.Namespace) -> int:
    from .. import Pipeline, VideoSink, VideoSource
    from ..frames import FramePool

    functions = [(spec, stage_function(spec)) for spec in args.stage]
    probe = VideoSource(args.input, stop=args.frames)
    if not probe.length:
        raise ValueError(f"{args.input!r} has no frames to sample")
    frames = min(args.frames, probe.length)
    sizes, workers = default_grid(frames, len(functions))
    sizes, workers = args.batch_sizes or sizes, args.workers or workers
    if not functions:
        workers = [1]
    budget = args.memory / 2**20 if args.memory else _physical_mib() / 4
    results = []
    for b in sizes:
        for w in workers:
            slots = w * len(functions) + 3
            mib = FramePool.bytes_needed(probe.spec, b, slots) / 2**20
            skip = f"memory: {mib:.0f} MiB > {budget:.0f} MiB" if mib > budget else ""
            results.append(Result(b, w, round(mib, 1), skipped=skip))
    encoding = args.codec != "none"
    with tempfile.TemporaryDirectory(prefix="hf-tune-") as folder:

        def once(r: Result) -> RunReport:
            pipeline = Pipeline.from_source(
                VideoSource(args.input, stop=frames), batch_size=r.batch_size
            )
            for spec, fn in functions:
                pipeline = pipeline.map(fn, workers=r.workers, name=spec)
            if encoding:
                suffix = ".mkv" if args.codec == "ffv1" else ".mp4"
                preset = args.preset if args.codec in ("libx264", "libx265") else None
                sink = VideoSink(Path(folder) / f"tune{suffix}", codec=args.codec,
                                 preset=preset, overwrite=True)  # fmt: skip
                pipeline = pipeline.to(sink)
            return pipeline.run()

        runnable = [r for r in results if not r.skipped]
        if runnable:
            once(runnable[0])  # warm-up: file cache, codec start; not counted
        for _ in range(args.repeats):
            for r in runnable:
                report = once(r)
                r.fps.append(report.fps)
                r.bound.append(bound_stage(report, encoding=encoding))
    pick, used = choose(results, args.tolerance)
    out = _summary(args, frames, probe, results, pick, used, budget)
    _print(out, results, args.json)
    return 0


def _summary(
    args: argparse.Namespace,
    frames: int,
    probe: VideoSource,
    results: list[Result],
    pick: Result,
    used: float,
    budget: float,
) -> dict[str, Any]:
    reason = f"bound by {pick.bound_by}"
    larger = [
        r
        for r in results
        if r.skipped and r.workers == pick.workers and r.batch_size > pick.batch_size
    ]
    if larger:
        reason += (
            f"; memory: batch {min(r.batch_size for r in larger)} and up would need more "
            f"than {budget:.0f} MiB of pools (--memory)"
        )
    return {
        "input": str(args.input),
        "frames": frames,
        "frame": probe.spec.describe(),
        "stages": list(args.stage),
        "codec": args.codec,
        "repeats": args.repeats,
        "rule": RULE,
        "tolerance": round(used, 4),
        "results": [r.to_dict() for r in results],
        "recommendation": {
            "batch_size": pick.batch_size,
            "workers": pick.workers,
            "fps": round(pick.median, 2),
            "reason": reason,
        },
        "effects": effects(results, pick),
    }


def _print(out: dict[str, Any], results: list[Result], as_json: bool) -> None:
    if as_json:
        print_json(out)
        return
    stages = ", ".join(out["stages"]) or "none"
    print(
        f"tune {out['input']}: first {out['frames']} frames ({out['frame']}), stages: "
        f"{stages}, encode: {out['codec']}, {out['repeats']} runs per setting"
    )
    print(f"{'batch':>6}{'workers':>8}{'fr/s':>9}{'spread':>8}{'pool MiB':>10}  bound by")
    for r in results:
        tail = r.skipped or r.bound_by
        fps = f"{r.median:9.1f}{r.spread:8.1%}" if r.fps else f"{'-':>9}{'-':>8}"
        print(f"{r.batch_size:>6}{r.workers:>8}{fps}{r.pool_mib:>10.1f}  {tail}")
    rec, eff = out["recommendation"], out["effects"]
    print(
        f"recommendation: --batch-size {rec['batch_size']} --workers {rec['workers']} "
        f"({rec['fps']:.1f} frames/s): {rec['reason']}"
    )
    knobs = ", ".join(
        f"{knob} {value:.2f}x" if value else f"{knob} not swept" for knob, value in eff.items()
    )
    print(f"how much each knob mattered (best/worst median): {knobs}")
    print(f"rule: {out['rule']} (tolerance used: {out['tolerance']:.1%})")


def _physical_mib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):
        return 4096.0
