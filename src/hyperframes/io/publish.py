"""One way to write an output: checked first, written under a name of the run's own,
then moved into place durably.

Every output of every command and of the API goes through here:

* :func:`check_output` before any work: an existing path is refused unless ``overwrite``;
  a symbolic link is never written through (with ``overwrite`` the link itself is replaced
  by the new file, its target untouched; a folder output refuses it); a folder, a missing
  or unwritable parent, and a path inside a store's folder are refused.
* :func:`temp_beside` names the temporary file or folder: hidden, beside the target, unique
  to the run (pid and a random token), so two runs writing one name never share a file:
  the later one to finish wins whole.
* :func:`publish` flushes it, renames it over the target (atomic) and flushes the folder.
  ``os.replace`` alone is atomic but not durable: after a power cut the new name can point
  at a file whose data never reached the disk, and the rename itself can be lost.
* :func:`write_output` does all three for bytes or text (reports, small files).

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_output(folder / "report.json", "{}")
    >>> write_output(folder / "report.json", "{}")
    Traceback (most recent call last):
    FileExistsError: '...report.json' exists; pass overwrite=True to replace it
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import socket
from collections.abc import Iterable
from pathlib import Path

STORE_MARK = "data.mdb"
"""The file that makes a folder a store's (LMDB's data file): nothing else is written there."""


def check_output(
    path: str | os.PathLike[str], *, overwrite: bool = False, folder: bool = False
) -> Path:
    """Check, before any work, that ``path`` may be written as an output; return it.

    Args:
        path: the output's path.
        overwrite: an existing output may be replaced (never through a link).
        folder: the output is a folder (a store, images): an existing one is checked by the
            writer itself, which knows what may be in it.

    Raises:
        FileExistsError: it exists (or is a link) and ``overwrite`` is false, or it is a
            link where a folder is to be written.
        IsADirectoryError: a file was asked for and it is a folder.
        FileNotFoundError: its parent folder does not exist.
        PermissionError: its parent folder is not writable.
        ValueError: it lies inside a store's folder.
    """
    target = Path(path)
    if target.is_symlink() and (folder or not overwrite):
        raise FileExistsError(
            f"{str(target)!r} is a symbolic link; outputs are never written through links"
            + ("" if folder else ": pass overwrite=True to replace the link itself")
        )
    if not folder and target.is_dir():
        raise IsADirectoryError(f"{str(target)!r} is a folder; name a file to write")
    if not folder and target.exists() and not overwrite:
        raise FileExistsError(f"{str(target)!r} exists; pass overwrite=True to replace it")
    parent = target.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"folder {str(parent)!r} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"folder {str(parent)!r} is not writable; choose another folder")
    store = store_folder_of(parent)
    if store is not None:
        raise ValueError(
            f"{str(target)!r} is inside the store {str(store)!r}; write outputs outside it"
        )
    return target


def store_folder_of(path: str | os.PathLike[str]) -> Path | None:
    """The store folder that ``path`` is or lies in, if any."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        if (folder / STORE_MARK).is_file():
            return folder
    return None


def temp_beside(path: str | os.PathLike[str]) -> Path:
    """A hidden name beside ``path``, unique to this run, to write it under until it is
    published: ``.NAME.partial-HOST-PID-TOKEN.SUFFIX`` (the suffix kept for format
    guessing). The temporary files that killed runs of this host left for ``path`` are
    removed first."""
    target = Path(path)
    remove_stale_temps(target)
    tag = f"{host_name()}-{os.getpid()}-{secrets.token_hex(4)}"
    return target.with_name(f".{target.stem}.partial-{tag}{target.suffix}")


def remove_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files that runs of this host which are no longer running left
    for ``path`` (a ``kill -9`` leaves one); those of running processes and of other hosts
    (a shared disk) are kept. Returns the files removed."""
    target = Path(path)
    head, tail = f".{target.stem}.partial-", target.suffix
    removed = []
    for temp in target.parent.glob(f"{head}*{tail}"):
        owner = owner_of(temp.name[len(head) : len(temp.name) - len(tail)])
        if owner is None or owner[0] != host_name() or running(owner[1]):
            continue
        try:
            if temp.is_file() and not temp.is_symlink():
                temp.unlink()
                removed.append(temp)
        except OSError:
            continue  # another run removed it first, or it is not ours to remove
    return removed


def host_name() -> str:
    """This host's name as it goes into a file name."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "localhost"


def owner_of(tag: str) -> tuple[str, int] | None:
    """The host and process id in a temporary name's ``HOST-PID-TOKEN``, if it has them."""
    parts = tag.rsplit("-", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def running(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (or cannot be told)."""
    if pid == os.getpid():
        return True
    if os.name == "nt":  # pragma: no cover - os.kill would end the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def write_output(
    path: str | os.PathLike[str], data: bytes | str, *, overwrite: bool = False
) -> None:
    """Write a small output whole: checked, written under a name of its own, published.

    Raises:
        The errors of :func:`check_output`, and ``OSError`` from writing (the target is
        then unchanged, and the temporary file removed).
    """
    target = check_output(path, overwrite=overwrite)
    temp = temp_beside(target)
    try:
        if isinstance(data, str):
            temp.write_text(data)
        else:
            temp.write_bytes(data)
        publish(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush one file, or one folder's entries (not its files), to disk.

    Folders cannot be opened for syncing on Windows; there this is a no-op for them.
    """
    where = Path(path)
    if where.is_dir():
        if os.name == "nt":  # pragma: no cover
            return
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    else:
        fd = os.open(where, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: str | os.PathLike[str]) -> None:
    """Flush a file, or a folder with every file and folder under it, to disk."""
    where = Path(path)
    if where.is_dir():
        for folder, _, files in os.walk(where, topdown=False):
            for name in files:
                fsync_path(Path(folder) / name)
            fsync_path(folder)
    else:
        fsync_path(where)


def publish(temp: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Move a finished ``temp`` file or folder to ``final`` so that it survives a crash.

    Flushes ``temp`` (for a folder, everything in it), renames it over ``final`` with
    ``os.replace``, then flushes the folder holding ``final`` so the rename is on disk.

    Raises:
        OSError: the flush or the rename failed; ``final`` is then unchanged or complete.
    """
    fsync_tree(temp)
    os.replace(temp, final)
    fsync_path(Path(final).parent)


def publish_files(moves: Iterable[tuple[Path, Path]], *, synced: bool = False) -> None:
    """:func:`publish` many files, flushing each destination folder once, at the end.

    Args:
        moves: ``(temp, final)`` pairs.
        synced: the temporary files were already flushed (e.g. by the threads that wrote
            them), so only the renames and the folders remain.
    """
    folders: dict[Path, None] = {}
    for temp, final in moves:
        if not synced:
            fsync_path(temp)
        os.replace(temp, final)
        folders[Path(final).parent] = None
    for folder in folders:
        fsync_path(folder)


def lock_exclusive(path: str | os.PathLike[str]) -> int | None:
    """Take an exclusive ``flock`` on the file ``path`` (made when missing, never through a
    link): the open descriptor, which holds the lock until it is closed, or ``None`` when
    another process holds it.

    Raises:
        OSError: it cannot be opened (``errno.ELOOP``: it is a symbolic link).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
