"""Which files an image sequence is, in order, and how they are named: a folder, a printf
pattern (``frames/frame_%04d.png``) or a glob, ordered by the numbers in the names
(``f_2.png`` before ``f_10.png``); the pattern an output can name its images by.

Example:
    >>> naming_of([Path("frame_0001.png"), Path("frame_0002.png")])
    {'pattern': 'frame_%04d.png', 'first_number': 1, 'number_step': 1}
    >>> as_template("img_%05d.png")
    'img_{index:05d}.png'
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from pathlib import Path
from typing import Any

from ..errors import MediaError
from .inputs import IMAGE_SUFFIXES, PRINTF

_DIGITS = re.compile(r"(\d+)")


def list_images(pattern_or_dir: str | os.PathLike[str]) -> list[Path]:
    """The image files a source reads, in order: by the numbers in their names, so
    ``f_2.png`` comes before ``f_10.png`` (names without numbers by name).

    Args:
        pattern_or_dir: a folder, a printf pattern (``frame_%06d.png``) or a glob
            (``*.jpg``).

    Raises:
        MediaError: nothing matches.
    """
    text = os.fspath(pattern_or_dir)
    if Path(text).is_dir():
        found = sorted((p for p in Path(text).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
                        and not p.name.startswith(".")), key=_in_number_order)  # fmt: skip
    elif PRINTF.search(text):
        found = _numbered(Path(text))
    else:
        found = sorted((Path(name) for name in glob.glob(text)), key=_in_number_order)
    if not found:
        raise MediaError(
            f"no images found at {text!r}; name a folder of images, a pattern such as "
            "'frames/frame_%06d.png' or a glob such as 'frames/*.jpg'"
        )
    return found


def _in_number_order(path: Path) -> tuple[Any, ...]:
    """A sort key that orders the numbers in a path by value, the rest by text."""
    parts = _DIGITS.split(str(path))
    return tuple((0, int(p), "") if k % 2 else (1, 0, p) for k, p in enumerate(parts))


def naming_of(files: list[Path]) -> dict[str, Any]:
    """How ``files`` are named, for an output to name its images the same way:
    ``{"pattern": "frame_%04d.png", "first_number": 1, "number_step": 1}`` where every
    name is one pattern's with numbers ``first_number``, ``first_number + number_step``,
    ...; ``{}`` otherwise. (Flat: a store's header keeps its source's scalars.)"""
    match = re.fullmatch(r"(.*?)(\d+)(\D*)", files[0].name) if files else None
    if match is None:
        return {}
    head, digits, tail = match.groups()
    width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
    field = f"%0{width}d" if width else "%d"
    numbers = []
    for path in files:
        m = re.fullmatch(re.escape(head) + r"(\d+)" + re.escape(tail), path.name)
        if m is None or (width and len(m.group(1)) != width):
            return {}
        numbers.append(int(m.group(1)))
    step = numbers[1] - numbers[0] if len(numbers) > 1 else 1
    if step < 1 or any(b - a != step for a, b in itertools.pairwise(numbers)):
        return {}
    if any(c in head + tail for c in "%{}"):
        return {}  # no pattern could name them
    return {"pattern": head + field + tail, "first_number": numbers[0], "number_step": step}


def _numbered(pattern: Path) -> list[Path]:
    """Files matching a printf pattern in its folder, ordered by their number."""
    folder, name = pattern.parent, pattern.name
    if PRINTF.search(str(folder)):
        raise ValueError(f"only the file name may hold a %d field, got {str(pattern)!r}")
    regex, last = "", 0
    for match in PRINTF.finditer(name):
        width = match.group(2)
        digits = rf"\d{{{width},}}" if match.group(1) and width else r"\d+"
        regex += re.escape(name[last : match.start()]) + f"({digits})"
        last = match.end()
    compiled = re.compile(regex + re.escape(name[last:]) + r"\Z")
    if not folder.is_dir():
        return []
    hits = ((compiled.match(p.name), p) for p in folder.iterdir())
    return [p for m, p in sorted((int(m.group(1)), p) for m, p in hits if m)]


def as_template(pattern: str) -> str:
    """A file-name pattern as a :meth:`str.format` template: a printf number field
    (``%06d``, ``%d``) becomes ``{index:06d}``; a template is kept."""
    if "{" in pattern or not PRINTF.search(pattern):
        return pattern
    field = PRINTF.search(pattern)
    assert field is not None
    width = f":{field.group(1)}{field.group(2)}d" if field.group(2) else ""
    return pattern[: field.start()] + "{index" + width + "}" + pattern[field.end() :]
