"""Many inputs as users hold them: a folder, a glob, a manifest or a list, made into one
fixed, sorted list of :class:`Input` when a job starts.

- **One image sequence** is one input, not many: a folder whose files are images (and no
  video), a printf pattern (``frames/frame_%04d.png``) or a glob whose matches are all
  images (:func:`is_image_sequence`).
- **A folder** is walked recursively; a file is a video by its content (the first bytes of
  an MP4/MOV, Matroska/WebM, AVI, MPEG-TS or -PS, FLV, Ogg or ASF container) or by its
  suffix, and a folder below it that holds images is one image sequence (a render's
  shots). A file named as a video that holds something else stays in the list, so the
  job names it as failed instead of passing over it.
- **A glob** (``"clips/**/*.mp4"``, quoted on the command line) is expanded with ``**``
  crossing folders.
- **A manifest**: ``.txt`` (one path a line, ``#`` comments), or ``.csv``, ``.jsonl`` or
  ``.parquet`` with a ``path`` column, optional ``start``/``stop`` (frame indices, or
  times as text: ``"4.5s"``, ``"00:01:02.5"``) and any other columns, which the results
  carry. Paths are relative to the manifest.

Example:
    >>> inputs = expand("clips/")  # doctest: +SKIP
    >>> Input("/data/clips/day1/a.mp4", relative="day1/a.mp4").output_in("out", ".mkv")
    PosixPath('out/day1/a.mkv')
"""

from __future__ import annotations

import csv
import glob
import itertools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .positions import Seconds, parse_position

MANIFESTS = (".txt", ".csv", ".jsonl", ".parquet")
"""The suffixes read as a manifest."""
VIDEO_SUFFIXES = frozenset({
    ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".ts", ".mts", ".m2ts", ".mpg", ".mpeg",
    ".flv", ".ogv", ".wmv", ".asf", ".3gp", ".y4m",
})  # fmt: skip
"""Suffixes taken as video whatever the content (a damaged one is then listed as failed)."""
_MAGIC = (
    (4, b"ftyp"),  # MP4, MOV, 3GP
    (0, b"\x1a\x45\xdf\xa3"),  # Matroska, WebM
    (8, b"AVI "),  # RIFF AVI
    (0, b"\x47"),  # MPEG-TS sync byte (checked again at 188)
    (0, b"\x00\x00\x01\xba"),  # MPEG-PS
    (0, b"FLV"),
    (0, b"OggS"),
    (0, b"\x30\x26\xb2\x75"),  # ASF, WMV
    (0, b"YUV4MPEG2"),
)
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})
"""The suffixes of the images a sequence is made of."""
PRINTF = re.compile(r"%(0?)(\d*)d")
"""A printf number field in a pattern of file names (``frame_%04d.png``)."""
RESERVED = ("path", "start", "stop")
"""A manifest's columns with a meaning; the others are carried into the results."""


@dataclass(frozen=True)
class Input:
    """One input of a job: an absolute path, the frames to read (``start``, ``stop``:
    indices), the manifest's other columns, and its path relative to where the job found
    it (the folder, the glob's fixed part, the manifest's folder; else its name), which
    names its output where each input has one."""

    path: str
    start: int | Seconds = 0
    stop: int | Seconds | None = None
    columns: Mapping[str, Any] = field(default_factory=dict)
    relative: str = ""

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def output_in(self, folder: str | os.PathLike[str], suffix: str | None = None) -> Path:
        """Where this input's output goes in ``folder``: its relative path, with
        ``suffix`` if given (a range of frames adds ``_START-STOP`` to the name)."""
        out = Path(folder) / (self.relative or self.name)
        if self.start or self.stop is not None:
            out = out.with_name(f"{out.stem}_{self.start}-{self.stop or 'end'}{out.suffix}")
        return out.with_suffix(suffix) if suffix else out


def is_many(spec: str | os.PathLike[str] | Sequence[Any]) -> bool:
    """Whether ``spec`` names many inputs: a list, a folder, a glob or a manifest (and not
    one image sequence)."""
    if not isinstance(spec, str | os.PathLike):
        return True
    text = os.fspath(spec)
    many = os.path.isdir(text) or _is_glob(text) or text.lower().endswith(MANIFESTS)
    return many and not is_image_sequence(text) and not is_store(text)


def is_store(spec: str | os.PathLike[str] | Sequence[Any]) -> bool:
    """Whether ``spec`` names a hyperframes store (a folder holding its LMDB file): one
    input, which ``hyperframes.store.as_input`` opens."""
    return isinstance(spec, str | os.PathLike) and os.path.isfile(
        os.path.join(os.fspath(spec), "data.mdb")
    )


def is_image_sequence(spec: str | os.PathLike[str] | Sequence[Any]) -> bool:
    """Whether ``spec`` names one sequence of images: a folder whose files are images and
    none a video, a printf pattern of file names (``frames/frame_%04d.png``), a glob
    whose matches are all images (``'frames/*.png'``), or one image file."""
    if not isinstance(spec, str | os.PathLike):
        return False
    text = os.fspath(spec)
    if os.path.isdir(text):
        files = [e for e in os.scandir(text) if e.is_file() and not e.name.startswith(".")]
        images = [e for e in files if is_image(e.name)]
        others = (Path(e.path) for e in files if not is_image(e.name))
        return bool(images) and not any(is_video(p) for p in others)
    if os.path.exists(text):
        return os.path.isfile(text) and is_image(text)
    if PRINTF.search(os.path.basename(text)):
        return True
    if _is_glob(text):
        found = [p for p in glob.glob(text, recursive=True) if os.path.isfile(p)]
        return bool(found) and all(is_image(p) for p in found)
    return False


def is_image(name: str | os.PathLike[str]) -> bool:
    """Whether ``name`` is named as an image a sequence can hold."""
    return os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def expand(spec: str | os.PathLike[str] | Sequence[Any]) -> list[Input]:
    """The inputs ``spec`` names, sorted by path (each once).

    A listed path that is missing stays in the list: reading it fails, and a job over
    many inputs lists it with the others that cannot be read.

    Raises:
        FileNotFoundError: a folder or manifest that does not exist, or a glob or folder
            that names no video.
        ValueError: a manifest without a ``path`` column, or with a ``start``/``stop``
            that is not a frame index.
    """
    if not isinstance(spec, str | os.PathLike):
        found = [_listed(item, Path.cwd()) for item in spec]
    else:
        text = os.fspath(spec)
        if text.lower().endswith(MANIFESTS) and not _is_glob(text):
            found = _manifest(Path(text))
        elif os.path.isdir(text):
            found = [_within(p, text) for p in _videos_in(Path(text))]
            if not found and is_store(text):
                raise FileNotFoundError(
                    f"{text!r} is a hyperframes store, not a folder of videos or images; "
                    "name it alone as a command's input (hyperframes map STORE ...), or read "
                    "it from Python with hyperframes.store.StoreSource"
                )
            if not found:
                raise FileNotFoundError(
                    f"no video or image in the folder {text!r} (nor below it); name a folder "
                    "of videos, or of images (one sequence)"
                )
        elif _is_glob(text):
            fixed = _fixed_part(text)
            found = [_within(os.path.abspath(p), fixed) for p in glob.glob(text, recursive=True)
                     if os.path.isfile(p) or is_store(p)]  # fmt: skip
            if not found:
                raise FileNotFoundError(f"the pattern {text!r} matches no file")
        else:
            found = [_listed(text, Path.cwd())]
    unique = {(i.path, i.start, i.stop): i for i in found}
    return sorted(unique.values(), key=lambda i: (i.path, i.start, i.stop or 0))


def is_video(path: Path) -> bool:
    """Whether ``path`` holds a video container by its first bytes, or is named as one."""
    if path.suffix.lower() in VIDEO_SUFFIXES:
        return True
    if not path.is_file():  # a FIFO or a device: reading its first bytes could wait forever
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(192)
    except OSError:
        return False
    for at, magic in _MAGIC:
        if head[at : at + len(magic)] == magic:
            return magic != b"\x47" or head[188:189] == b"\x47"
    return False


def _videos_in(folder: Path) -> list[str]:
    """The videos in ``folder`` and below, the folders of images (each one image sequence)
    and the stores (each one input), neither searched further; hidden files and folders,
    FIFOs and devices left out (as a glob leaves them: a FIFO is read as a stream only
    where it is named)."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        whole = [d for d in dirs if is_store(os.path.join(root, d))
                 or is_image_sequence(os.path.join(root, d))]  # fmt: skip
        found += [os.path.abspath(os.path.join(root, d)) for d in whole]
        dirs[:] = [d for d in dirs if d not in whole]
        found += [os.path.abspath(Path(root) / name) for name in names
                  if not name.startswith(".") and os.path.isfile(Path(root) / name)
                  and is_video(Path(root) / name)]  # fmt: skip
    return found


def _within(path: str, base: str) -> Input:
    return Input(path, relative=os.path.relpath(path, os.path.abspath(base)))


def _fixed_part(pattern: str) -> str:
    """The folder a glob starts in: its parts before the first with a wildcard."""
    parts = Path(pattern).parts
    fixed = [p for p in itertools.takewhile(lambda p: not any(c in p for c in "*?["), parts)]
    return str(Path(*fixed)) if fixed else "."


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[") and not os.path.exists(text)


def _listed(item: Any, base: Path) -> Input:
    """One input named in a list or a manifest (``base``: where relative paths start)."""
    if isinstance(item, Input):
        return item
    row = dict(item) if isinstance(item, Mapping) else {"path": item}
    if "path" not in row or row["path"] in (None, ""):
        raise ValueError(f"a manifest row needs a path; got {row}")
    path = Path(os.fspath(row.pop("path")))
    path = path if path.is_absolute() else base / path  # a missing one fails when read
    start, stop = _frame(row.pop("start", None), "start"), _frame(row.pop("stop", None), "stop")
    absolute = os.path.abspath(path)
    inside = not os.path.relpath(absolute, base).startswith("..")
    relative = os.path.relpath(absolute, base) if inside else os.path.basename(absolute)
    return Input(absolute, start or 0, stop, row, relative)


def _frame(value: Any, name: str) -> int | Seconds | None:
    """A manifest's ``start``/``stop``: a frame index (a whole number), or a time as text
    (``"4.5s"``, ``"1:02.5"``, ``"00:01:02.500"``)."""
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, str) and (value.strip().endswith("s") or ":" in value):
        try:
            return parse_position(value.strip())
        except ValueError as exc:
            raise ValueError(f"a manifest's {name}: {exc}") from None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if number < 0 or number != int(number):
        raise ValueError(
            f"a manifest's {name} is a frame index (a whole number >= 0) or a time "
            f"('4.5s', '00:01:02.5'), got {value!r}"
        )
    return int(number)


def _manifest(path: Path) -> list[Input]:
    if not path.is_file():
        raise FileNotFoundError(f"no manifest at {str(path)!r}")
    base, suffix = path.parent, path.suffix.lower()
    rows: list[Any]
    if suffix == ".txt":
        lines = (line.strip() for line in path.read_text().splitlines())
        rows = [line for line in lines if line and not line.startswith("#")]
    elif suffix == ".csv":
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    elif suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    if rows and isinstance(rows[0], Mapping) and "path" not in rows[0]:
        raise ValueError(f"the manifest {str(path)!r} has no 'path' column; name one 'path'")
    return [_listed(row, base) for row in rows]


def inputs_record(inputs: Sequence[Input]) -> list[dict[str, Any]]:
    """What a job over ``inputs`` records of them, for a resume to check: each one's path,
    range and size in bytes (a store's: its LMDB file's; ``None``: missing, to be listed,
    or a folder of images)."""
    held = [os.path.join(i.path, "data.mdb") if is_store(i.path) else i.path for i in inputs]
    return [{"path": i.path, "bytes": os.path.getsize(f) if os.path.isfile(f) else None,
             "start": i.start, "stop": i.stop}
            for i, f in zip(inputs, held, strict=True)]  # fmt: skip
