"""Opening a store's LMDB environment: the settings, and one open per path per process.

LMDB forbids opening one environment twice in a process (the second open breaks the
first's locks). :func:`acquire` keeps a registry keyed by real path: readers share one
environment, and a writer is refused while anything else holds the path (and a reader
while a writer does), with a message saying so.

Settings, chosen on purpose:

- ``subdir=True``: a store is a folder holding ``data.mdb`` and ``lock.mdb``.
- ``map_size``: 64 GiB to start, doubled on ``MapFullError`` by the writer. Address
  space is reserved, not disk: the file grows with the data. Readers adopt a grown map
  (``set_mapsize(0)``) when LMDB reports ``MapResizedError``.
- ``readahead=False``: random frame access should not pull neighbouring pages in.
- ``max_readers=126`` (LMDB's default); ``max_dbs=2``: the ``table`` and ``records``
  databases beside the main one (header and state), so both append in key order.
- ``sync=True`` for writers: a commit is durable before the next group starts, so a
  killed pack (or a crashed machine) leaves the store at a group boundary.
- ``lock=True``: readers in other processes see committed groups (MVCC) while a
  writer appends. A read-only open whose folder has no ``lock.mdb``, or cannot be
  written, opens with ``lock=False`` instead: read-only commands never create or
  write a file (no writer can be running on such a folder).

A store is untrusted input: ``data.mdb`` and ``lock.mdb`` must be regular files with
one link each, never symbolic links, or LMDB would write its lock header (or pages)
through them into any file the user can write.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb

from ..errors import StoreCorrupt, StoreError
from .format import HEADER_KEY, RECORDS_DB, STATE_KEY, TABLE_DB

INITIAL_MAP_SIZE = 64 << 30
MAX_READERS = 126
DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
STORE_KEYS = frozenset({HEADER_KEY, STATE_KEY, TABLE_DB, RECORDS_DB})
"""Every key of a store's main database (two values and the names of two databases)."""


@dataclass(frozen=True)
class Handles:
    """An open environment and its two named databases."""

    env: lmdb.Environment
    table: Any
    records: Any

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
        StoreCorrupt: LMDB refuses the files, or the data file is shorter than LMDB's
            own record of it (truncated).
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
    if not create:
        data = path / DATA_FILE
        if not path.is_dir() or not data.is_file():
            what = "does not exist" if not path.exists() else f"has no {DATA_FILE}"
            raise StoreError(f"{str(path)!r} is not a hyperframes store ({what})")
    lock_present = check_files(path)
    lock = writable or (lock_present and os.access(path / LOCK_FILE, os.W_OK))
    try:
        env = lmdb.open(
            str(path),
            map_size=INITIAL_MAP_SIZE,
            subdir=True,
            readonly=not writable,
            create=create,
            readahead=False,
            max_readers=MAX_READERS,
            max_dbs=2,
            sync=True,
            metasync=True,
            lock=lock,
            meminit=False,
        )
    except lmdb.Error as exc:
        raise StoreCorrupt(f"LMDB cannot open {str(path)!r}: {exc}") from None
    try:
        check_size(env, path)
        refuse_foreign(env, path)
        table = _db(env, TABLE_DB, create=writable)
        records = _db(env, RECORDS_DB, create=writable)
    except BaseException:
        env.close()
        raise
    return Handles(env, table, records)


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
