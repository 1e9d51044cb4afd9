"""Per-frame answers in a file, written as the run goes: JSON Lines or Parquet.

:class:`ResultsSink` writes one row per frame: ``frame`` (its index), ``time`` (seconds,
from the video's timestamps; ``null`` without them), the values each ``map(..., into=key)``
stage returned (arrays as lists, boxes as lists of lists; a value that is a dict gives one
column per key), and under reuse ``computed`` (whether the function ran on that frame) and
``answer_of`` (the frame whose answer it carries). The suffix chooses the format: ``.jsonl``
(or ``.ndjson``) or ``.parquet`` (needs ``pyarrow``: the ``[parquet]`` extra).

While the run goes, rows collect in memory up to :data:`PART_ROWS` rows or
:data:`PART_SECONDS` seconds, then go to a part file in a folder beside the output,
``.NAME.parts/``, each part written whole (temporary name, ``fsync``, rename), so memory
stays flat whatever the length and a killed run keeps every part it finished. The folder
also holds ``job.json`` (what the rows are of: input, function, options) and a lock that
one run holds. At the end the parts are joined in order into the output, published like
every output (temporary name, atomic rename), and the folder is removed.

An interrupted run's folder stays. :func:`resume_point` says where it stopped; a
``ResultsSink(..., resume=True)`` with the same job continues it (a different job is refused
with one line naming what differs), and the joined file equals an uninterrupted run's, row
for row. Without ``resume``, a folder left by a killed run is refused unless ``overwrite``.

Example:
    >>> import json, tempfile
    >>> import numpy as np
    >>> from hyperframes import Pipeline
    >>> out = Path(tempfile.mkdtemp()) / "brightness.jsonl"
    >>> report = (Pipeline.from_frames(np.arange(4 * 16, dtype=np.uint8).reshape(4, 4, 4))
    ...     .map(lambda b: b.mean(axis=(1, 2)), into="brightness")
    ...     .to(ResultsSink(out)).run())
    >>> [json.loads(line) for line in out.read_text().splitlines()][1]
    {'frame': 1, 'time': None, 'brightness': 23.5}
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import HyperframesError
from ..frames import FrameSpec
from ._rows_format import join_parts, plain, write_rows
from .base import Sink
from .publish import (
    check_output,
    fsync_path,
    lock_exclusive,
    publish,
    temp_beside,
    write_output,
)

PART_ROWS = 4096
"""Rows a part holds at most."""
PART_SECONDS = 30.0
"""Rows wait at most this long in memory before they go to a part (a killed run loses less)."""
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
ENGINE_KEYS = frozenset({"pts", "hyperframe", "hf_pos", "hf_len", "distance", "answer_of"})
"""Meta keys the engine fills (not values of the user's function)."""
JOB_FILE = "job.json"
LOCK_FILE = "writer.lock"


class ResumeRefused(HyperframesError, ValueError):
    """A resume of results made by another job (input, function or options differ)."""


def parts_folder(path: str | os.PathLike[str]) -> Path:
    """The folder beside ``path`` where a run keeps its finished parts."""
    target = Path(path)
    return target.with_name(f".{target.name}.parts")


def resume_point(path: str | os.PathLike[str]) -> int:
    """The frame index after the last one an interrupted run wrote to ``path`` (0 when
    nothing was written)."""
    parts = _parts(parts_folder(path), FORMATS.get(Path(path).suffix.lower(), ""))
    if not parts:
        return 0
    return int(json.loads(parts[-1].with_suffix(".json").read_text())["next"])


def format_of(path: str | os.PathLike[str]) -> str:
    """``"jsonl"`` or ``"parquet"`` from the suffix, else ``ValueError``."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"cannot tell the results format of {str(path)!r}; end its name with "
            f"{', '.join(sorted(FORMATS))}"
        )
    if FORMATS[suffix] == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError(
                "writing .parquet needs pyarrow: pip install 'hyperframes-engine[parquet]', "
                "or write .jsonl"
            ) from None
    return FORMATS[suffix]


def join_files(parts: list[Path], out: Path) -> None:
    """Results files of one format, in order, into a new file ``out`` (chunked runs'
    segments); memory: one part."""
    join_parts(parts, out, format_of(out))


class ResultsSink(Sink):
    """Writes each frame's values as one row of a JSON Lines or Parquet file.

    Args:
        path: the output file; its suffix chooses the format.
        values: the meta keys to write (the ``into=`` names); by default every key that is
            not the engine's own.
        job: what the rows are of (input, function, options), recorded and compared on
            resume; JSON values.
        resume: continue the rows an interrupted run left (same ``job``); the run must
            start at :func:`resume_point`.
        overwrite: replace an existing output, and a killed run's parts.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        values: list[str] | None = None,
        job: dict[str, Any] | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(path)
        self.format = format_of(self.path)
        if resume and overwrite:
            raise ValueError("pass either resume (continue the rows) or overwrite, not both")
        check_output(self.path, overwrite=overwrite or resume)
        self.values = values
        self.job = json.loads(json.dumps(job or {}, default=str))
        self.resume, self.overwrite = resume, overwrite
        self.folder = parts_folder(self.path)
        self.rows_written = 0
        self._rows: list[dict[str, Any]] = []
        self._since = time.monotonic()
        self._lock: int | None = None
        self._next = 0

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Take the parts folder (new, or the interrupted run's on resume)."""
        if self.folder.is_symlink():
            raise FileExistsError(f"{str(self.folder)!r} is a symbolic link; remove it")
        self.folder.mkdir(exist_ok=True)
        self._take_lock()
        job_file = self.folder / JOB_FILE
        parts = _parts(self.folder, self.format)
        if self.resume and job_file.is_file():
            self._check_job(json.loads(job_file.read_text()))
            self._next = resume_point(self.path)
            self.rows_written = sum(
                int(json.loads(p.with_suffix(".json").read_text())["rows"]) for p in parts
            )
            return
        if parts and not self.overwrite:
            self._unlock()
            raise FileExistsError(
                f"an interrupted run left rows of {str(self.path)!r} in {str(self.folder)!r}; "
                "pass resume (--resume) to continue them or overwrite (--overwrite) to start again"
            )
        for stale in self.folder.iterdir():
            if stale.name != LOCK_FILE:
                stale.unlink()
        write_output(job_file, json.dumps({"format": self.format, **self.job}), overwrite=True)

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        """Collect the batch's rows; a full or old enough part goes to disk."""
        keys = self.values
        if keys is None:
            keys = [k for k in meta if k not in ENGINE_KEYS]
        pts, origins = meta.get("pts"), meta.get("answer_of")
        for j, frame in enumerate(index.tolist()):
            row: dict[str, Any] = {"frame": int(frame)}
            row["time"] = None if pts is None else plain(pts[j])
            for key in keys:
                if key not in meta:
                    raise KeyError(f"no values named {key!r} reach the results; map(into={key!r})")
                value = plain(meta[key][j])
                if isinstance(value, dict):
                    row.update(value)
                else:
                    row[key] = value
            if origins is not None:
                row["computed"] = int(origins[j]) == int(frame)
                row["answer_of"] = int(origins[j])
            self._rows.append(row)
        if len(self._rows) >= PART_ROWS or time.monotonic() - self._since >= PART_SECONDS:
            self._flush()

    def close(self, *, ok: bool) -> str | None:
        """Join the parts into the output (``ok``), or keep the finished ones for a resume:
        after a failure or Ctrl-C the rows that reached the sink are whole and in order, so
        they go to a last part too (unless writing is what failed)."""
        try:
            if not ok:
                with contextlib.suppress(Exception):
                    self._flush()
                return None
            self._flush()
            self._join()
            return str(self.path)
        finally:
            self._rows = []
            self._unlock()

    def notes(self) -> dict[str, Any]:
        return {"rows": self.rows_written}

    # -- parts ---------------------------------------------------------------------------

    def _flush(self) -> None:
        self._since = time.monotonic()
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        part = _part(self.folder, len(_parts(self.folder, self.format)), self.format)
        temp = temp_beside(part)
        try:
            write_rows(rows, temp, self.format)
            publish(temp, part)
        finally:
            temp.unlink(missing_ok=True)
        self._next = rows[-1]["frame"] + 1
        self.rows_written += len(rows)
        # the part's record comes after the part: a part without one is not counted
        write_output(part.with_suffix(".json"), json.dumps({"rows": len(rows), "next": self._next}))

    def _join(self) -> None:
        """The parts, in order, into the output; then the parts folder goes."""
        parts = _parts(self.folder, self.format)
        temp = temp_beside(self.path)
        try:
            join_parts(parts, temp, self.format)
            publish(temp, self.path)
        finally:
            temp.unlink(missing_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            fsync_path(self.folder.parent)

    def _check_job(self, recorded: dict[str, Any]) -> None:
        mine = {"format": self.format, **self.job}
        differs = [
            f"{key}: {recorded.get(key)!r} then, {mine.get(key)!r} now"
            for key in sorted(set(recorded) | set(mine))
            if recorded.get(key) != mine.get(key)
        ]
        if differs:
            self._unlock()
            raise ResumeRefused(
                f"the rows in {str(self.folder)!r} were made by another job "
                f"({'; '.join(differs)}); resume with the same input, function and options, "
                "or pass --overwrite"
            )

    def _take_lock(self) -> None:
        self._lock = lock_exclusive(self.folder / LOCK_FILE)
        if self._lock is None:
            raise FileExistsError(
                f"another run is writing {str(self.path)!r}; wait for it or choose another output"
            )

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _part(folder: Path, number: int, fmt: str) -> Path:
    return folder / f"part-{number:06d}.{fmt}"


def _parts(folder: Path, fmt: str) -> list[Path]:
    """The finished parts, in order: each with its record (``part-N.json``, written after
    the part), numbered without a gap."""
    found: list[Path] = []
    while (part := _part(folder, len(found), fmt)).is_file():
        if not part.with_suffix(".json").is_file():
            break
        found.append(part)
    return found
