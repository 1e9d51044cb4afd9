"""Folders of numbered images in and out through OpenCV: PNG, JPEG and whatever it reads.

:class:`ImageSequenceSource` reads a folder (every image in it, in sorted name
order), a printf pattern (``frames/frame_%06d.png``) or a glob (``frames/*.jpg``),
decoding each batch on a few threads straight into the pool slot.
:class:`ImageSequenceSink` writes one file per frame on a small thread pool into
a hidden temporary folder and moves the files into place when the run succeeded. The
temporary folder is named after the process that writes it, so a later sink on the same
folder removes the ones a killed run left behind.

Frames are RGB(A) in memory; the BGR order OpenCV uses on disk is converted here.

Example:
    >>> source = ImageSequenceSource("shots/frame_%06d.png")  # doctest: +SKIP
    >>> sink = ImageSequenceSink("out", pattern="f_{index:05d}.jpg", workers=2)  # doctest: +SKIP

Longer than 300 lines: the image source and sink share the file-name patterns and their
validation.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import tempfile
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..errors import CorruptFrame, FrameError, MediaError
from ..frames import FrameSpec
from .base import Chunk, Sink, Source
from .formats import CHANNELS, OnCorrupt, PixFmt, check_frames, frame_format
from .publish import fsync_path, host_name, owner_of, publish_files, running, store_folder_of

#: Extensions a folder source picks up.
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})
_PRINTF = re.compile(r"%(0?)(\d*)d")
# IMREAD_ANYDEPTH keeps 16-bit images 16-bit (the source's spec says uint16 then)
_READ_FLAGS = {
    "gray": cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH,
    "rgb24": cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH,
    "rgba": cv2.IMREAD_UNCHANGED,
}
_TO_RGBA = {1: cv2.COLOR_GRAY2RGBA, 3: cv2.COLOR_BGR2RGBA, 4: cv2.COLOR_BGRA2RGBA}
_FROM_RGB = {3: cv2.COLOR_RGB2BGR, 4: cv2.COLOR_RGBA2BGRA}
#: The prefix of a sink's temporary folder, ``.partial-<host>-<pid>-<random>``.
PARTIAL_PREFIX = ".partial-"
#: A temporary folder whose name carries no process id (left by an older version) is
#: stale once untouched this long.
_UNNAMED_STALE_S = 86400.0


def _default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def list_images(pattern_or_dir: str | os.PathLike[str]) -> list[Path]:
    """The image files a source reads, in order.

    Args:
        pattern_or_dir: a folder, a printf pattern (``frame_%06d.png``, ordered by number)
            or a glob (``*.jpg``, ordered by name).

    Raises:
        MediaError: nothing matches.
    """
    text = os.fspath(pattern_or_dir)
    if Path(text).is_dir():
        found = sorted(p for p in Path(text).iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
    elif _PRINTF.search(text):
        found = _numbered(Path(text))
    else:
        found = sorted(Path(name) for name in glob.glob(text))
    if not found:
        raise MediaError(
            f"no images found at {text!r}; name a folder of images, a pattern such as "
            "'frames/frame_%06d.png' or a glob such as 'frames/*.jpg'"
        )
    return found


def _numbered(pattern: Path) -> list[Path]:
    """Files matching a printf pattern in its folder, ordered by their number."""
    folder, name = pattern.parent, pattern.name
    if _PRINTF.search(str(folder)):
        raise ValueError(f"only the file name may hold a %d field, got {str(pattern)!r}")
    regex, last = "", 0
    for match in _PRINTF.finditer(name):
        width = match.group(2)
        digits = rf"\d{{{width},}}" if match.group(1) and width else r"\d+"
        regex += re.escape(name[last : match.start()]) + f"({digits})"
        last = match.end()
    compiled = re.compile(regex + re.escape(name[last:]) + r"\Z")
    if not folder.is_dir():
        return []
    hits = ((compiled.match(p.name), p) for p in folder.iterdir())
    return [p for m, p in sorted((int(m.group(1)), p) for m, p in hits if m)]


def read_image(path: str | os.PathLike[str], flags: int) -> np.ndarray | None:
    """Decode an image file from its bytes (``None`` if it is not one): the path never
    reaches OpenCV, which cannot open every name a file system allows.

    Raises:
        OSError: the file cannot be read.
    """
    data = np.fromfile(path, dtype=np.uint8)
    if not data.size:
        return None
    image: np.ndarray | None = cv2.imdecode(data, flags)
    return image


class ImageSequenceSource(Source):
    """Frames from numbered image files, read with OpenCV on a few threads.

    Args:
        pattern_or_dir: a folder, a printf pattern or a glob (see :func:`list_images`).
        pix_fmt: ``"rgb24"`` gives ``(H, W, 3)`` frames, ``"gray"`` ``(H, W, 1)``,
            ``"rgba"`` ``(H, W, 4)`` (opaque when the files have no alpha), all ``uint8``.
        start: index of the first file to read, in the order above.
        stop: one past the last file; ``None`` reads to the end.
        on_corrupt: ``"fail"`` raises :class:`CorruptFrame` at an unreadable file, ``"skip"``
            leaves it out and lists it in :attr:`skipped`.
        workers: threads decoding one batch (``cv2.imdecode`` releases the GIL).

    Raises:
        MediaError: no images match, or the first one cannot be read.
    """

    def __init__(
        self,
        pattern_or_dir: str | os.PathLike[str],
        *,
        pix_fmt: PixFmt = "rgb24",
        start: int = 0,
        stop: int | None = None,
        on_corrupt: OnCorrupt = "fail",
        workers: int | None = None,
    ) -> None:
        if pix_fmt not in CHANNELS or on_corrupt not in ("fail", "skip"):
            raise ValueError(
                f"pix_fmt must be one of {sorted(CHANNELS)} and on_corrupt 'fail' or 'skip', "
                f"got {pix_fmt!r} and {on_corrupt!r}"
            )
        if start < 0 or (stop is not None and stop < start):
            raise ValueError(f"need 0 <= start <= stop, got start={start}, stop={stop}")
        self.files = list_images(pattern_or_dir)[start:stop]
        self.start, self.pix_fmt, self.on_corrupt = start, pix_fmt, on_corrupt
        self.workers = workers or _default_workers()
        if not self.files:
            raise ValueError(f"start={start} is past the last image; pass a smaller start")
        first = read_image(self.files[0], cv2.IMREAD_UNCHANGED)
        if first is None:
            raise MediaError(f"cannot read {str(self.files[0])!r} as an image; check the file")
        if first.dtype not in (np.uint8, np.uint16):
            raise MediaError(
                f"{str(self.files[0])!r} holds {first.dtype} samples; image sequences are read "
                "as 8-bit or 16-bit: convert the files to PNG or TIFF of 8 or 16 bits"
            )
        # 16-bit files stay 16-bit: frames of uint16, not their low bytes
        self.spec = FrameSpec((first.shape[0], first.shape[1], CHANNELS[pix_fmt]), first.dtype)
        self.length = len(self.files)
        self.info = {"path": os.fspath(pattern_or_dir), "frames": self.length}
        self.skipped: list[int] = []
        self._next = 0
        self._pool: ThreadPoolExecutor | None = None

    def open(self) -> None:
        """Start the reading threads (also done by the first :meth:`read_into`)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="hf-images-read")
            self._next, self.skipped = 0, []

    def read_into(self, out: np.ndarray) -> Chunk:
        """Read up to ``len(out)`` images into ``out``; unreadable ones fail or are skipped."""
        self.open()
        assert self._pool is not None
        index = np.empty(len(out), dtype=np.int64)
        count = 0
        while count < len(out) and self._next < len(self.files):
            todo = range(self._next, min(self._next + len(out) - count, len(self.files)))
            base = count
            oks = list(self._pool.map(self._read_one, todo, out[base : base + len(todo)]))
            self._next = todo.stop
            for k, ok in enumerate(oks):
                number = self.start + todo[k]
                if not ok:
                    self.skipped.append(number)
                    continue
                if count != base + k:  # close the gap a skipped file left
                    out[count] = out[base + k]
                index[count] = number
                count += 1
        return Chunk(index[:count])

    def close(self) -> None:
        """Stop the reading threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _read_one(self, position: int, dst: np.ndarray) -> bool:
        """Decode file ``position`` into ``dst``; ``False`` when skipped as unreadable."""
        path = self.files[position]
        image = read_image(path, _READ_FLAGS[self.pix_fmt])
        number = self.start + position
        if image is None:
            if self.on_corrupt == "skip":
                return False
            raise CorruptFrame(
                f"frame {number} ({str(path)!r}) cannot be read as an image; "
                "pass on_corrupt='skip' (--on-corrupt skip) to leave unreadable files out",
                frame=number,
            )
        if image.dtype != self.spec.dtype:
            raise FrameError(
                f"frame {number} ({str(path)!r}) holds {image.dtype} samples, the first image "
                f"{self.spec.dtype}; every image of a sequence must have the same depth"
            )
        if image.shape[:2] != self.spec.shape[:2]:
            raise FrameError(
                f"frame {number} ({str(path)!r}) is {image.shape[1]}x{image.shape[0]}, the "
                f"first image is {self.spec.shape[1]}x{self.spec.shape[0]}; "
                "every image of a sequence must have the same size"
            )
        if self.pix_fmt == "gray":
            dst[..., 0] = image
        elif self.pix_fmt == "rgb24":
            cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=dst)
        else:
            channels = 1 if image.ndim == 2 else image.shape[2]
            dst[...] = cv2.cvtColor(image, _TO_RGBA[channels])
        return True

    def __repr__(self) -> str:
        return (
            f"ImageSequenceSource({self.info['path']!r}, spec={self.spec!r}, length={self.length})"
        )


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
        pattern: a :meth:`str.format` template for file names with an ``index`` field;
            its extension chooses the format (``.png``, ``.jpg``...).
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
        workers: int | None = None,
        overwrite: bool = False,
        params: list[int] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.pattern, self.overwrite = pattern, overwrite
        self.workers = workers or _default_workers()
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
            name = self.pattern.format(index=index)
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
        frame_format(spec)  # refuses what imwrite cannot take
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
            name = self.name_of(int(number))
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
