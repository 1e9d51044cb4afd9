"""``hyperframes map``: run a user's function or model over a video, or over many (a folder,
a glob, a manifest), and keep its answers in one results file (JSON Lines or Parquet),
resumable after an interruption; over many with ``--executor processes`` or ``ray``, runs of
whole inputs side by side.

Longer than 300 lines: the one-input, the many-input and the spread runs of one command
share its job record, its resume checks and its run under the options.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
from pathlib import Path
from typing import Any

from ..io.inputs import inputs_record, is_image_sequence, is_many, is_store
from .common import add_function_options, frame_size, reuse_of
from .many import (
    PARTIAL,
    Failures,
    add_many_options,
    add_rate_option,
    refuse_rate,
    resumed_order,
)
from .observe import add_long_options, workers_of
from .sampling import add_sampling_options, is_sampled, sampling_of, sampling_record
from .scale import add_chunk_options
from .streams import frame_range


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "map",
        help="run MODULE:FUNCTION (or a model class) on every frame, answers to a file",
        description="Run a function of a batch of frames (or a class with setup/__call__, "
        "made once per worker) over a video; one row per frame goes to --out (.jsonl or "
        ".parquet) as the run goes, and --resume continues an interrupted run.",
    )
    p.add_argument(
        "input", metavar="INPUT",
        help="a video, an image sequence (a folder of images, 'frames/frame_%%04d.png', a "
        "quoted glob of images), a store (its frames as stored), or many videos: a folder "
        "(searched below), a quoted glob ('clips/**/*.mp4') or a manifest (.txt, .csv, "
        ".jsonl, .parquet with a path column)",
    )  # fmt: skip
    p.add_argument("function", metavar="MODULE:NAME")
    p.add_argument("--out", required=True, help="results file: .jsonl or .parquet")
    p.add_argument("--size", type=frame_size, default=None, help="resize frames to WxH first")
    add_rate_option(p)
    add_sampling_options(
        p, every_help="only every K-th frame",
        keyframes_help="only the key frames, with their indices and times (the frames "
        "between are not decoded)",
    )  # fmt: skip
    p.add_argument(
        "--on-corrupt", choices=("fail", "skip"), default="fail",
        help="a frame that cannot be decoded: fail with its index, or skip it (no row)",
    )  # fmt: skip
    add_function_options(p)
    p.add_argument("--resume", action="store_true", help="continue an interrupted run")
    p.add_argument(
        "--add-new", action="store_true",
        help="with --resume over many inputs: take the inputs added since, after the others",
    )  # fmt: skip
    add_many_options(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing results file")
    add_long_options(p, workers_help="threads (or processes, actors) running the function; "
                     "over many inputs with --executor processes, the processes that read "
                     "them side by side (default: one a core)")  # fmt: skip
    add_chunk_options(p)
    p.set_defaults(run=run_map, reads=("input",), writes=("out", "failures"))


def answers_stage(pipeline: Any, *, fn: Any, workers: int, reuse: Any) -> Any:
    """The map job's one stage: ``fn``'s answers into ``meta["value"]`` (a build function
    for chunked runs, importable by Ray workers)."""
    from ..models import Answers

    return pipeline.map(Answers(fn), into="value", workers=workers, reuse=reuse)


def run_map(args: argparse.Namespace) -> int:
    from ..identity import code_identity
    from ..io.results import ResultsSink, format_of, has_parts
    from ..models import load
    from .common import UsageError, emit_report

    if args.resume and args.overwrite:
        raise UsageError("pass either --resume (continue the rows) or --overwrite, not both")
    if args.chunks is not None and is_sampled(args) and args.every == 1:
        raise UsageError("--keyframes, --fps, --at and --num-frames read in one process for "
                         "now; drop --chunks")  # fmt: skip
    reuse = reuse_of(args)
    format_of(args.out)  # a suffix we write, before any work
    fn = load(args.function)
    build = functools.partial(answers_stage, fn=fn, workers=workers_of(args.scale), reuse=reuse)
    if is_many(args.input):
        return _run_many(args, fn, build)
    if args.chunks is not None and is_store(args.input):
        raise UsageError("--chunks cuts a video at its keyframes; a store is read in one "
                         "process for now: drop --chunks")  # fmt: skip
    if args.chunks is not None:
        return _run_chunked(args, fn, build)
    open_input, input_fingerprint = _opener(args.input)
    keys = ("size", "start", "stop", "every", "on_corrupt", "reuse_target", "agree")
    job = {
        "input": input_fingerprint(args.input),
        "function": code_identity(fn),
        "options": {key: getattr(args, key) for key in keys}
        | _given(args, "rate", "colour")
        | sampling_record(args),
    }
    out = Path(args.out)
    if args.resume and out.exists() and not has_parts(out):
        return _finished(out, job)
    args.start, args.stop = frame_range(args.input, args.start, args.stop, rate=args.rate)
    options = {"size": args.size, "on_corrupt": args.on_corrupt, "rate": args.rate,
               "colour": args.colour} | sampling_of(args)  # fmt: skip
    source = _resumed_source(args, out, options, open_input) if args.resume else None
    if source is None:
        source = open_input(args.input, start=args.start, stop=args.stop, **options)
    sink = ResultsSink(out, values=["value"], job=job, resume=args.resume,
                       overwrite=args.overwrite)  # fmt: skip
    report, written = _answered(args, fn, build, source, sink)
    if args.resume and args.reuse_target is not None and source.start > args.start:
        report.extra.setdefault("sink", {})["resumed_from"] = source.start  # see the README
    emit_report(args.observe, report, **written)
    return 0


def _run_many(args: argparse.Namespace, fn: Any, build: Any) -> int:
    """``map INPUTS``: every input's rows in one results file, each row naming its input;
    an input that cannot be read is listed (the report, ``--failures``) and the job goes on
    (exit code :data:`PARTIAL`), or with ``--fail-fast`` stops. ``--resume`` continues a
    killed job at the input it was in, over the same inputs (``--add-new``: and those
    added since, after them)."""
    from .. import VideoFiles
    from ..identity import code_identity
    from ..io.inputs import expand
    from ..io.results import ResultsSink, has_parts, resume_state
    from .common import UsageError, emit_report

    for flag, given in (("--chunks", args.chunks is not None),
                        ("--reuse-target", args.reuse_target is not None),
                        ("--start/--stop", args.start != 0 or args.stop is not None)):  # fmt: skip
        if given:
            why = "a manifest's start and stop columns" if flag == "--start/--stop" else "one"
            raise UsageError(f"{flag} takes one input for now (many: use {why}); drop {flag}")
    out = Path(args.out)
    inputs, state = expand(args.input), None
    refuse_rate(args.rate, inputs)
    stored = next((i for i in inputs if is_store(i.path)), None)
    if stored is not None and is_sampled(args):
        raise UsageError(f"frames are chosen from videos or images, not stores yet: "
                         f"{stored.name!r} is a store; drop --every, --fps, --at, "
                         "--num-frames and --keyframes, or leave the stores out")  # fmt: skip
    spread = args.scale.executor in SPREAD
    recorded = recorded_inputs(out, spread=spread) if args.resume else None
    if recorded is not None:  # the interrupted job's inputs, in its order
        inputs = resumed_order(recorded, inputs, add_new=args.add_new)
        state = None if spread else resume_state(out)
    job = {
        "inputs": inputs_record(inputs),
        "function": code_identity(fn),
        "options": {key: getattr(args, key) for key in ("size", "every", "on_corrupt")}
        | _given(args, "colour", "rate")
        | sampling_record(args),
    }
    if args.resume and out.exists() and not has_parts(out):
        if args.add_new:
            raise UsageError(f"{str(out)!r} is complete; --add-new continues an unfinished job: "
                             "write the new inputs' rows to another --out")  # fmt: skip
        return _finished(out, job)
    if spread:
        return _run_spread(args, fn, build, inputs, out, job)
    at = state["input"] if state and "input" in state else 0
    kept = [f for f in Failures.read(args.failures, out) if f["path"] in
            {i.path for i in inputs[:at]}] if state else []  # fmt: skip
    failures = Failures(args.failures, out, kept)
    source = VideoFiles(
        inputs, size=args.size, on_corrupt=args.on_corrupt, colour=args.colour, rate=args.rate,
        on_error="fail" if args.fail_fast else "skip", on_failed=failures.add,
        file_timeout=args.file_timeout, **sampling_of(args),
    )  # fmt: skip
    if state and "input" in state:
        source.resume_after(state["input"], state["input_frame"], state["next"],
                            state.get("input_sample"))  # fmt: skip
    sink = ResultsSink(out, values=["value"], job=job, resume=args.resume,
                       overwrite=args.overwrite)  # fmt: skip
    report, written = _answered(args, fn, build, source, sink)
    listed = failures.publish([i.path for i in inputs], total=len(inputs))
    if listed:
        written["failures"] = listed
    emit_report(args.observe, report, **written)
    return PARTIAL if failures.entries else 0


SPREAD = ("processes", "ray")
"""The executors that spread a job over many inputs: runs of whole inputs side by side."""


def _run_spread(
    args: argparse.Namespace, fn: Any, build: Any, inputs: list[Any], out: Path,
    job: dict[str, Any],
) -> int:  # fmt: skip
    """``map INPUTS --executor processes|ray``: runs of whole inputs side by side, each
    read by a process (a Ray task) of its own into a part, the parts joined in order (a
    Parquet table records ``job``, so ``--resume`` finds it complete); a rerun with
    ``--resume`` makes only the runs not finished."""
    from ..chunked import run_files
    from ..models import PerWorker
    from .common import emit_report
    from .observe import observed
    from .scale import ray_executor, ship_module_of

    local = args.scale.executor == "processes"
    executor = None if local else ray_executor(args.scale.ray_address)
    if executor is not None:
        ship_module_of(fn.cls if isinstance(fn, PerWorker) else fn, executor)
    options = {"size": args.size, "on_corrupt": args.on_corrupt, "colour": args.colour,
               "rate": args.rate, "on_error": "fail" if args.fail_fast else "skip",
               "file_timeout": args.file_timeout} | sampling_of(args)  # fmt: skip
    report, written = observed(
        args.observe, "map", lambda bar, watch: run_files(
            inputs, out, build, source_options=options, record=job,
            executor="processes" if local else executor, workers=args.scale.workers,
            batch_size=args.batch_size, memory=args.memory, resume=args.resume,
            overwrite=args.overwrite, progress=bar, monitor=watch,
        ),
    )  # fmt: skip
    failures = Failures(args.failures, out, [])
    for failure in report.extra["source"]["failed"]:
        failures.add(failure)
    listed = failures.publish([i.path for i in inputs], total=len(inputs))
    if listed:
        written["failures"] = listed
    emit_report(args.observe, report, **written)
    return PARTIAL if failures.entries else 0


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options among ``names`` that differ from what runs made before they existed
    used: a job records them only then, so those runs' records resume as they were (one
    made before FFmpeg's colour was the default is refused now unless ``--colour fast``
    asks for the colour it began with)."""
    before = {"rate": None, "colour": "fast"}
    return {n: getattr(args, n) for n in names if getattr(args, n) != before[n]}


def recorded_inputs(out: Path, *, spread: bool) -> list[dict[str, Any]] | None:
    """The inputs an interrupted job over many recorded, in one process or ``spread``
    side by side (``None``: no such job left)."""
    from ..io.results import JOB_FILE, parts_folder
    from ..segments import kept_job

    if spread:
        recorded = (kept_job(out) or {}).get("inputs")
        return recorded if isinstance(recorded, list) else None
    try:
        recorded = json.loads((parts_folder(out) / JOB_FILE).read_text()).get("inputs")
    except (OSError, ValueError, AttributeError):
        return None
    return recorded if isinstance(recorded, list) else None


def _answered(args: argparse.Namespace, fn: Any, build: Any, source: Any, sink: Any) -> Any:
    """Run ``fn``'s answers from ``source`` into ``sink`` under the executor, the bar and
    the monitors the options ask for; the report and what was written where."""
    from .. import Pipeline
    from ..models import PerWorker
    from .observe import observed
    from .scale import executor_for, ship_module_of

    executor = executor_for(args.scale)
    ship_module_of(fn.cls if isinstance(fn, PerWorker) else fn, executor)
    pipeline = build(Pipeline.from_source(source, batch_size=args.batch_size)).to(sink)
    return observed(
        args.observe, "map", lambda bar, watch: pipeline.run(
            progress=bar, monitor=watch, memory=args.memory, executor=executor
        ),
    )  # fmt: skip


def _opener(path: str) -> tuple[Any, Any]:
    """How the input at ``path`` is opened and identified: a store as it was stored
    (``hyperframes.store.as_input``), else a video or an image sequence."""
    if is_store(path):
        from ..store.as_input import open_store, store_fingerprint

        return open_store, store_fingerprint
    from ..io.fingerprint import input_fingerprint
    from ..io.sources import open_input

    return open_input, input_fingerprint


def _resumed_source(
    args: argparse.Namespace, out: Path, options: dict[str, Any], open_input: Any
) -> Any:
    """The frames an interrupted run left to do: from the next frame of the sampling it
    began, or none at all where its rows all reached the file (only the join is left)."""
    from ..io.results import resume_point, rows_done

    done = resume_point(out)
    if is_sampled(args):  # the same choice of frames, from the sample after the last row
        sampled = open_input(args.input, start=args.start, stop=args.stop, **options)
        sampled.resume_from(2**62 if rows_done(out) else done)
        return sampled
    if done <= args.start:
        return None
    whole = open_input(args.input, start=args.start, stop=args.stop, **options)
    planned_end = None if whole.length is None else args.start + whole.length
    whole.close()
    if rows_done(out) or (planned_end is not None and done >= planned_end):
        return open_input(args.input, start=args.start, stop=args.start, **options)
    return open_input(args.input, start=done, stop=args.stop, **options)


def _finished(out: Path, job: dict[str, Any]) -> int:
    """``--resume`` on a finished results file: nothing to do when it is this job's, else
    refused (a JSON Lines file keeps no record of its job, so it cannot be vouched for)."""
    from ..io.results import ResumeRefused, job_of, parts_folder, published_job

    recorded = job_of(out) or published_job(out)
    if recorded is None:
        raise ResumeRefused(
            f"{str(out)!r} is already complete and keeps no record of the job that made it "
            "(a .jsonl file cannot); to compute it again pass --overwrite, or choose "
            "another --out"
        )
    mine = {"format": recorded.get("format"), **job}
    if json.loads(json.dumps(mine, default=str)) != recorded:
        raise ResumeRefused(
            f"{str(out)!r} is already complete, made by another job (input, function or "
            "options differ); to replace it pass --overwrite, or choose another --out"
        )
    shutil.rmtree(parts_folder(out), ignore_errors=True)  # a join killed after it published
    print(f"{out} is complete; nothing to resume")
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
    if is_image_sequence(args.input):
        raise UsageError("--chunks cuts a video at its keyframes, not images; drop --chunks")
    if args.every > 1:
        raise UsageError("--every does not combine with --chunks yet; drop one")
    args.start, args.stop = frame_range(args.input, args.start, args.stop)
    executor = ray_for_chunks(args.scale)
    ship_module_of(fn.cls if isinstance(fn, PerWorker) else fn, executor)
    report, written = observed(
        args.observe, "map", lambda bar, watch: run_chunked(
            args.input, args.out, build, start=args.start, stop=args.stop,
            source_options={"size": args.size, "colour": args.colour}, executor=executor,
            segments=args.chunks or None, batch_size=args.batch_size, memory=args.memory,
            overwrite=args.overwrite, progress=bar, monitor=watch,
        ),
    )  # fmt: skip
    emit_report(args.observe, report, **written)
    return 0
