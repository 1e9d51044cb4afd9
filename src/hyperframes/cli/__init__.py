"""The ``hyperframes`` command: one subcommand module per job, calling only the public API.

Errors become one line on stderr and exit code 1 (2 for usage errors: argparse's, and
options that do not go together, :class:`~.common.UsageError`); ``--debug`` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

from .._version import __version__
from ..errors import as_run_error
from . import analyze, bench, demo, doctor, map_job, render, store, tune, video, view
from .common import UsageError, as_flags, fail, stdout_fenced
from .options import parse_groups
from .paths import absolute_paths, check_paths

COMMANDS = (demo, video, render, map_job, analyze, store, view, tune, bench, doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperframes",
        description="Flat-memory, every-core pipelines for very long frame sequences.",
    )
    parser.add_argument("--version", action="version", version=f"hyperframes {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        absolute_paths(args)
        parse_groups(args)
        with signals_interrupt(), stdout_fenced(args.observe.json):
            check_paths(args)
            result: int = args.run(args)
            sys.stdout.flush()  # a closed pipe shows here, while it can still be handled
        return result
    except KeyboardInterrupt as exc:
        return interrupted(exc, flags_of(parser, args.command))
    except BrokenPipeError:
        # `hyperframes info X | head`: the reader has what it wanted; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (Exception, SystemExit) as exc:  # a SystemExit here came from user code
        if args.debug:
            raise
        if (stop := interrupt_behind(exc)) is not None:  # Ctrl-C cut a clean-up short
            return interrupted(stop, flags_of(parser, args.command))
        error = as_run_error(exc, main_thread=True)
        code = fail(error, flags=flags_of(parser, args.command))
        return 2 if isinstance(exc, UsageError) else code
    except BaseException as exc:  # another BaseException of the user's: one line too
        if args.debug:
            raise
        return fail(as_run_error(exc, main_thread=True), flags=flags_of(parser, args.command))


def interrupted(exc: KeyboardInterrupt, flags: set[str]) -> int:
    """Say that the command was interrupted (and what a rerun keeps); 128 + the signal."""
    signum = getattr(exc, "signum", signal.SIGINT)
    kept = getattr(exc, "kept", "")  # what a rerun can continue from
    note = f"; {as_flags(kept, flags)}" if kept else ""
    print(f"hyperframes: interrupted ({signal.Signals(signum).name}){note}", file=sys.stderr)
    return 128 + signum


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` (Ctrl-C, SIGTERM, SIGHUP) during whose handling ``exc``
    was raised, if any: a signal that lands inside a library's clean-up (a lock released
    twice) surfaces as that library's error, and is the interrupt all the same."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__context__  # type: ignore[assignment]
    return None


def run() -> None:
    """The ``hyperframes`` command: :func:`main`, then exit with its code (at once when a
    Ray cluster was joined: see :func:`~hyperframes.executors.ray.leave_quickly`)."""
    code = main()
    if "ray" in sys.modules:
        from ..executors.ray import leave_quickly

        leave_quickly(code)
    sys.exit(code)


def flags_of(parser: argparse.ArgumentParser, command: str) -> set[str]:
    """Every option string of ``command`` (``{"--overwrite", "--json", ...}``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return {o for a in action.choices[command]._actions for o in a.option_strings}
    return set()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every clean-up path runs for them too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_STOPS = (signal.SIGTERM, signal.SIGHUP)


def _stop(signum: int, frame: FrameType | None) -> None:
    for each in _STOPS:  # a second signal must not cut the clean-up short
        signal.signal(each, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP interrupt the command as Ctrl-C does (partial outputs removed,
    exit code 128 + the signal's number), for the duration of the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {each: signal.signal(each, _stop) for each in _STOPS}
    try:
        yield
    finally:
        for each, handler in before.items():
            signal.signal(each, handler)
