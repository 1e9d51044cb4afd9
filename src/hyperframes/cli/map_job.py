"""``hyperframes map``: run a user's function or model over a video and keep its answers in a
results file (JSON Lines or Parquet), resumable after an interruption."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from .common import add_function_options, check_function_options, frame_size, positive_int
from .observe import add_long_options, workers_of
from .scale import add_chunk_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "map",
        help="run MODULE:FUNCTION (or a model class) on every frame, answers to a file",
        description="Run a function of a batch of frames (or a class with setup/__call__, "
        "made once per worker) over a video; one row per frame goes to --out (.jsonl or "
        ".parquet) as the run goes, and --resume continues an interrupted run.",
    )
    p.add_argument("input")
    p.add_argument("function", metavar="MODULE:NAME")
    p.add_argument("--out", required=True, help="results file: .jsonl or .parquet")
    p.add_argument("--size", type=frame_size, default=None, help="resize frames to WxH first")
    p.add_argument("--start", type=int, default=0, help="first frame index")
    p.add_argument("--stop", type=int, default=None, help="one past the last frame index")
    p.add_argument("--every", type=positive_int, default=1, help="only every K-th frame")
    add_function_options(p)
    p.add_argument("--resume", action="store_true", help="continue an interrupted run")
    p.add_argument("--overwrite", action="store_true", help="replace an existing results file")
    add_long_options(p, workers_help="threads (or processes, actors) running the function")
    add_chunk_options(p)
    p.set_defaults(run=run_map, reads=("input",), writes=("out",))


def answers_stage(
    pipeline: Any, *, fn: Any, workers: int, reuse_target: float | None, agree: str | None
) -> Any:
    """The map job's one stage: ``fn``'s answers into ``meta["value"]`` (a build function
    for chunked runs, importable by Ray workers)."""
    from ..models import Answers

    return pipeline.map(
        Answers(fn), into="value", workers=workers, reuse_target=reuse_target, agree=agree
    )


def run_map(args: argparse.Namespace) -> int:
    from .. import Pipeline
    from .._identity import code_identity
    from ..io.fingerprint import video_fingerprint
    from ..io.results import ResultsSink, format_of, parts_folder, resume_point
    from ..io.video import VideoSource
    from ..models import PerWorker, load
    from .common import UsageError, emit_report
    from .observe import observed
    from .scale import executor_for, ship_module_of

    if args.resume and args.overwrite:
        raise UsageError("pass either --resume (continue the rows) or --overwrite, not both")
    check_function_options(args)
    format_of(args.out)  # a suffix we write, before any work
    fn = load(args.function)
    out = Path(args.out)
    if args.resume and out.exists() and not parts_folder(out).exists():
        print(f"{args.out} is complete; nothing to resume")
        return 0
    build = functools.partial(
        answers_stage, fn=fn, workers=workers_of(args), reuse_target=args.reuse_target,
        agree=args.agree,
    )  # fmt: skip
    if args.chunks is not None:
        return _run_chunked(args, fn, build)
    job = {
        "input": video_fingerprint(args.input),
        "function": code_identity(fn),
        "options": {key: getattr(args, key) for key in
                    ("size", "start", "stop", "every", "reuse_target", "agree")},
    }  # fmt: skip
    start = args.start
    if args.resume:  # the next frame of the sampling the first run began
        done = resume_point(out)
        if done > start:
            start += -(-(done - start) // args.every) * args.every
    source = VideoSource(args.input, start=start, stop=args.stop, size=args.size, step=args.every)
    sink = ResultsSink(out, values=["value"], job=job, resume=args.resume,
                       overwrite=args.overwrite)  # fmt: skip
    executor = executor_for(args)
    ship_module_of(fn.cls if isinstance(fn, PerWorker) else fn, executor)
    pipeline = build(Pipeline.from_source(source, batch_size=args.batch_size)).to(sink)
    report, written = observed(
        args, "map", lambda bar, watch: pipeline.run(
            progress=bar, monitor=watch, memory=args.memory, executor=executor
        ),
    )  # fmt: skip
    emit_report(args, report, **written)
    return 0


def _run_chunked(args: argparse.Namespace, fn: Any, build: Any) -> int:
    """``map --chunks``: segments at keyframes as Ray tasks, their rows joined in order; a
    rerun of the same command redoes only the missing segments."""
    from ..chunked import run_chunked
    from ..models import PerWorker
    from .common import UsageError, emit_report
    from .observe import observed
    from .scale import ray_for_chunks, ship_module_of

    if args.resume:
        raise UsageError("a chunked run resumes when run again as it was; drop --resume")
    if args.every > 1:
        raise UsageError("--every does not combine with --chunks yet; drop one")
    executor = ray_for_chunks(args)
    ship_module_of(fn.cls if isinstance(fn, PerWorker) else fn, executor)
    report, written = observed(
        args, "map", lambda bar, watch: run_chunked(
            args.input, args.out, build, start=args.start, stop=args.stop,
            source_options={"size": args.size}, executor=executor,
            segments=args.chunks or None, batch_size=args.batch_size, memory=args.memory,
            overwrite=args.overwrite, progress=bar, monitor=watch,
        ),
    )  # fmt: skip
    emit_report(args, report, **written)
    return 0
