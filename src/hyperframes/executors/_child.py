"""The loop a process worker runs: load the stage function once, then answer calls.

Messages from the parent: ``("fn", pickled function)`` first, then ``("call", args,
kwargs)`` any number of times; the connection closing ends the loop. Answers:
``("ready", pid)`` or ``("failed", Failure)`` to the function, then per call
``("ok", Returned)`` or ``("raised", Failure)``.

The child ignores SIGINT: Ctrl-C belongs to the parent, which stops the run and ends
its children.

A child starts by importing the parent's main script again (``spawn`` and
``forkserver`` do that, so that functions defined there can be unpickled). A script
that starts its run at top level, not under ``if __name__ == "__main__":``, would start
a second run in every child; :func:`refuse_run_while_starting` stops such a child with
:data:`STARTING_EXIT` and one line on stderr, and the parent reports it.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ._shm import BlockMaps
from ._wire import Failure, Returned, Shared, decode, encode

STARTING_EXIT = 78
"""The exit code of a worker that stopped because importing the main module started a run."""

GUARD_ADVICE = 'put the run under `if __name__ == "__main__":`'


def starting_up() -> bool:
    """Whether this process is a multiprocessing child still importing its parent's main
    module (the bootstrapping phase, in which no process may be started)."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def refuse_run_while_starting() -> None:
    """In a child that is still starting, say why on stderr and exit with
    :data:`STARTING_EXIT`, without a traceback; elsewhere do nothing."""
    if not starting_up():
        return
    print(
        f"hyperframes: worker process {os.getpid()} stopped: importing the main module in it "
        f"started a run with executor='processes' again; {GUARD_ADVICE}",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    # not SystemExit: forkserver turns any exit of a starting child into code 1
    os._exit(STARTING_EXIT)


def serve(conn: Connection) -> None:
    """Run the worker loop on ``conn`` until the parent closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    maps = BlockMaps()
    try:
        _, payload = conn.recv()
        # the stage function, pickled by our own parent process over this private pipe
        # (never data from a file or a store)
        fn = pickle.loads(payload)
    except EOFError:
        return
    except BaseException as exc:
        conn.send(("failed", Failure.of(exc)))
        return
    try:
        conn.send(("ready", os.getpid()))
    except (EOFError, OSError):  # the run ended while this child started
        return
    while True:
        try:
            _, args, kwargs = conn.recv()
        except (EOFError, OSError):  # the parent closed the pipe, or went (a reset)
            return
        try:
            answer: tuple[str, Any] = ("ok", _call(fn, maps, args, kwargs))
        except BaseException as exc:
            answer = ("raised", Failure.of(exc))
        try:
            conn.send(answer)
        except (EOFError, OSError):
            return
        except Exception as exc:  # the result itself cannot be pickled
            conn.send(("raised", Failure.of(exc)))


def _call(fn: Any, maps: BlockMaps, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Returned:
    values = [decode(a, maps.view) for a in args]
    named = {k: decode(v, maps.view) for k, v in kwargs.items()}
    result = fn(*values, **named)
    written: dict[int, Any] = {}
    if result is None:
        # the function wrote its output into an argument: send back those not shared
        written = {
            i: v
            for i, (v, a) in enumerate(zip(values, args, strict=True))
            if isinstance(v, np.ndarray) and v.flags.writeable and not isinstance(a, Shared)
        }
    return Returned(encode(result, maps.locate), written)
