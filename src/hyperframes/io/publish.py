"""Durable write-then-rename: what every output that is written under a temporary name
uses to move it into place.

``os.replace`` alone is atomic but not durable: after a power cut the new name can point
at a file whose data never reached the disk (a zero-length or partly written output), and
the rename itself can be lost. :func:`publish` flushes the data first, renames, then
flushes the folder that holds the new name.

Example:
    >>> temp.write_bytes(payload)  # doctest: +SKIP
    >>> publish(temp, final)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


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
