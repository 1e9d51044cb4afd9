"""A folder of parts that check out: each part file has a record beside it (``part-N.json``,
written after the part) of its rows, its frames and the size and SHA-256 of its bytes, so
that a part missing, cut short or changed is found, and the parts after it with it.

A part's bytes may be *pieces*: joining JSON Lines appends each part to the first
(:func:`absorb`), and the first's record then lists every piece it holds and the last part
it took in (``through``), so a kill at any moment leaves a folder :func:`kept_parts`
reads as before: bytes appended past the record are not counted, and a part the record
already took in is not read twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from .publish import publish, temp_beside, write_output

Record = dict[str, Any]


def part_path(folder: Path, number: int, fmt: str) -> Path:
    return folder / f"part-{number:06d}.{fmt}"


def write_part(
    folder: Path,
    number: int,
    fmt: str,
    write: Any,
    frames: tuple[int, int],
    rows: int,
    where: dict[str, int] | None = None,
) -> None:
    """A new part ``number``: ``write(temp)`` writes its bytes, which are published whole;
    its record (``frames``: its first and last frame's ids; ``where``: more to note, such
    as the input of its last row) follows."""
    part = part_path(folder, number, fmt)
    temp = temp_beside(part)
    try:
        write(temp)
        publish(temp, part)
    finally:
        temp.unlink(missing_ok=True)
    record = {
        "rows": rows, "first": frames[0], "next": frames[1] + 1, "through": number,
        "pieces": [[part.stat().st_size, checksum(part)]], **(where or {}),
    }  # fmt: skip
    # the part's record comes after the part: a part without one is not counted
    write_output(part.with_suffix(".json"), json.dumps(record), overwrite=True)


def kept_parts(folder: Path, fmt: str) -> list[tuple[Path, Record]]:
    """The finished parts that check out, in order, with their records: each part's
    record (``part-N.json``, written after the part) is there and its bytes match the
    record's pieces (bytes past them, an append a kill cut short, are not read); the first
    that does not ends the list."""
    found: list[tuple[Path, dict[str, Any]]] = []
    number = 0
    while (part := part_path(folder, number, fmt)).is_file():
        try:
            record = json.loads(part.with_suffix(".json").read_text())
            pieces = [(int(size), str(digest)) for size, digest in record["pieces"]]
            through = int(record["through"])
        except (OSError, ValueError, KeyError, TypeError):
            break
        if through < number or not matches(part, pieces):
            break
        found.append((part, record))
        number = through + 1
    return found


def matches(part: Path, pieces: list[tuple[int, str]]) -> bool:
    size = sum(n for n, _ in pieces)
    try:
        if part.stat().st_size < size:
            return False
        with open(part, "rb") as data:
            for n, digest in pieces:
                if checksum(data, n) != digest:
                    return False
    except OSError:
        return False
    return True


def absorb(kept: list[tuple[Path, Record]]) -> Path:
    """Append every kept part to the first, one at a time, each dropped once its bytes
    are on disk in the first and the first's record says so: a kill at any moment leaves
    parts that :func:`kept_parts` reads as before. Returns the first part."""
    head, record = kept[0]
    for part, more in kept[1:]:
        with open(head, "ab") as out, open(part, "rb") as src:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        record = {
            **record, "rows": record["rows"] + more["rows"], "next": more["next"],
            "through": more["through"], "pieces": record["pieces"] + more["pieces"],
        }  # fmt: skip
        write_output(head.with_suffix(".json"), json.dumps(record), overwrite=True)
        part.unlink()
        part.with_suffix(".json").unlink()
    return head


def checksum(source: Path | Any, size: int | None = None) -> str:
    """The SHA-256 of a file, or of the next ``size`` bytes of an open one."""
    digest = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        data = stack.enter_context(open(source, "rb")) if isinstance(source, Path) else source
        left = size
        while left is None or left > 0:
            block = data.read(1 << 20 if left is None else min(1 << 20, left))
            if not block:
                break
            digest.update(block)
            if left is not None:
                left -= len(block)
    return digest.hexdigest()


def keep_only(folder: Path, kept: list[tuple[Path, Record]]) -> None:
    """Drop every part file and record that is not ``kept`` (a damaged part, those after
    it, a part already taken in), and the bytes past each kept part's pieces."""
    names = {name for p, _ in kept for name in (p.name, p.with_suffix(".json").name)}
    for path in folder.glob("part-*"):
        if path.name not in names:
            path.unlink()
    for part, record in kept:
        size = sum(int(n) for n, _ in record["pieces"])
        if part.stat().st_size > size:
            os.truncate(part, size)
