"""``hyperframes analyze``: adjacent-MSE statistics, hyperframes found, and whether they pay off."""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING, Any

from ..io.inputs import is_many
from .common import UsageError, positive_int, print_json, progress_for
from .many import (
    PARTIAL,
    add_file_timeout_option,
    add_rate_option,
    print_rows,
    rate_for,
    refuse_rate,
)
from .observe import add_long_options, observed
from .per_input import cluster_of, each, side_by_side
from .sampling import add_sampling_options, is_sampled, sampling_of
from .scale import executor_for
from .streams import frame_range

if TYPE_CHECKING:
    from ..engine.report import RunReport
    from ..io.inputs import Input


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="what hyperframes would do with a video, measured")
    p.add_argument("input", help="a video, an image sequence (a folder of images, "
                   "'frames/frame_%%04d.png', a quoted glob of images), or many videos (a "
                   "folder, a quoted glob, a manifest): a line each")  # fmt: skip
    add_rate_option(p)
    add_sampling_options(
        p, every_help="analyze every K-th frame (so --fps, --at, --num-frames, --keyframes)",
        keyframes_help="analyze only the key frames",
    )  # fmt: skip
    p.add_argument("--threshold", type=float, default=None, help="grouping threshold (MSE)")
    p.add_argument("--min-len", type=positive_int, default=None)
    p.add_argument("--max-len", type=positive_int, default=None)
    p.add_argument(
        "--samples", type=sample_count, default=12, metavar="N",
        help="hyperframes the size estimate samples, spread over the video: it encodes a few "
        "frames (a strip of their rows) of each, at most 16 MiB or 0.5%% of the video's bytes "
        "in all; 0 turns the estimate off (default: 12)",
    )  # fmt: skip
    p.add_argument("--plot", default=None, help="write the MSE timeline to this PNG")
    p.add_argument(
        "--overwrite", action="store_true", help="replace existing --plot, --report files"
    )
    add_file_timeout_option(p)
    add_long_options(p, workers_help=None)  # one grouping stage: nothing to give workers
    p.set_defaults(run=run, reads=("input",))


def sample_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a number of at least 0, got {value}; 0 turns the estimate off"
        )
    return value


def run(args: argparse.Namespace) -> int:
    if is_many(args.input):
        return analyze_many(args)
    data, lines = analysis(args, args.input)
    if args.json:
        print_json(data)
    else:
        print("\n".join(lines))
    return 0


def analyze_many(args: argparse.Namespace) -> int:
    """``analyze INPUTS``: a line per input (``--json``: an object a line), in path order;
    one that cannot be read says why, and the exit code is :data:`~.many.PARTIAL`."""
    from ..io.inputs import expand

    if args.plot:
        raise UsageError("--plot draws one input's timeline; drop it with many inputs")
    inputs = expand(args.input)
    refuse_rate(args.rate, inputs)
    if args.start or args.stop is not None:
        raise UsageError("--start/--stop take one input; drop them with many")

    workers, scale, observe = side_by_side(args.scale, args.observe)
    own = argparse.Namespace(**{**vars(args), "scale": scale, "observe": observe,
                                "memory": scale.memory})  # fmt: skip
    with cluster_of(args.scale) as ray:
        done, failed = each(inputs, functools.partial(analysis_of, own), fail_fast=False,
                            file_timeout=args.file_timeout, workers=workers, ray=ray,
                            bar=progress_for(args.observe, "analyze"))  # fmt: skip
    worth = {True: "pays off", False: "does not pay off", None: "not estimated"}
    print_rows(done, failed, lambda row: (
        f"{row['path']}  {row['frames']} frames -> {row['hyperframes']} hyperframes "
        f"(mean length {row['mean_length']:.1f}); a store {worth[row['worthwhile']]}"
    ), as_json=args.json)  # fmt: skip
    return PARTIAL if failed else 0


def analysis_of(args: argparse.Namespace, item: Input) -> dict[str, Any]:
    """One input of ``analyze INPUTS``: its figures."""
    own = argparse.Namespace(**{**vars(args), "rate": rate_for(args.rate, item.path)})
    return analysis(own, item.path)[0]


def analysis(args: argparse.Namespace, path: str) -> tuple[dict[str, Any], list[str]]:
    """Analyze ``path`` as the options say: the figures (as ``--json`` prints them) and
    the lines that say them."""
    from ..analysis import analyze, percent, plot_timeline
    from ..engine.sizing import default_budget
    from ..hyper.grouping.grouper import GroupingOptions
    from ..io.loop import Renumbered
    from ..io.sources import open_input
    from ..store.modes import estimate_modes
    from ..store.sink import plan_pack
    from .store import default_planes

    found: list[Any] = []

    # what a default pack does: the same frames (the decoder's planes where it keeps
    # them) and the same longest group (fitted to the memory budget)
    source: Any = open_input(path, pix_fmt=default_planes(path), rate=args.rate)
    if is_sampled(args) or args.start != 0 or args.stop is not None:
        first, stop = frame_range(path, args.start, args.stop, rate=args.rate)
        source.close()
        source = Renumbered(open_input(path, pix_fmt=default_planes(path), rate=args.rate,
                                       start=first, stop=stop, **sampling_of(args)))  # fmt: skip
    min_len = args.min_len if args.min_len is not None else GroupingOptions().min_len
    max_len = args.max_len or plan_pack(
        source.spec, args.memory or default_budget(), min_len=min_len,
        batch_size=args.batch_size, source=source.footprint(),
    ).max_len  # fmt: skip
    frames = source.info.get("layout", "rgb24")
    as_pack = f"as pack stores it by default: {frames} frames, hyperframes of at most {max_len}"

    def start(bar: Any, monitor: Any) -> RunReport:
        result, report = analyze(
            source, threshold=args.threshold, min_len=min_len, max_len=max_len,
            batch_size=args.batch_size, memory=args.memory, samples=args.samples,
            progress=bar, monitor=monitor, executor=executor_for(args.scale),
        )  # fmt: skip
        found.append(result)
        return report

    report, written = observed(args.observe, "analyze", start)
    result = found[0]
    modes = []
    if args.samples and frames != "rgb24":
        modes = estimate_modes(path, group_length=result.mean_length or None)
    if args.plot:
        plot_timeline(result, args.plot, overwrite=args.overwrite)
    data = {"path": path, **result.to_dict()}
    data.update(fps=report.fps, wall_s=report.wall_s, frames_as=frames, max_len=max_len,
                store_modes=[m.to_dict() for m in modes])  # fmt: skip
    data.update(written)
    mse = result.mse
    lines = [
        f"{result.frames} frames -> {result.hyperframes} hyperframes "
        f"(mean length {result.mean_length:.1f}, merge rate {percent(result.merge_rate)}) "
        f"at threshold {result.threshold:g}, {as_pack}",
        f"adjacent MSE: median {mse['median']:.3g}, p90 {mse['p90']:.3g}, max {mse['max']:.3g}",
    ]
    if result.worthwhile is None:
        lines.append("worthwhile: not estimated (--samples 0)")
    else:
        lines.append(f"worthwhile: {'yes' if result.worthwhile else 'no'}: {result.reason}")
    if modes:
        lines.append(describe_modes(modes))
    lines.append(f"recommended threshold: {result.recommended_threshold:.3g}")
    shown = ", ".join(map(str, result.boundaries[:20]))
    lines.append(f"boundaries: {shown}{' ...' if len(result.boundaries) > 20 else ''}")
    lines.append(f"{report.fps:.0f} frames/s")
    if args.plot:
        lines.append(f"plot: {args.plot}")
    return data, lines


def describe_modes(modes: list[Any]) -> str:
    """The store modes' estimates as lines, and which suits what."""
    from ..analysis import percent

    lines = ["store modes (pack --intra ..., estimated on a few frames of the planes):"]
    for m in modes:
        name = m.intra + (f" --gop {m.gop}" if m.gop else "")
        lines.append(
            f"  {name:<15} {percent(m.ratio):>6} of raw, a random frame ~{m.access_ms:.2g} ms "
            f"to decode, codes ~{m.pack_fps:.0f} frames/s"
        )
    small = min(modes, key=lambda m: m.ratio)
    fast = min(modes, key=lambda m: m.access_ms)
    lines.append(f"  smallest: --intra {small.intra}; fastest reads: --intra {fast.intra}")
    return "\n".join(lines)
