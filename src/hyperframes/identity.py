"""Identities that cannot lie, for work that is kept and reused (chunked runs' segments).

:func:`code_identity` names a function by what it runs: its module and name, a hash of its
module's source file and of the user's modules it imports (those outside the standard
library and installed packages, followed through their own imports), and a hash of its
code objects taken recursively (bytecode, names, constants, nested functions and
comprehensions), never an address, so the same code gives the same identity in every
process and a changed global, helper or helper module gives another.

:func:`record_segment` writes, beside a finished segment file, its frame count and
checksum; :func:`segment_ok` reuses a segment only when that record is there and the file
still matches it.

Example:
    >>> code_identity(code_identity) == code_identity(code_identity)
    True
"""

from __future__ import annotations

import contextlib
import dis
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import sys
import sysconfig
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
    for source in user_sources(module):
        digest.update(source.read_bytes())
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


def user_sources(module: types.ModuleType | None) -> list[Path]:
    """The source file of ``module`` and of every user's module it reaches through its
    globals (modules, and functions or classes defined in them) and its functions' import
    statements, in a stable order: the files a result of its code depends on that the
    standard library and installed packages do not hold."""
    if module is None:
        return []
    found: dict[Path, None] = {}
    todo, seen = [module], {module.__name__}
    while todo:
        current = todo.pop()
        source = _user_file(getattr(current, "__file__", None))
        if source is None and current is not module:
            continue
        if source is not None:
            found[source] = None
        for name in _imported_names(current) - seen:
            seen.add(name)
            other = sys.modules.get(name)
            if other is not None:
                todo.append(other)
            elif (lazy := _not_yet_imported(name)) is not None:
                found[lazy] = None
    return sorted(found)


def _imported_names(module: types.ModuleType) -> set[str]:
    """The modules ``module`` uses: those its globals are or come from, and those its
    functions and methods import when they run."""
    names: set[str] = set()
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            names.add(value.__name__)
        elif inspect.isfunction(value) or inspect.isclass(value):
            names.add(getattr(value, "__module__", "") or "")
            codes = [value.__code__] if inspect.isfunction(value) else [
                m.__code__ for m in vars(value).values() if inspect.isfunction(m)
            ]  # fmt: skip
            for code in codes:
                names.update(_imports_in(code))
    names.discard(module.__name__)
    for name in list(names):  # ``import a.b`` also runs ``a``
        parts = name.split(".")
        names.update(".".join(parts[:k]) for k in range(1, len(parts)))
    return {name for name in names if name}


def _imports_in(code: types.CodeType) -> set[str]:
    found = {i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _imports_in(const)
    return found


def _not_yet_imported(name: str) -> Path | None:
    """The user's source file of a top-level module that a function imports when it runs
    and that is not imported yet (found, not imported)."""
    if "." in name:
        return None
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(name)
        return None if spec is None else _user_file(spec.origin)
    return None


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots |= {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).parent)}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots))


def _user_file(path: str | None) -> Path | None:
    """``path`` when it is a Python source file of the user's (not in the standard library,
    an installed package or hyperframes itself)."""
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        return None
    real = os.path.realpath(path)
    if real.startswith(_installed_roots()):
        return None
    return Path(real)


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


def record_segment(part: str | Path, frames: int, *, failed: list[Any] | None = None) -> None:
    """Write ``PART.json`` beside a finished segment: its frames and checksum, and the
    inputs that ``failed`` in it (a job over many inputs)."""
    path = Path(part)
    record = {"frames": frames, "bytes": path.stat().st_size, "sha256": _checksum(path)}
    if failed:
        record["failed"] = failed
    write_output(_record_of(path), json.dumps(record), overwrite=True)


def segment_record(part: str | Path) -> dict[str, Any]:
    """What a finished segment's record keeps (``frames``, and ``failed``: the inputs that
    failed in it); ``{}`` where there is none."""
    try:
        record = json.loads(_record_of(Path(part)).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


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
