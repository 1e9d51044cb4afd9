"""The options that choose which frames a command reads: ``--start``/``--stop`` (indices or
times) and at most one of ``--every``, ``--keyframes``, ``--fps``, ``--at`` and
``--num-frames`` (:class:`~hyperframes.io.sampling.Sampling` says what each gives)."""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path
from typing import Any

from .common import UsageError, position, positive_int

DEFAULTS: dict[str, Any] = {"every": 1, "keyframes": False, "fps": None, "at": None,
                            "num_frames": None}  # fmt: skip


def frames_a_second(text: str) -> str:
    """``--fps``: a positive number (``1``, ``0.5``, ``29.97``, ``30000/1001``)."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        value = Fraction(-1)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected frames a second above 0 (1, 0.5), got {text!r}")
    return text


def add_sampling_options(
    p: argparse.ArgumentParser, *, every_help: str, keyframes_help: str
) -> None:
    """``--start``, ``--stop`` and the five ways of choosing frames (one at a time)."""
    p.add_argument(
        "--start", type=position, default=0,
        help="the first frame: an index (120), seconds (4.5s) or [HH:]MM:SS.mmm",
    )  # fmt: skip
    p.add_argument(
        "--stop", type=position, default=None, help="where to stop (not included), as --start"
    )
    # (one at a time, checked by sampling_of: argparse's usage line of a group of five
    # would not fit 80 columns)
    p.add_argument("--every", type=positive_int, default=1, metavar="K", help=every_help)
    p.add_argument("--keyframes", action="store_true", help=keyframes_help)
    p.add_argument(
        "--fps", type=frames_a_second, default=None, metavar="R",
        help="one frame per 1/R seconds: the frame played at each instant (the frames "
        "between are decoded only as far as those need)",
    )  # fmt: skip
    p.add_argument(
        "--at", default=None, metavar="FILE",
        help="the frames played at the times in FILE (seconds or [HH:]MM:SS.mmm, one a "
        "line), in its order; a manifest's at column gives each input its own",
    )  # fmt: skip
    p.add_argument(
        "--num-frames", type=positive_int, default=None, metavar="N",
        help="N frames spread evenly over the input (or --start/--stop, or each manifest "
        "row's start/stop)",
    )  # fmt: skip


def sampling_of(args: Any) -> dict[str, Any]:
    """The sources' keywords for the frames chosen (``step``, ``keyframes``, ``fps``,
    ``at``, ``num_frames``), the ``--at`` file read; ``args`` holds the options (the
    command line's, or a job read from them).

    Raises:
        UsageError: more than one way of choosing frames, or ``--at``'s file is missing or
            holds something other than times.
    """
    from ..io.sampling import read_times

    given = [flag for flag, key in (("--every", "every"), ("--keyframes", "keyframes"),
             ("--fps", "fps"), ("--at", "at"), ("--num-frames", "num_frames"))
             if getattr(args, key) != DEFAULTS[key]]  # fmt: skip
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} each choose the frames; pass one of them")
    options: dict[str, Any] = {"step": args.every}
    if args.keyframes:
        options["keyframes"] = True
    if args.fps is not None:
        options["fps"] = args.fps
    if args.num_frames is not None:
        options["num_frames"] = args.num_frames
    if args.at is not None:
        if args.start != 0 or args.stop is not None:
            raise UsageError("--at names its frames by time; drop --start/--stop")
        try:
            lines = Path(args.at).read_text().splitlines()
        except OSError as exc:
            raise UsageError(f"--at {args.at!r} cannot be read ({exc.strerror}); name a file "
                             "of times, one a line") from None  # fmt: skip
        try:
            options["at"] = read_times(lines, repr(args.at))
        except ValueError as exc:
            raise UsageError(f"--at {exc}") from None
    return options


def sampling_record(args: argparse.Namespace) -> dict[str, Any]:
    """The choices given other than as their defaults, as a job records them (the times
    of ``--at`` themselves, so a changed file is another job)."""
    record = {key: getattr(args, key) for key in ("keyframes", "fps", "num_frames")
              if getattr(args, key) != DEFAULTS[key]}  # fmt: skip
    if args.at is not None:
        record["at"] = [str(t) for t in sampling_of(args)["at"]]
    return record


def is_sampled(args: argparse.Namespace) -> bool:
    """Whether frames are chosen (resumed by sample, not by start)."""
    return (
        args.every > 1
        or args.keyframes
        or any(getattr(args, key) is not None for key in ("fps", "at", "num_frames"))
    )
