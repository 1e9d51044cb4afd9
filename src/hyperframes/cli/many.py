"""What the commands share about their inputs: an image sequence's ``--rate``; and where
they take many, their options, the list of inputs that failed (in the report, in a
failures file, on stderr) and the exit code that says some did.

``map`` reads every input in one pipeline (``hf.VideoFiles``); ``transcode`` and ``info``
take them one after the other in this process (:func:`each`), one output per input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..io.inputs import inputs_record

PARTIAL = 4
"""The exit code of a job over many inputs that finished without some of them (listed in
the report and the failures file)."""
READ_ERRORS = (OSError, ValueError, EOFError)
"""What an input that cannot be read raises (``MediaError`` is a ``ValueError``; PyAV's
errors are ``OSError``\\ s); anything else is a fault of the job and stops it."""


def add_many_options(p: argparse.ArgumentParser) -> None:
    """``--failures``, ``--fail-fast`` and ``--file-timeout``."""
    p.add_argument(
        "--failures", default=None, metavar="PATH",
        help="many inputs: where the ones that failed (could not be read, or the function "
        "failed on them) are listed (default: beside the output, OUTPUT.failures.jsonl)",
    )  # fmt: skip
    p.add_argument(
        "--fail-fast", action="store_true",
        help="many inputs: stop at the first that fails (default: list it, go on)",
    )  # fmt: skip
    add_file_timeout_option(p)


FILE_TIMEOUT_S = 600.0
"""``--file-timeout``'s default: ten minutes without a frame from one input."""


def add_file_timeout_option(p: argparse.ArgumentParser) -> None:
    """``--file-timeout``: each input read in a child process, stopped where it hangs."""
    p.add_argument(
        "--file-timeout", type=seconds, default=FILE_TIMEOUT_S, metavar="S",
        help="many inputs: read each in a child process, and stop and list one that gives "
        "nothing for S seconds (a stalled mount, a decoder crash); 0: read them in this "
        f"process, with no limit (default {FILE_TIMEOUT_S:g})",
    )  # fmt: skip


def seconds(text: str) -> float | None:
    """A time limit as ``--file-timeout`` takes it, in seconds (``0``: none), checked."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds, 0 or more (60, 2.5), got {text!r}")
    return value or None


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


def refuse_rate(rate: str | None, inputs: list[Any]) -> None:
    """``--rate`` is an image sequence's: refused where every input is a video."""
    from ..io.inputs import is_image_sequence

    if rate is not None and not any(is_image_sequence(i.path) for i in inputs):
        from .common import UsageError

        raise UsageError("--rate is an image sequence's; these inputs are videos, each with a "
                         "frame rate of its own: drop --rate")  # fmt: skip


def rate_for(rate: str | None, path: str) -> str | None:
    """``--rate`` for the input at ``path``: an image sequence's, none for a video."""
    from ..io.inputs import is_image_sequence

    return rate if is_image_sequence(path) else None


class Failures:
    """The inputs of a job that failed: appended to the failures file (``given``,
    else ``BESIDE.failures.jsonl``) as the job goes, so a killed job's file says which
    failed before it stopped; :meth:`publish` writes the whole list in input order.

    ``kept``: a resumed job's, from before the input it resumes at (the file is written
    again with them alone); a new job removes an earlier job's default file."""

    def __init__(self, given: str | None, beside: str | Path, kept: list[dict[str, Any]]) -> None:
        from ..io.publish import write_output

        self.given, self.beside = given, beside
        self.path = failures_path(given, beside)
        self.entries = list(kept)
        if self.entries:
            write_output(self.path, "".join(json.dumps(f) + "\n" for f in kept), overwrite=True)
        elif given is None:
            self.path.unlink(missing_ok=True)

    @staticmethod
    def read(given: str | None, beside: str | Path) -> list[dict[str, Any]]:
        """The entries a failures file holds ([] when there is none)."""
        path = failures_path(given, beside)
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def add(self, failure: dict[str, Any]) -> None:
        """Note one more, on disk at once."""
        self.entries.append(failure)
        with open(self.path, "a") as f:
            f.write(json.dumps(failure) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def publish(self, order: list[str], *, total: int) -> str | None:
        """The whole list (each input once: a path, with its range where a manifest gives
        one; in ``order``, the inputs' paths), published; see :func:`publish_failures`."""
        place = {path: k for k, path in reversed(list(enumerate(order)))}
        once = {(f["path"], f.get("start"), f.get("stop")): f for f in reversed(self.entries)}
        listed = sorted(reversed(once.values()), key=lambda f: place.get(f["path"], len(order)))
        return publish_failures(listed, self.given, self.beside, total=total)


def resumed_order(recorded: list[dict[str, Any]], inputs: list[Any], *, add_new: bool) -> list[Any]:
    """The inputs of a resumed job, in the order its rows were written (those of
    ``recorded``), then with ``add_new`` the ones added since, sorted.

    Raises:
        ResumeRefused: inputs gone or changed since, or added without ``add_new``; the
            line names them.
    """
    from ..io.results import ResumeRefused

    now = {_key(r): (item, r) for item, r in zip(inputs, inputs_record(inputs), strict=True)}
    then = {_key(r): r for r in recorded}
    gone = [r for key, r in then.items() if key not in now]
    changed = [r for key, r in then.items() if key in now and now[key][1]["bytes"] != r["bytes"]]
    added = [item for key, (item, _) in now.items() if key not in then]
    kinds = (("gone", gone), ("changed", changed), ("added", [] if add_new else added))
    found = [(word, rows) for word, rows in kinds if rows]
    if found:
        what = "; ".join(f"{len(rows)} {word} ({_names(rows)})" for word, rows in found)
        more = (
            ", or --add-new to take the added ones after the others"
            if not (gone or changed)
            else ""
        )
        raise ResumeRefused(
            f"the inputs differ from those of the interrupted job: {what}; resume with the "
            f"same inputs{more}, or pass --overwrite to start again"
        )
    return [now[_key(r)][0] for r in recorded] + added


def _key(record: Any) -> tuple[Any, ...]:
    get = record.get if isinstance(record, dict) else lambda name: getattr(record, name)
    return (get("path"), get("start"), get("stop"))


def _names(rows: list[Any], most: int = 3) -> str:
    paths = [row["path"] if isinstance(row, dict) else row.path for row in rows]
    names = ", ".join(os.path.basename(p) for p in paths[:most])
    return names + (", ..." if len(paths) > most else "")


def failures_path(given: str | None, beside: str | Path) -> Path:
    """The failures file: ``--failures``, else ``BESIDE.failures.jsonl``."""
    return Path(given or f"{beside}.failures.jsonl")


def print_rows(
    done: list[dict[str, Any]],
    failed: list[dict[str, Any]],
    line: Callable[[dict[str, Any]], str],
    *,
    as_json: bool,
) -> None:
    """A row per input, in path order: ``--json`` an object a line, else ``line(row)``, or
    for an input that could not be read its path and why (its ``error``)."""
    from .common import print_json

    rows = sorted([*done, *({**f, "error": f.pop("reason")} for f in failed)],
                  key=lambda row: row["path"])  # fmt: skip
    for row in rows:
        if as_json:
            print_json(row)
        elif "error" in row:
            print(f"{row['path']}  cannot be read: {row['error']}")
        else:
            print(line(row))


def publish_failures(
    failed: list[dict[str, Any]], given: str | None, beside: str | Path, *, total: int
) -> str | None:
    """Write ``failed`` to the failures file (``given``, else ``BESIDE.failures.jsonl``) and
    say so on stderr; where none failed, remove an earlier run's default file. Returns the
    file's path, if written."""
    from ..io.publish import write_output

    path = failures_path(given, beside)
    if not failed:
        if given is None and path.is_file():
            path.unlink()  # an earlier run's list, of inputs that now read
        return None
    write_output(path, "".join(json.dumps(f) + "\n" for f in failed), overwrite=True)
    print(f"hyperframes: {len(failed)} of {total} inputs failed; listed with why in {path}",
          file=sys.stderr)  # fmt: skip
    return str(path)


def first_line(exc: BaseException) -> str:
    """The first line of what ``exc`` says (its type's name where it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
