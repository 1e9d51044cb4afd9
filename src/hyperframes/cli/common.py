"""What every command shares: JSON output, error lines, the progress bar, number parsing.

Building the parser imports this module, so what only a run needs (the frame pool's
checks, the progress bar) is imported in the function that uses it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..io.positions import Seconds, parse_position

if TYPE_CHECKING:
    from .. import RunReport
    from ..metrics.progress import ProgressBar
    from .options import Observe


class UsageError(ValueError):
    """Options that do not go together: one line on stderr and exit code 2, as argparse's
    own usage errors (the line says which option to drop or add)."""


def add_function_options(p: argparse.ArgumentParser) -> None:
    """The options of commands that run a user's function: how answers may be shared."""
    p.add_argument(
        "--reuse-target", type=float, default=None, metavar="T",
        help="share answers between similar frames while agreeing with the function's own "
        "on this share of frames (e.g. 0.95), checked on a sample computed anyway",
    )  # fmt: skip
    p.add_argument(
        "--agree", default=None,
        help="how answers compare for --reuse-target: equal, boxes[:IOU], count, psnr[:DB]",
    )  # fmt: skip
    p.add_argument(
        "--colour", choices=("ffmpeg", "fast"), default="ffmpeg",
        help="a video's RGB: ffmpeg (FFmpeg's own, bit for bit, as PyAV and torchcodec give "
        "it; the default) or fast (OpenCV; within 1-3 levels of FFmpeg's)",
    )  # fmt: skip


def reuse_of(args: argparse.Namespace) -> Any:
    """The ``ReuseTarget`` of ``--reuse-target``/``--agree`` (``--agree`` alone is refused)."""
    if args.agree is not None and args.reuse_target is None:
        raise UsageError("--agree says how answers compare for --reuse-target; add it")
    from ..modes import ReuseTarget

    return None if args.reuse_target is None else ReuseTarget(args.reuse_target, args.agree)


def fail(exc: BaseException, flags: Collection[str] = ()) -> int:
    """Print ``exc`` as one line on stderr (its notes after a semicolon) and return 1.

    Library messages name Python arguments (``pass overwrite=True``); where the command
    has a flag of that name, the line names the flag instead (``pass --overwrite``). An
    exception whose text cannot be made, or runs over lines, still gives one line; a
    traceback that crossed from a worker process stays for ``--debug``.
    """
    message = _first_line(exc) or type(exc).__name__
    notes = [
        line
        for note in getattr(exc, "__notes__", None) or []
        if not str(note).startswith(REMOTE_TRACEBACK) and (line := _first_line(note))
    ]
    where = f" ({'; '.join(notes)})" if notes else ""
    line = as_flags(f"{message}{where}", flags)
    print(f"hyperframes: error: {line}", file=sys.stderr)
    return 1


REMOTE_TRACEBACK = "traceback in "
"""How a note carrying a worker's traceback begins (:mod:`..executors._wire`)."""


def _first_line(value: object) -> str:
    """The first line of ``str(value)`` with text on it ("" when there is none, or when
    ``str`` itself fails: the exception's type names it then)."""
    try:
        text = str(value)
    except Exception:
        return f"{type(value).__name__} (its message could not be shown)"
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


_VALUE = r"True|False|None|'[^']*'|\"[^\"]*\"|-?[0-9][0-9.]*|\([^)]*\)|[A-Za-z_][\w.-]*"
_KEYWORD = re.compile(rf"\b([a-z][a-z0-9_]*)=({_VALUE})?(?!\w)")


def as_flags(message: str, flags: Collection[str]) -> str:
    """``message`` with each ``name=value`` that is a flag of the command written as the flag:
    ``overwrite=True`` -> ``--overwrite``, ``pix_fmt='yuv444p'`` or ``pix_fmt=yuv444p`` ->
    ``--pix-fmt yuv444p``, ``batch_size=`` -> ``--batch-size``; other text is kept."""

    def flag(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        option = "--" + name.replace("_", "-")
        if option not in flags:
            return match.group(0)
        if value in (None, "True"):
            return option
        if value[:1] in "'\"":
            return f"{option} {value[1:-1]}"
        if value.startswith("("):  # (640, 360) -> 640x360; (width, height) -> WxH
            parts = [v.strip() for v in value[1:-1].split(",")]
            named = all(v.isidentifier() for v in parts)
            return f"{option} {'x'.join(v[0].upper() if named else v for v in parts)}"
        return f"{option} {value}"

    text = _KEYWORD.sub(flag, message)
    # a keyword the command has no flag for, with what to do on the command line beside it
    text = re.sub(
        r"(?:pass )?[a-z_]+=[^ ()]+ \(((?:drop|pass) (--[a-z][a-z-]*)[^()]*)\)",
        lambda m: m.group(1) if m.group(2) in flags else m.group(0),
        text,
    )
    text = re.sub(r"(--[a-z-]+(?: [^ ()]+)?) \(\1(?: on the command line)?\)", r"\1", text)
    if flags:  # a hint at a flag this command does not have goes: it would mislead
        text = re.sub(
            r" \((--[a-z][a-z-]*)[^()]*\)",
            lambda m: m.group(0) if m.group(1) in flags else "",
            text,
        )
    return text


def add_sizing_options(parser: argparse.ArgumentParser) -> None:
    """``--batch-size`` and ``--memory``: how a run's pools are sized."""
    parser.add_argument(
        "--batch-size", type=batch_size, default=None,
        help="frames per batch (a power of two; default: chosen from the frames' size)",
    )  # fmt: skip
    parser.add_argument(
        "--memory", type=memory_size, default=None, metavar="SIZE",
        help="memory budget for the run's frame pools and decoder, e.g. 512MiB or 2GB "
        "(default: the smaller of 1 GiB and a quarter of the memory available)",
    )  # fmt: skip


def memory_size(text: str) -> int:
    from ..engine.sizing import parse_memory

    try:
        return parse_memory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("memory must", "--memory must")) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def position(text: str) -> int | Seconds:
    """``--start``/``--stop``: a frame index (``120``) or a time in seconds (``4.5s``) or
    ``[HH:]MM:SS[.mmm]`` (:func:`~hyperframes.io.positions.parse_position`)."""
    try:
        return parse_position(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def worker_count(text: str) -> int:
    """``--workers``: a positive whole number no larger than 4 x the CPUs this process may
    use (more only thrashes: 1000 workers on 2 CPUs ran a load of 36 and stalled)."""
    value = positive_int(text)
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    bound = 4 * cpus
    if value > bound:
        raise argparse.ArgumentTypeError(
            f"{value} is more than 4 x the {cpus} CPUs here ({bound}); try {cpus} or {2 * cpus}"
        )
    return value


MAX_SIDE = 16384
"""The longest side ``--size`` takes: FFmpeg refuses larger frames, after the pools exist."""


def frame_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WxH like 1280x720, got {text!r}") from None
    if width < 1 or height < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    if max(width, height) > MAX_SIDE:
        raise argparse.ArgumentTypeError(
            f"size must be at most {MAX_SIDE} pixels a side (FFmpeg's limit), got {text!r}"
        )
    return width, height


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"port must be between 0 and 65535, got {value}; 0 picks a free port"
        )
    return value


def batch_size(text: str) -> int:
    from ..frames import check_batch_size

    try:
        return check_batch_size(int(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def progress_for(observe: Observe, label: str) -> ProgressBar:
    from ..metrics.progress import ProgressBar

    return ProgressBar(label=label, enabled=False if observe.json else None)


_REPORT_STREAM: list[TextIO] = []
"""Where :func:`emit_report` writes while :func:`stdout_fenced` holds the real stdout."""


@contextlib.contextmanager
def stdout_fenced(enabled: bool) -> Iterator[None]:
    """While the command runs, what anything else prints to stdout (the user's function,
    a library, a worker process) goes to stderr, so that ``--json`` output stays JSON:
    only :func:`emit_report` writes to the real stdout."""
    if not enabled:
        yield
        return
    original = sys.stdout
    original.flush()
    try:
        fd, err = original.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        fd = err = None  # streams of Python's own (a test's capture): swapping is enough
    saved = None
    if fd is not None and err is not None:
        saved = os.dup(fd)
        os.dup2(err, fd)
        report: TextIO = os.fdopen(os.dup(saved), "w", encoding="utf-8")
    else:
        report = original
    _REPORT_STREAM.append(report)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = original
        _REPORT_STREAM.pop()
        if saved is not None and fd is not None:
            with contextlib.suppress(OSError):
                report.close()
            os.dup2(saved, fd)
            os.close(saved)


def print_json(data: Any) -> None:
    """``data`` as one line of JSON on the real stdout (see :func:`stdout_fenced`)."""
    out = _REPORT_STREAM[-1] if _REPORT_STREAM else sys.stdout
    print(json.dumps(data, default=str), file=out, flush=True)


def emit_report(observe: Observe, report: RunReport, /, **extra: Any) -> None:
    """Print the run report: JSON on stdout with ``--json``, else the table."""
    if observe.json:
        data = report.to_dict()
        data.update(extra)
        print_json(data)
    else:
        print(report)
        for key, value in extra.items():
            print(f"{key}: {value}")
