"""What the commands share about their inputs: an image sequence's ``--rate``; and where
they take many, their options, the list of inputs that failed (in the report, in a
failures file, on stderr) and the exit code that says some did.

``map`` reads every input in one pipeline (``hf.VideoFiles``); ``transcode`` and ``info``
take them one after the other in this process (:func:`each`), one output per input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PARTIAL = 4
"""The exit code of a job over many inputs that finished without some of them (listed in
the report and the failures file)."""
READ_ERRORS = (OSError, ValueError, EOFError)
"""What an input that cannot be read raises (``MediaError`` is a ``ValueError``; PyAV's
errors are ``OSError``\\ s); anything else is a fault of the job and stops it."""


def add_many_options(p: argparse.ArgumentParser) -> None:
    """``--failures`` and ``--fail-fast``."""
    p.add_argument(
        "--failures", default=None, metavar="PATH",
        help="many inputs: where the ones that could not be read are listed (default: "
        "beside the output, OUTPUT.failures.jsonl)",
    )  # fmt: skip
    p.add_argument(
        "--fail-fast", action="store_true",
        help="many inputs: stop at the first that cannot be read (default: list it, go on)",
    )  # fmt: skip


def add_rate_option(p: argparse.ArgumentParser) -> None:
    """``--rate``: an image sequence's frame rate."""
    p.add_argument(
        "--rate", type=frame_rate, default=None, metavar="FPS",
        help="an image sequence's frames a second (24, 30000/1001; default 25); a video "
        "has its own",
    )  # fmt: skip


def frame_rate(text: str) -> str:
    """A rate as ``--rate`` takes it (``24``, ``29.97``, ``30000/1001``), checked."""
    from fractions import Fraction

    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        value = Fraction(0)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a rate is a number above 0 or A/B, got {text!r}")
    return text


def refuse_rate(rate: str | None) -> None:
    """``--rate`` is an image sequence's: many inputs are videos, each with its own."""
    if rate is not None:
        from .common import UsageError

        raise UsageError("--rate is an image sequence's; these inputs are videos, each with a "
                         "frame rate of its own: drop --rate")  # fmt: skip


def each(
    inputs: list[Any], run: Callable[[Any], dict[str, Any]], *, fail_fast: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``run(input)`` for every input in turn: what each finished one gave (with its path
    and seconds), and ``{"path", "reason"}`` of each that could not be read (with
    ``fail_fast`` the first such error is raised instead)."""
    done, failed = [], []
    for item in inputs:
        start = time.perf_counter()
        try:
            got = run(item)
        except READ_ERRORS as exc:
            if fail_fast:
                exc.add_note(f"in input {item.path!r}; drop --fail-fast to go on without it")
                raise
            failed.append({"path": item.path, "reason": _line(exc)})
            continue
        done.append({"path": item.path, **got, "seconds": round(time.perf_counter() - start, 3)})
    return done, failed


def publish_failures(
    failed: list[dict[str, Any]], given: str | None, beside: str | Path, *, total: int
) -> str | None:
    """Write ``failed`` to the failures file (``given``, else ``BESIDE.failures.jsonl``) and
    say so on stderr; where none failed, remove an earlier run's default file. Returns the
    file's path, if written."""
    from ..io.publish import write_output

    path = Path(given or f"{beside}.failures.jsonl")
    if not failed:
        if given is None and path.is_file():
            path.unlink()  # an earlier run's list, of inputs that now read
        return None
    write_output(path, "".join(json.dumps(f) + "\n" for f in failed), overwrite=True)
    print(f"hyperframes: {len(failed)} of {total} inputs could not be read; listed in {path}",
          file=sys.stderr)  # fmt: skip
    return str(path)


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
