"""The ``hyperframes`` command: one subcommand module per job, calling only the public API.

Errors become one line on stderr and exit code 1 (2 for usage errors); ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._version import __version__
from . import analyze, bench, demo, doctor, store, tune, video, view
from .common import fail

COMMANDS = (demo, video, analyze, store, view, tune, bench, doctor)


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
        result: int = args.run(args)
        return result
    except KeyboardInterrupt:
        print("hyperframes: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        return fail(exc)
