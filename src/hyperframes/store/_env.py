"""Opening a store's LMDB environment: the settings, and one open per path per process.

LMDB forbids opening one environment twice in a process (the second open breaks the
first's locks). :func:`acquire` keeps a registry keyed by real path: readers share one
environment, and a writer is refused while anything else holds the path (and a reader
while a writer does), with a message saying so.

Settings, chosen on purpose:

- ``subdir=True``: a store is a folder holding ``data.mdb`` and ``lock.mdb``.
- ``map_size``: 64 GiB to start, doubled on ``MapFullError`` by the writer
  (:func:`grow_map`) up to :data:`MAX_MAP_SIZE` or what the file holds plus the free
  space of its file system, whichever is less; past that a commit fails with
  ``OSError(ENOSPC)``. Address space is reserved, not disk: the file grows with the
  data. Readers adopt a grown map (``set_mapsize(0)``) when LMDB reports
  ``MapResizedError``, once no read of this process is open (:class:`ReadGate`).
- ``readahead=True``: a frame's records are read whole (hundreds of KiB each), so the
  kernel's readahead fetches them in a few reads. ``False`` (before 0.13) advised
  ``MADV_RANDOM``: each 4 KiB page of a record came from disk on its own fault, 127-146 ms
  for a random 512x512 uint16 frame of a store not in the page cache (3.2-3.3 ms with
  readahead), and the pages it left in the cache kept costing a fault each (1.8-1.9 ms
  against 1.0 a frame once cached).
- ``max_readers=126`` (LMDB's default); ``max_dbs=2``: the ``table`` and ``records``
  databases beside the main one (header and state), so both append in key order.
- ``sync=True`` for writers: a commit is durable before the next group starts, so a
  killed pack (or a crashed machine) leaves the store at a group boundary.
- ``lock=True``: readers in other processes see committed groups (MVCC) while a
  writer appends. A read-only open whose folder has no ``lock.mdb``, or cannot be
  written, opens with ``lock=False`` instead: read-only commands never create or
  write a file (no writer can be running on such a folder).

Errors on open say what went wrong: a permission problem is a :class:`PermissionError`
(other operating-system failures an :class:`OSError`, all with the path), a missing
store a :class:`~hyperframes.errors.StoreError`, and only damage (a file LMDB does not
recognise, an unsupported format version, a truncated or empty data file)
:class:`~hyperframes.errors.StoreCorrupt`.

A store is untrusted input: ``data.mdb`` and ``lock.mdb`` must be regular files with
one link each, never symbolic links, or LMDB would write its lock header (or pages)
through them into any file the user can write.

Longer than 300 lines: opening LMDB, the checks before it and the classification of its
errors are one job: what can go wrong when a store is opened.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb

from ..errors import StoreCorrupt, StoreError
from .format import HEADER_KEY, RECORDS_DB, STATE_KEY, TABLE_DB

INITIAL_MAP_SIZE = 64 << 30
MAX_MAP_SIZE = 1 << 40
"""The writer never grows the map past 1 TiB (nor past the file plus the disk's free space)."""
MAX_READERS = 126
DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
STORE_KEYS = frozenset({HEADER_KEY, STATE_KEY, TABLE_DB, RECORDS_DB})
"""Every key of a store's main database (two values and the names of two databases)."""


class ReadGate:
    """The read transactions of one environment in this process, against adopting a map
    another process grew: LMDB unmaps the old map then (``set_mapsize``), and a store
    decodes records where they lie in it, inside their read. So a read waits while the map
    is adopted, and the map is adopted once no read is open. Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()  # guards the two fields below
        self._reads = 0
        self._adopting = False

    @contextmanager
    def read(self, env: lmdb.Environment) -> Iterator[Any]:
        """A read transaction of ``env`` (its values are buffers into the map), for the
        ``with`` block. Raises what ``env.begin`` raises, but a grown map, adopted."""
        self._enter()
        try:
            try:
                txn = env.begin(buffers=True)
            except lmdb.MapResizedError:
                self._adopt(env)
                txn = env.begin(buffers=True)
            with txn:
                yield txn
        finally:
            with self._cond:
                self._reads -= 1
                self._cond.notify_all()

    def _enter(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._adopting)
            self._reads += 1

    def _adopt(self, env: lmdb.Environment) -> None:
        """Adopt the grown map once every other read has ended (this one holds none yet)."""
        with self._cond:
            self._reads -= 1
            if self._adopting:  # (another thread is at it: wait for it)
                self._cond.wait_for(lambda: not self._adopting)
            else:
                self._adopting = True
                try:
                    self._cond.wait_for(lambda: self._reads == 0)
                    env.set_mapsize(0)
                finally:
                    self._adopting = False
                    self._cond.notify_all()
            self._reads += 1


@dataclass(frozen=True)
class Handles:
    """An open environment, its two named databases, and the gate of its reads."""

    env: lmdb.Environment
    table: Any
    records: Any
    gate: ReadGate = field(default_factory=ReadGate, compare=False)

    def require(self) -> None:
        """Raise :class:`StoreCorrupt` unless both named databases exist."""
        if self.table is None or self.records is None:
            raise StoreCorrupt("the store has no group table or records database")


@dataclass
class _Entry:
    handles: Handles
    writable: bool
    users: int
    pid: int


_LOCK = threading.Lock()
_OPEN: dict[str, _Entry] = {}


def realpath(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def acquire(path: str | os.PathLike[str], *, writable: bool, create: bool = False) -> Handles:
    """The environment of the store at ``path``, opened once per process.

    Raises:
        StoreError: the path is not a store, or it is already open in this process in a
            way that conflicts (a writer with anything else).
        StoreCorrupt: the files are damaged: LMDB does not recognise them, or the data
            file is empty or shorter than LMDB's own record of it (truncated).
        PermissionError: the user may not read the store (or write it, for a writer).
        OSError: another operating-system failure (an I/O error, a full disk).
    """
    key = realpath(path)
    with _LOCK:
        entry = _OPEN.get(key)
        if entry is not None and entry.pid != os.getpid():
            del _OPEN[key]  # inherited over fork: never touch it from here
            entry = None
        if entry is not None:
            if writable or entry.writable:
                mode = "writing" if entry.writable else "reading"
                raise StoreError(
                    f"store {key!r} is already open for {mode} in this process; LMDB allows "
                    "one open per process, so close the other FrameStore first"
                )
            entry.users += 1
            return entry.handles
        handles = _open(Path(key), writable=writable, create=create)
        _OPEN[key] = _Entry(handles, writable, 1, os.getpid())
        return handles


def release(path: str | os.PathLike[str]) -> None:
    """Drop one user of the store at ``path``; the last one closes the environment."""
    key = realpath(path)
    with _LOCK:
        entry = _OPEN.get(key)
        if entry is None:
            return
        entry.users -= 1
        if entry.users <= 0:
            del _OPEN[key]
            if entry.pid == os.getpid():
                entry.handles.env.close()


def is_open(path: str | os.PathLike[str]) -> bool:
    with _LOCK:
        entry = _OPEN.get(realpath(path))
        return entry is not None and entry.pid == os.getpid()


def _open(path: Path, *, writable: bool, create: bool) -> Handles:
    try:
        if not create:
            data = path / DATA_FILE
            if not path.is_dir() or not data.is_file():
                what = "does not exist" if not path.exists() else f"has no {DATA_FILE}"
                raise StoreError(f"{str(path)!r} is not a hyperframes store ({what})")
            if data.stat().st_size == 0 and not writable:
                raise StoreCorrupt(
                    f"{str(data)!r} is empty (a pack killed before its first commit, or "
                    "damage); pack again with overwrite, or restore it from a copy"
                )
        lock_present = check_files(path)
        lock = writable or (lock_present and os.access(path / LOCK_FILE, os.W_OK))
    except PermissionError as exc:
        raise _denied(path, writable, exc.errno or errno.EACCES) from exc
    try:
        env = lmdb.open(
            str(path),
            map_size=INITIAL_MAP_SIZE,
            subdir=True,
            readonly=not writable,
            create=create,
            readahead=True,
            max_readers=MAX_READERS,
            max_dbs=2,
            sync=True,
            metasync=True,
            lock=lock,
            meminit=False,
        )
    except lmdb.Error as exc:
        raise open_error(path, exc, writable=writable) from exc
    try:
        check_size(env, path)
        refuse_foreign(env, path)
        table = _db(env, TABLE_DB, create=writable)
        records = _db(env, RECORDS_DB, create=writable)
    except BaseException:
        env.close()
        raise
    return Handles(env, table, records)


_DAMAGE = (
    lmdb.InvalidError,
    lmdb.CorruptedError,
    lmdb.VersionMismatchError,
    lmdb.PageNotFoundError,
    lmdb.PanicError,
    lmdb.BadChecksumError,
    lmdb.IncompatibleError,
)
"""LMDB's own codes for files it does not recognise or finds broken."""

_STRERROR = {os.strerror(code): code for code in sorted(errno.errorcode, reverse=True)}


def lmdb_errno(exc: lmdb.Error) -> int | None:
    """The operating-system error number behind an LMDB error, or ``None`` for LMDB's own.

    py-lmdb reports ``EACCES`` as :class:`lmdb.ReadonlyError` and other system errors as
    a plain :class:`lmdb.Error` whose message ends with ``strerror`` (``"path: Permission
    denied"``); it keeps no ``errno`` attribute.
    """
    if isinstance(exc, lmdb.ReadonlyError):
        return errno.EACCES
    if isinstance(exc, _DAMAGE):
        return None
    text = str(exc)
    for message, code in _STRERROR.items():
        if text.endswith(": " + message) or text == message:
            return code
    return None


def open_error(path: Path, exc: lmdb.Error, *, writable: bool) -> Exception:
    """What a failed ``lmdb.open`` means for the user.

    Returns:
        :class:`PermissionError` for ``EACCES``/``EPERM``/``EROFS`` (saying what to do),
        :class:`OSError` with the errno for other system errors (``ENOENT`` becomes
        :class:`FileNotFoundError`), :class:`StoreCorrupt` for files LMDB does not
        recognise, finds broken or cannot read in this version, and :class:`StoreError`
        for LMDB's other refusals (too many readers, ...).
    """
    code = lmdb_errno(exc)
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return _denied(path, writable, code)
    if code == errno.ENOENT:
        return FileNotFoundError(
            code, f"store {str(path)!r} disappeared while it was opened (LMDB said: {exc})",
            str(path),
        )  # fmt: skip
    if code is not None:
        return OSError(code, f"cannot open store {str(path)!r}: {exc}", str(path))
    if isinstance(exc, _DAMAGE) or type(exc) is lmdb.Error:
        return StoreCorrupt(
            f"LMDB cannot open {str(path)!r} ({exc}): the store is damaged or was written by "
            "an incompatible LMDB; restore it from a copy or re-pack"
        )
    return StoreError(f"LMDB cannot open {str(path)!r}: {exc}")


def _denied(path: Path, writable: bool, code: int) -> PermissionError:
    """A :class:`PermissionError` that says which access the store needs."""
    if code == errno.EROFS:
        why = "is on a read-only file system"
    else:
        why = "cannot be written by this user" if writable else "cannot be read by this user"
    need = (
        f"writing needs write permission on the folder, {DATA_FILE} and {LOCK_FILE}; "
        "fix the owner or mode (e.g. chmod -R u+rwX), or write a new store elsewhere"
        if writable
        else f"reading needs read permission on the folder and {DATA_FILE}; fix the owner "
        "or mode (e.g. chmod -R u+rX), or copy the store to a folder you own"
    )
    return PermissionError(code, f"store {str(path)!r} {why}: {need}", str(path))


def check_files(path: Path) -> bool:
    """Refuse store files that are links or not regular files; whether ``lock.mdb`` exists.

    Raises:
        StoreError: ``data.mdb`` or ``lock.mdb`` is a symbolic link, a hard link to
            another file, or not a regular file.
    """
    present = False
    for name in (DATA_FILE, LOCK_FILE):
        try:
            info = os.lstat(path / name)
        except FileNotFoundError:
            continue
        why = (
            "a symbolic link" if stat.S_ISLNK(info.st_mode)
            else "not a regular file" if not stat.S_ISREG(info.st_mode)
            else f"a hard link shared with {info.st_nlink - 1} other name(s)"
            if info.st_nlink > 1 else ""
        )  # fmt: skip
        if why:
            raise StoreError(
                f"{str(path / name)!r} is {why}; a store's files must be plain files of its "
                "own, so it is not opened (copy the store with `cp -rL` if you trust it)"
            )
        present = present or name == LOCK_FILE
    return present


def refuse_foreign(env: lmdb.Environment, path: Path) -> None:
    """Refuse an LMDB environment whose main database holds keys a store never writes.

    Raises:
        StoreError: the folder holds another program's LMDB data (nothing is written to it).
    """
    with env.begin() as txn:
        for key in txn.cursor().iternext(values=False):
            if bytes(key) not in STORE_KEYS:
                raise StoreError(
                    f"{str(path)!r} is an LMDB database of another program (it holds the key "
                    f"{bytes(key)[:40]!r}), not a hyperframes store; choose a new path"
                )


def _db(env: lmdb.Environment, name: bytes, *, create: bool) -> Any:
    """A named database; ``None`` when it is missing (a pack killed before its first commit,
    or damage: readers check before use)."""
    try:
        return env.open_db(name, create=create)
    except lmdb.NotFoundError:
        return None
    except lmdb.Error as exc:
        raise StoreCorrupt(f"LMDB cannot open the {name.decode()} database: {exc}") from None


def check_size(env: lmdb.Environment, path: Path) -> None:
    """Refuse a data file shorter than the pages LMDB has committed (reading it would SIGBUS).

    Raises:
        StoreCorrupt: the data file is truncated.
    """
    page = int(env.stat()["psize"])
    needed = (int(env.info()["last_pgno"]) + 1) * page
    size = os.path.getsize(path / DATA_FILE)
    if size < needed:
        raise StoreCorrupt(
            f"{str(path / DATA_FILE)!r} is truncated: {size} bytes, but the store's pages "
            f"need {needed}; restore it from a copy or re-pack"
        )


def grow_map(env: lmdb.Environment, path: Path, *, need: int) -> None:
    """Double the map of a writer's environment after ``MapFullError``, within the cap.

    Raises:
        OSError: ``ENOSPC``: the map already reached :data:`MAX_MAP_SIZE` or what the
            data file holds plus the free space of its file system.
    """
    current = int(env.info()["map_size"])
    used = os.path.getsize(path / DATA_FILE)
    free = shutil.disk_usage(path).free
    size = grown_map_size(current, used=used, free=free, page=int(env.stat()["psize"]))
    if size is None:
        kept = "the groups committed before are kept"
        if used + free >= MAX_MAP_SIZE:
            bound = f"the limit of {_size(MAX_MAP_SIZE)} per store"
            then = f"{kept}; pack the rest of the input into another store"
        else:
            bound = f"what its file system can hold ({_size(free)} free)"
            then = f"{kept}: free space, and pack --resume continues after them"
        raise OSError(
            errno.ENOSPC,
            f"store {str(path)!r} is full: its map of {_size(current)} cannot grow for the "
            f"next group ({_size(need)}) past {bound}; {then}",
        )
    env.set_mapsize(size)


def grown_map_size(current: int, *, used: int, free: int, page: int) -> int | None:
    """The map size after a ``MapFullError``: twice ``current``, at most
    :data:`MAX_MAP_SIZE` and ``used + free`` (rounded down to whole pages); ``None`` when
    that is no larger than ``current`` (the store is full)."""
    limit = min(current * 2, MAX_MAP_SIZE, used + free)
    size = limit // page * page
    return size if size > current else None


def _size(n: int) -> str:
    """``n`` bytes for a message: ``"1 TiB"``, ``"1.5 MiB"``, ``"512 bytes"``."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def write_error(path: Path, exc: lmdb.Error, need: int) -> Exception:
    """What a failed commit means: LMDB reports a full disk as ``Input/output error``."""
    kept = "the groups committed before are kept, and pack --resume continues after them"
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        free = None
    if free is not None and free < 2 * need + (1 << 20):
        return OSError(
            errno.ENOSPC,
            f"no space left on the device of store {str(path)!r} ({free} bytes free, the "
            f"next group needs {need}; LMDB said: {exc}); free space: {kept}",
        )
    return StoreError(f"writing store {str(path)!r} failed ({exc}); {kept}")
