"""Per-frame answers in a file, written as the run goes: JSON Lines or Parquet.

:class:`ResultsSink` writes one row per frame: ``frame`` (its index), ``time`` (seconds,
from the video's timestamps; ``null`` without them), the values each ``map(..., into=key)``
stage returned (arrays as lists, boxes as lists of lists; a value that is a dict gives one
column per key), and under reuse ``computed`` (whether the function ran on that frame) and
``answer_of`` (the frame whose answer it carries). The suffix chooses the format: ``.jsonl``
(or ``.ndjson``) or ``.parquet`` (needs ``pyarrow``: the ``[parquet]`` extra).

What a row may hold is checked at its frame: a value of a kind no results file holds (an
object, bytes), or an answer key that names one of the file's own columns (``frame``,
``time``, ``computed``, ``answer_of``), fails the run at that frame, naming the frame and
the column, with every earlier row kept for a resume. Rows need not share their keys or
kinds: Parquet columns are learned and widened (see :mod:`._rows_format`); JSON Lines
writes ``inf`` and ``NaN`` as ``null``, Parquet keeps them as floats.

While the run goes, rows collect in memory up to :data:`PART_ROWS` rows, the bytes the
run's memory plan grants the sink, or :data:`PART_SECONDS` seconds, then go to a part file
in a folder beside the output, ``.NAME.parts/``, each part written whole (temporary name,
``fsync``, rename) with a record of its rows and checksum, so memory stays flat whatever
the answers weigh and a killed run keeps every part it finished. The folder also holds
``job.json`` (what the rows are of: input, function, options), a lock that one run holds,
and, once every row is written, ``done.json``. Then the parts are joined in order into the
output, published like every output, and the folder is removed. A JSON Lines join appends
each part to the first and drops it (one part's extra space); a Parquet join writes the
output beside the parts (the output's space). Either can be killed at any moment.

An interrupted run's folder stays. :func:`resume_point` says where it stopped: after the
last part whose record checks out (a part missing, cut short or changed is dropped with all
after it, and recomputed). A ``ResultsSink(..., resume=True)`` with the same job continues
it (a different job is refused with one line naming what differs, except a function
fixed after its answer could not be stored; a run that starts before the frame the rows
kept end at is refused too), and the joined file equals an
uninterrupted run's, row for row. A run whose rows were all written finishes its join when
resumed with no frames to compute. Without ``resume``, a folder left by a killed run is
refused unless ``overwrite``.

Longer than 300 lines: this docstring is the results file's contract, and the sink's
checks (a row's values, the order of frames, the job on resume) sit beside the writing
they guard; the parts' records are :mod:`._parts`, the rows' formats :mod:`._rows_format`.

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
from ._parts import absorb, keep_only, kept_parts, write_part
from ._rows_format import (
    NotStorable,
    join_parquet,
    join_parts,
    json_line,
    plain,
    weight,
    write_rows,
)
from .base import Footprint, Sink
from .publish import check_output, fsync_path, lock_exclusive, publish, write_output

PART_ROWS = 4096
"""Rows a part holds at most."""
PART_SECONDS = 30.0
"""Rows wait at most this long in memory before they go to a part (a killed run loses less)."""
LEAST_BYTES = 4 << 20
"""The least the sink holds outside the pools: rows waiting for their part, and their
conversion when the part is written."""
WANTS_BYTES = 64 << 20
"""What it can use well: larger parts gain nothing."""
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
CONVERSION = {"jsonl": 2, "parquet": 12}
"""What a part's rows take at their peak while they are written, in multiples of them."""
INDEX_COLUMNS = ("path", "frame", "time", "computed", "answer_of")
"""The file's own columns: no answer may be named so."""
ENGINE_KEYS = frozenset(
    {
        "pts",
        "hyperframe",
        "hf_pos",
        "hf_len",
        "distance",
        "answer_of",
        "input",
        "input_frame",
        "input_sample",
        "at",
    }
)
"""Meta keys the engine fills (not values of the user's function)."""
JOB_FILE = "job.json"
LOCK_FILE = "writer.lock"
DONE_FILE = "done.json"
STOPPED_FILE = "stopped.json"
"""Where the sink notes the frame whose answer it could not store: a resume may then run a
fixed function (the rows before that frame are the earlier code's, and the report says so)."""
JOINING = "joining.parquet"
JOB_KEY = b"hyperframes.job"
"""Where a Parquet output keeps the job that made it (key-value metadata)."""
TIME_BASE_KEY = "hyperframes.time_base"
"""Where a Parquet output keeps the source's time base: ``time / time_base`` is each
frame's timestamp in the input (to join rows with the input's sound, say)."""


class ResumeRefused(HyperframesError, ValueError):
    """A resume of results made by another job (input, function or options differ), or
    of rows the run would duplicate."""


class RowError(HyperframesError, ValueError):
    """A frame's answer that the results file cannot hold."""


def parts_folder(path: str | os.PathLike[str]) -> Path:
    """The folder beside ``path`` where a run keeps its finished parts."""
    target = Path(path)
    return target.with_name(f".{target.name}.parts")


def resume_point(path: str | os.PathLike[str]) -> int:
    """The frame index after the last one an interrupted run wrote to ``path`` and kept
    intact (0 when nothing was)."""
    kept = kept_parts(parts_folder(path), FORMATS.get(Path(path).suffix.lower(), ""))
    return int(kept[-1][1]["next"]) if kept else 0


def resume_state(path: str | os.PathLike[str]) -> dict[str, int] | None:
    """Where an interrupted run's kept rows of ``path`` end: ``next`` (as
    :func:`resume_point`) and, for a job over many inputs, ``input`` (the position of the
    last kept row's input), ``input_frame`` (that row's frame in its file) and, where a
    sampling counts its samples, ``input_sample``; ``None`` when nothing was kept."""
    kept = kept_parts(parts_folder(path), FORMATS.get(Path(path).suffix.lower(), ""))
    if not kept:
        return None
    record = kept[-1][1]
    keys = ("next", "input", "input_frame", "input_sample")
    return {key: int(record[key]) for key in keys if key in record}


def rows_done(path: str | os.PathLike[str]) -> bool:
    """Whether an interrupted run wrote every row of ``path`` (only the join was left)."""
    folder = parts_folder(path)
    return (folder / DONE_FILE).is_file() and bool(
        kept_parts(folder, FORMATS.get(Path(path).suffix.lower(), ""))
    )


def job_of(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The job recorded in a finished Parquet results file (``None``: none recorded, or a
    JSON Lines file, which has no place for one)."""
    if FORMATS.get(Path(path).suffix.lower()) != "parquet":
        return None
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_schema(path).metadata or {}
        return dict(json.loads(metadata[JOB_KEY]))
    except (OSError, KeyError, ValueError, TypeError):
        return None


def has_parts(path: str | os.PathLike[str]) -> bool:
    """Whether a run left part files of ``path`` (rows not yet in the output)."""
    suffix = FORMATS.get(Path(path).suffix.lower(), "")
    return any(parts_folder(path).glob(f"part-*.{suffix}"))


def published_job(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The job of a run that published ``path`` and was stopped before it removed its
    parts folder (its rows all joined), else ``None``."""
    folder = parts_folder(path)
    if not (folder / DONE_FILE).is_file() or has_parts(path):
        return None
    try:
        return dict(json.loads((folder / JOB_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


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


def join_files(parts: list[Path], out: Path, job: dict[str, Any] | None = None) -> list[str]:
    """Results files of one format, in order, into a new file ``out`` (chunked runs'
    segments), columns widened to hold them all; memory: one part. A Parquet file records
    ``job`` as a :class:`ResultsSink` does (``--resume`` on it then finds it complete).
    Returns a line for each column that became text."""
    fmt = format_of(out)
    recorded = None if job is None else {JOB_KEY.decode(): json.dumps({"format": fmt, **job})}
    return join_parts(parts, out, fmt, recorded)


class ResultsSink(Sink):
    """Writes each frame's values as one row of a JSON Lines or Parquet file.

    Args:
        path: the output file; its suffix chooses the format. Taken as an absolute path
            when the sink is made (user code that changes the working folder later does not
            move it).
        values: the meta keys to write (the ``into=`` names); by default every key that is
            not the engine's own.
        job: what the rows are of (input, function, options), recorded and compared on
            resume (and kept in a Parquet output's metadata); JSON values.
        resume: continue the rows an interrupted run left (same ``job``); the run must
            start at :func:`resume_point`.
        overwrite: replace an existing output, and a killed run's parts.
    """

    takes_sizes = True  # (rows: the frames' pixels are not written)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        values: list[str] | None = None,
        job: dict[str, Any] | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(os.path.abspath(path))
        self.format = format_of(self.path)
        if resume and overwrite:
            raise ValueError("pass either resume (continue the rows) or overwrite, not both")
        check_output(self.path, overwrite=overwrite or resume)
        reserved = sorted(set(values or ()) & set(INDEX_COLUMNS))
        if reserved:
            raise ValueError(
                f"values named {reserved} would overwrite the results file's own columns "
                f"({', '.join(INDEX_COLUMNS)}); give them another into= name"
            )
        self.values = values
        self.job = json.loads(json.dumps({"format": self.format, **(job or {})}, default=str))
        self.resume, self.overwrite = resume, overwrite
        self.folder = parts_folder(self.path)
        self.rows_written = 0
        self.warnings: list[str] = []
        self.time_base: str | None = None  # the source's, from open()
        self.inputs: list[dict[str, Any]] = []  # many inputs (hf.VideoFiles): each row's
        self._rows: list[Any] = []
        self._bytes = 0
        self._limit = WANTS_BYTES // CONVERSION[self.format]
        self._since = time.monotonic()
        self._lock: int | None = None
        self._parts = 0  # the number the next part takes
        self._last: int | None = None  # the last frame written (its id)
        self._first: int | None = None  # the id of the first row of the part being filled
        self._where: dict[str, int] | None = None  # many inputs: the last row's input, frame
        self.fixed_after: int | None = None  # a resume ran a fixed function from this frame

    def footprint(self, spec: FrameSpec, facts: dict[str, Any]) -> Footprint:
        return Footprint("results", least=LEAST_BYTES, wants=WANTS_BYTES)

    def grant(self, nbytes: int) -> None:
        """Rows wait for their part up to a share of ``nbytes``: writing a part converts
        them while they are still held, which takes about their bytes again for JSON
        Lines and, measured, several times them for Parquet (Arrow's builders, the
        encoder, the join's reads: ``benchmarks/results_memory.py``)."""
        self._limit = max(1, nbytes // CONVERSION[self.format])

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Take the parts folder (new, or the interrupted run's on resume)."""
        self.time_base = str(info["time_base"]) if info.get("time_base") else None
        self.inputs = info.get("inputs") or []  # many inputs: each row says which
        taken = {*INDEX_COLUMNS, *(self.values or ())} - {"path"}
        clash = sorted({name for item in self.inputs for name in item} & taken)
        if clash:
            raise ValueError(
                f"the inputs' manifest has a column {clash[0]!r}, which the results file "
                "names itself; rename it in the manifest"
            )
        if self.folder.is_symlink():
            raise FileExistsError(f"{str(self.folder)!r} is a symbolic link; remove it")
        self.folder.mkdir(exist_ok=True)
        self._take_lock()
        job_file = self.folder / JOB_FILE
        if self.resume and job_file.is_file():
            try:
                self._check_job(json.loads(job_file.read_text()))
                self._take_kept()
            except BaseException:
                self._unlock()
                raise
            return
        if any(self.folder.glob("part-*")) and not self.overwrite:
            self._unlock()
            if self.resume:
                raise ResumeRefused(
                    f"the rows kept in {str(self.folder)!r} have lost their job record "
                    f"({JOB_FILE}), so no resume can vouch for them; pass --overwrite to "
                    "compute them again"
                )
            raise FileExistsError(
                f"an interrupted run left rows of {str(self.path)!r} in {str(self.folder)!r}; "
                "pass resume (--resume) to continue them or overwrite (--overwrite) to start again"
            )
        for stale in self.folder.iterdir():
            if stale.name != LOCK_FILE:
                _remove(stale)
        write_output(job_file, json.dumps(self.job), overwrite=True)

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        """Collect the batch's rows; a full or old enough part goes to disk.

        Raises:
            RowError: a frame's answer cannot be stored (the rows before it are kept).
            ResumeRefused: the frames come before the last one already written.
        """
        keys = self.values
        if keys is None:
            keys = [k for k in meta if k not in ENGINE_KEYS]
        missing = [key for key in keys if key not in meta]
        if missing:
            raise KeyError(f"no values named {missing[0]!r} reach the results; map(into=...)")
        frames_here = index.tolist()
        if frames_here:
            self._check_order(int(frames_here[0]))
        pts, origins = meta.get("pts"), meta.get("answer_of")
        inputs, numbers = meta.get("input"), meta.get("input_frame", index)
        samples = meta.get("input_sample")
        for j, frame in enumerate(frames_here):
            row: dict[str, Any] = {} if inputs is None else dict(self.inputs[int(inputs[j])])
            row["frame"] = int(numbers[j])
            row["time"] = None if pts is None else _time(pts[j])
            for key in keys:
                self._put(row, key, meta[key][j], int(frame))
            if origins is not None:
                row["computed"] = int(origins[j]) == int(frame)
                row["answer_of"] = int(origins[j]) - int(frame) + row["frame"]  # its file's
            if self.format == "jsonl":
                line = json_line(row)
                self._rows.append(line)
                self._bytes += 64 + len(line)
            else:
                self._rows.append(row)
                self._bytes += 200 + sum(weight(meta[key][j]) for key in keys)
            if len(self._rows) == 1:
                self._first = int(frame)
            self._last = int(frame)
            if inputs is not None:
                self._where = {"input": int(inputs[j]), "input_frame": row["frame"]}
                if samples is not None:  # a sampling that counts its samples
                    self._where["input_sample"] = int(samples[j])
            if self._bytes >= self._limit:
                self._flush()
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
                if not any(self.folder.glob("part-*")):  # nothing to resume: leave nothing
                    self._unlock()
                    shutil.rmtree(self.folder, ignore_errors=True)
                return None
            self._flush()
            if not (self.folder / DONE_FILE).is_file():
                write_output(self.folder / DONE_FILE, json.dumps({"rows": self.rows_written}))
            self._join()
            return str(self.path)
        except OSError as exc:
            if (self.folder / DONE_FILE).is_file():
                exc.add_note(
                    f"every row is kept in {str(self.folder)!r}: free the space or fix the "
                    "cause and resume (--resume) to finish the file"
                )
            raise
        finally:
            self._rows = []
            self._unlock()

    def notes(self) -> dict[str, Any]:
        notes: dict[str, Any] = {"rows": self.rows_written}
        if self.time_base:  # the source's: ``time / time_base`` is a frame's timestamp
            notes["time_base"] = self.time_base
        if self.fixed_after is not None:  # the rows before it are the earlier code's
            notes["function_changed_at"] = self.fixed_after
        if self.warnings:
            notes["warnings"] = list(self.warnings)
        return notes

    # -- rows ------------------------------------------------------------------------------

    def _put(self, row: dict[str, Any], key: str, raw: Any, frame: int) -> None:
        """``raw`` (the value of ``key``) into ``row``: a dict as its columns."""
        try:
            value = plain(raw)
        except NotStorable as exc:
            self._stopped_at(frame)
            raise RowError(f"frame {frame}, column {key!r}: {exc}") from None
        columns = value if isinstance(value, dict) else {key: value}
        for name, item in columns.items():
            if name in INDEX_COLUMNS:
                self._stopped_at(frame)
                raise RowError(
                    f"frame {frame}: the answer has a key {name!r}, which names one of the "
                    f"results file's own columns ({', '.join(INDEX_COLUMNS)}); rename it"
                )
            row[name] = item

    def _stopped_at(self, frame: int) -> None:
        with contextlib.suppress(OSError):
            write_output(self.folder / STOPPED_FILE, json.dumps({"frame": frame}), overwrite=True)

    def _check_order(self, first: int) -> None:
        """Refuse frames that come before those written: they would be rows twice."""
        if self._last is not None and first <= self._last:
            raise ResumeRefused(
                f"frame {first} reaches {str(self.path)!r} after frame {self._last} was "
                f"written; start the run at frame {self._last + 1} (resume_point)"
            )

    # -- parts ---------------------------------------------------------------------------

    def _flush(self) -> None:
        self._since = time.monotonic()
        if not self._rows:
            return
        rows, self._rows, self._bytes = self._rows, [], 0
        assert self._first is not None and self._last is not None
        where = dict(self._where or {})
        write_part(self.folder, self._parts, self.format,
                   lambda temp: write_rows(rows, temp, self.format), (self._first, self._last),
                   len(rows), where)  # fmt: skip
        self._parts += 1
        self.rows_written += len(rows)

    def _take_kept(self) -> None:
        """Continue after the parts that check out; drop what follows them (a part missing
        or damaged, and the parts after it, are computed again) and the bytes a kill left
        past a part's record."""
        kept = kept_parts(self.folder, self.format)
        keep_only(self.folder, kept)
        (self.folder / JOINING).unlink(missing_ok=True)
        self.rows_written = sum(int(r["rows"]) for _, r in kept)
        done = self.folder / DONE_FILE
        if done.is_file() and _rows_of(done) != self.rows_written:
            done.unlink()
        if kept:
            self._parts = int(kept[-1][1]["through"]) + 1
            self._last = int(kept[-1][1]["next"]) - 1

    def _join(self) -> None:
        """The parts, in order, into the output; then the parts folder goes."""
        kept = kept_parts(self.folder, self.format)
        if self.format == "parquet":
            temp = self.folder / JOINING
            metadata = {JOB_KEY.decode(): json.dumps(self.job)}
            if self.time_base:
                metadata[TIME_BASE_KEY] = self.time_base
            self.warnings = join_parquet([p for p, _ in kept], temp, metadata)
            publish(temp, self.path)
        elif kept:
            head = absorb(kept)
            publish(head, self.path)
        else:
            write_output(self.path, "", overwrite=True)
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            fsync_path(self.folder.parent)

    def _check_job(self, recorded: dict[str, Any]) -> None:
        """Refuse another job's rows; a function changed after its answer at a frame could
        not be stored (the fix the error asked for) is taken, and noted."""
        keys = [
            k for k in sorted(set(recorded) | set(self.job)) if recorded.get(k) != self.job.get(k)
        ]
        stopped = self.folder / STOPPED_FILE
        before, now = recorded.get("inputs"), self.job.get("inputs")
        if keys == ["inputs"] and isinstance(before, list) and now[: len(before)] == before:
            write_output(self.folder / JOB_FILE, json.dumps(self.job), overwrite=True)
            return  # inputs added after those the rows are of (``--add-new``)
        if keys == ["function"] and stopped.is_file():
            self.fixed_after = int(json.loads(stopped.read_text())["frame"])
            write_output(self.folder / JOB_FILE, json.dumps(self.job), overwrite=True)
            stopped.unlink()
            return
        differs = [f"{k}: {recorded.get(k)!r} then, {self.job.get(k)!r} now" for k in keys]
        if differs:
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


def _rows_of(done: Path) -> int:
    try:
        return int(json.loads(done.read_text())["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def _time(value: Any) -> float | None:
    seconds = float(value)
    return seconds if np.isfinite(seconds) else None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
