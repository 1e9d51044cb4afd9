"""A folder of numbered images out through OpenCV: PNG, JPEG and whatever it writes.

:class:`ImageSequenceSink` writes one file per frame on a small thread pool into a hidden
temporary folder and moves the files into place when the run succeeded. The temporary
folder is named after the process that writes it, so a later sink on the same folder
removes the ones a killed run left behind (:func:`remove_stale_partials`). Frames are
RGB(A) in memory; the BGR order OpenCV uses on disk is converted here.

Example:
    >>> sink = ImageSequenceSink("out", pattern="f_{index:05d}.jpg", workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..errors import MediaError
from ..frames import FrameSpec
from .base import Sink
from .formats import ALPHA_IMAGES, DEEP_IMAGES, check_frames, frame_format
from .image_names import as_template
from .images import default_workers
from .publish import fsync_path, host_name, owner_of, publish_files, running, store_folder_of

_FROM_RGB = {3: cv2.COLOR_RGB2BGR, 4: cv2.COLOR_RGBA2BGRA}
#: The prefix of a sink's temporary folder, ``.partial-<host>-<pid>-<random>``.
PARTIAL_PREFIX = ".partial-"
#: A temporary folder whose name carries no process id (left by an older version) is
#: stale once untouched this long.
_UNNAMED_STALE_S = 86400.0


class ImageSequenceSink(Sink):
    """Writes one image file per frame, named by frame id, on a small thread pool.

    Files are written into a hidden temporary folder inside ``directory`` and moved into
    place by :meth:`close` when the run succeeded, flushed to disk first; after a failure
    the temporary folder is removed (and ``directory`` too if this sink created it and it
    is empty). The temporary folder's name holds the host name and process id, and
    :meth:`open` removes the temporary folders (``.partial-*``) of processes of this host
    that are no longer running: those a killed run left behind.

    Args:
        directory: the output folder; created when missing.
        pattern: file names: a :meth:`str.format` template with an ``index`` field
            (``frame_{index:06d}.png``) or a printf one (``frame_%06d.png``); its
            extension chooses the format (``.png``, ``.jpg``...).
        numbers: the number in the name of each frame, by its place in the output
            (``range(1, n + 1)``: the first frame written is ``frame_000001.png``); by
            default the frame's id.
        workers: writing threads (``cv2.imwrite`` releases the GIL). At most
            ``2 * workers`` frames wait for a thread, so memory stays bounded.
        overwrite: replace existing files of the same names; otherwise an existing name is
            an error (the first name is checked here, the others as they come).
        params: extra ``cv2.imwrite`` parameters, e.g. ``[cv2.IMWRITE_JPEG_QUALITY, 95]``.

    Raises:
        ValueError: a pattern whose names would leave ``directory`` or that OpenCV
            cannot write.
        FileExistsError: the first output name exists and ``overwrite`` is false.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        pattern: str = "frame_{index:06d}.png",
        numbers: range | None = None,
        workers: int | None = None,
        overwrite: bool = False,
        params: list[int] | None = None,
    ) -> None:
        self.directory = Path(os.path.abspath(directory))  # user code may change folders
        self.pattern, self.overwrite = as_template(pattern), overwrite
        self.numbers = numbers
        self.workers = workers or default_workers()
        self.params = list(params or [])
        first = self.name_of(0)
        if first == self.name_of(1):
            raise ValueError(
                f"pattern {pattern!r} gives every frame the same name; add an index field, "
                "e.g. 'frame_{index:06d}.png'"
            )
        suffix = Path(first).suffix
        if not suffix.isascii() or not cv2.haveImageWriter(f"frame{suffix}"):
            raise ValueError(f"OpenCV cannot write {first!r}; end the pattern with .png or .jpg")
        if self.directory.is_symlink():
            raise FileExistsError(
                f"{str(self.directory)!r} is a symbolic link; outputs are never written "
                "through links: name a real folder"
            )
        if self.directory.exists() and not self.directory.is_dir():
            raise NotADirectoryError(
                f"{str(self.directory)!r} is a file; name a folder (a new path)"
            )
        store = store_folder_of(self.directory)
        if store is not None:
            raise ValueError(
                f"{str(self.directory)!r} is inside the store {str(store)!r}; write images "
                "outside it"
            )
        if (self.directory / first).exists() and not overwrite:
            raise FileExistsError(
                f"{str(self.directory / first)!r} exists; pass overwrite=True or use another folder"
            )
        self._created = False
        self._temp: Path | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future[None]] = deque()
        self._names: list[str] = []
        self._spec: FrameSpec | None = None

    def name_of(self, index: int) -> str:
        """The file name of frame ``index``; ``ValueError`` if it is not a plain name."""
        try:
            name = self.pattern.format(index=index if self.numbers is None else self.numbers[index])
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"pattern must be a str.format template with an {{index}} field such as "
                f"'frame_{{index:06d}}.png', got {self.pattern!r}"
            ) from exc
        seps = {os.sep, os.altsep or os.sep, "/", "\\"}
        if not name or name in (".", "..") or any(sep in name for sep in seps) or "\0" in name:
            raise ValueError(
                f"pattern {self.pattern!r} gives {name!r} for frame {index}, which is not a "
                "plain file name inside the output folder; remove separators and '..'"
            )
        return name

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Create the output and temporary folders and the writing threads."""
        check_kept(spec, Path(self.name_of(0)).suffix.lower())
        if not self.directory.exists():
            self.directory.mkdir(parents=True)
            self._created = True
        remove_stale_partials(self.directory)
        owner = f"{PARTIAL_PREFIX}{host_name()}-{os.getpid()}-"
        self._temp = Path(tempfile.mkdtemp(prefix=owner, dir=self.directory))
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="hf-images-write")
        self._spec = spec

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        """Queue one batch for writing; blocks while ``2 * workers`` frames are pending."""
        if self._pool is None or self._temp is None or self._spec is None:
            raise RuntimeError("ImageSequenceSink.write called before open() or after close()")
        check_frames(frames, self._spec, f"image sink {str(self.directory)!r}")
        for frame, number in zip(frames, index, strict=True):
            name = self.name_of(int(number) if self.numbers is None else len(self._names))
            if not self.overwrite and (self.directory / name).exists():
                raise FileExistsError(
                    f"{str(self.directory / name)!r} exists; pass overwrite=True or use "
                    "another folder"
                )
            while len(self._pending) >= 2 * self.workers:
                self._pending.popleft().result()
            # The conversion to OpenCV's channel order doubles as the copy the writer
            # needs, since ``frames`` is only valid during this call.
            channels = frame.shape[-1] if frame.ndim == 3 else 1
            image = cv2.cvtColor(frame, _FROM_RGB[channels]) if channels > 1 else frame.copy()
            self._pending.append(self._pool.submit(self._write_one, self._temp / name, image))
            self._names.append(name)

    def close(self, *, ok: bool) -> str | None:
        """Move the files into place (``ok=True``) or remove them.

        Returns:
            The output folder, or ``None`` after ``ok=False``.
        """
        pool, temp, pending = self._pool, self._temp, self._pending
        self._pool, self._temp = None, None
        try:
            if not ok:
                for future in pending:
                    future.cancel()
            if pool is not None:
                pool.shutdown(wait=True)
            if ok and temp is not None:
                for future in pending:
                    future.result()  # each file was flushed by the thread that wrote it
                moves = [(temp / name, self.directory / name) for name in self._names]
                publish_files(moves, synced=True)
                if self._created:
                    fsync_path(self.directory.parent)
                return str(self.directory)
            return None
        finally:
            pending.clear()
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
            if not ok and self._created:
                with contextlib.suppress(OSError):  # not empty: someone else wrote there
                    self.directory.rmdir()

    def _write_one(self, path: Path, image: np.ndarray) -> None:
        # encode in memory, write from Python: a full disk or a failed write is an OSError
        # that says so (cv2.imwrite only returns False, and libpng prints to stderr)
        ok, encoded = cv2.imencode(path.suffix, image, self.params)
        if not ok:
            raise MediaError(
                f"OpenCV could not encode a frame as {path.suffix} for {str(path)!r}; "
                "check the image params"
            )
        with open(path, "wb") as out:
            out.write(encoded.data)
            out.flush()
            os.fsync(out.fileno())

    def __repr__(self) -> str:
        return f"ImageSequenceSink({str(self.directory)!r}, pattern={self.pattern!r})"


def check_kept(spec: FrameSpec, suffix: str) -> None:
    """Refuse frames of ``spec`` that images named ``suffix`` (``".jpg"``) cannot take, or
    whose alpha or 16 bits they would drop, in one line that names what keeps them."""
    frame_format(spec)  # refuses what imwrite cannot take
    alpha = len(spec.shape) == 3 and spec.shape[-1] == 4
    lost = [what for what, lose in (("alpha", alpha and suffix not in ALPHA_IMAGES),
                                    ("16 bits a sample", spec.dtype == np.uint16
                                     and suffix not in DEEP_IMAGES)) if lose]  # fmt: skip
    if lost:
        kind = suffix.lstrip(".").upper().replace("JPG", "JPEG")
        raise ValueError(
            f"the frames have {' and '.join(lost)}, which {kind} cannot hold; name the "
            f"images .png or .tif to keep {'them' if len(lost) > 1 or not alpha else 'it'}"
        )


def remove_stale_partials(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary folders (``.partial-*``) that killed sinks left in ``directory``.

    A folder is stale when the process named in it (``.partial-<host>-<pid>-<random>``)
    ran on this host and is no longer running. Folders of other hosts (a shared disk)
    and of running processes are kept; a folder whose name holds no process id is
    removed once untouched for a day.

    Returns:
        The folders removed.
    """
    removed = []
    for folder in Path(directory).glob(f"{PARTIAL_PREFIX}*"):
        owner = owner_of(folder.name[len(PARTIAL_PREFIX) :])
        try:
            if not folder.is_dir() or folder.is_symlink():
                continue
            if owner is None:
                if time.time() - folder.stat().st_mtime < _UNNAMED_STALE_S:
                    continue
            elif owner[0] != host_name() or running(owner[1]):
                continue
            shutil.rmtree(folder)
        except OSError:
            continue  # another sink removed it first, or it is not ours to remove
        removed.append(folder)
    return removed
