"""The loop a process worker runs: load the stage function once, then answer calls.

Messages from the parent: ``("fn", pickled function)`` first, then ``("call", args,
kwargs)`` any number of times; the connection closing ends the loop. Answers:
``("ready", pid)`` or ``("failed", Failure)`` to the function, then per call
``("ok", Returned)`` or ``("raised", Failure)``.

The child ignores SIGINT: Ctrl-C belongs to the parent, which stops the run and ends
its children.
"""

from __future__ import annotations

import os
import pickle
import signal
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ._shm import BlockMaps
from ._wire import Failure, Returned, Shared, decode, encode


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
    conn.send(("ready", os.getpid()))
    while True:
        try:
            _, args, kwargs = conn.recv()
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("ok", _call(fn, maps, args, kwargs))
        except BaseException as exc:
            answer = ("raised", Failure.of(exc))
        try:
            conn.send(answer)
        except (BrokenPipeError, EOFError):
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
