"""Identities that cannot lie, for work that is kept and reused (chunked runs' segments).

:func:`code_identity` names a function by what it runs: its module and name, a hash of its
module's source file, and a hash of its code objects taken recursively (bytecode, names,
constants, nested functions and comprehensions), never an address, so the same code gives
the same identity in every process and a changed global or helper in its module gives
another. :func:`record_segment` writes, beside a finished segment file, its frame count and
checksum; :func:`segment_ok` reuses a segment only when that record is there and the file
still matches it.

Example:
    >>> code_identity(code_identity) == code_identity(code_identity)
    True
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
import types
from pathlib import Path
from typing import Any

from .io.publish import write_output

CHUNK = 1 << 20


def code_identity(fn: Any) -> str:
    """``module:qualname:digest`` of a function (or callable object, or partial); ``""``
    for ``None``."""
    if fn is None:
        return ""
    digest = hashlib.sha256()
    _feed(fn, digest)
    owner = fn if hasattr(fn, "__qualname__") else type(fn)
    module = getattr(owner, "__module__", "?")
    return f"{module}:{getattr(owner, '__qualname__', '?')}:{digest.hexdigest()[:16]}"


def _feed(fn: Any, digest: Any, depth: int = 0) -> None:
    """Feed what ``fn`` runs: a partial's function and arguments, a class's module and
    methods, a function's module and code, an object's ``__call__`` and the callables it
    holds (a model wrapper's class), a few levels deep."""
    if depth > 4:
        return
    if isinstance(fn, functools.partial):
        _feed(fn.func, digest, depth + 1)
        for value in (*fn.args, *(v for _, v in sorted(fn.keywords.items()))):
            if callable(value):
                _feed(value, digest, depth + 1)
            else:
                digest.update(_stable_repr(value).encode())
        return
    target = (
        fn if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isclass(fn) else type(fn)
    )
    module = sys.modules.get(getattr(target, "__module__", ""), None)
    source = getattr(module, "__file__", None)
    if source and Path(source).is_file():
        digest.update(Path(source).read_bytes())
    if inspect.isclass(fn):
        for _, member in sorted(vars(fn).items()):
            if inspect.isfunction(member):
                _feed_code(member.__code__, digest)
        return
    code = getattr(fn, "__code__", None)  # functions, and methods through __func__
    if code is None:  # an object: the code of its class's __call__, and what it holds
        code = getattr(inspect.getattr_static(type(fn), "__call__", None), "__code__", None)
        held = getattr(fn, "__dict__", {})
        for _, value in sorted(held.items()):
            if callable(value):
                _feed(value, digest, depth + 1)
    if code is not None:
        _feed_code(code, digest)


def _feed_code(code: types.CodeType, digest: Any) -> None:
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(const, digest)  # nested functions, lambdas, comprehensions
        else:
            digest.update(_stable_repr(const).encode())


def _stable_repr(value: Any) -> str:
    """``repr`` with object addresses taken out (``<object at 0x...>`` -> its type)."""
    text = repr(value)
    return text if " at 0x" not in text else f"<{type(value).__qualname__}>"


def record_segment(part: str | Path, frames: int) -> None:
    """Write ``PART.json`` beside a finished segment: its frames and checksum."""
    path = Path(part)
    record = {"frames": frames, "bytes": path.stat().st_size, "sha256": _checksum(path)}
    write_output(_record_of(path), json.dumps(record), overwrite=True)


def segment_ok(part: str | Path) -> bool:
    """Whether a segment file can be reused: its record is there and the file matches it
    (size and checksum). A file with no record (its task was killed) is not reused."""
    path = Path(part)
    try:
        record = json.loads(_record_of(path).read_text())
        return bool(path.stat().st_size == record["bytes"] and _checksum(path) == record["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _record_of(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _checksum(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        while block := data.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
