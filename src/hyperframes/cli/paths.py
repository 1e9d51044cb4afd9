"""What a command reads and what it writes, checked against each other before it starts.

Each command declares the arguments that name what it reads (``reads``) and writes
(``writes``); the side outputs every long command may have (``--report``, ``--plot``,
``--plot-dir``) are writes too. A written path may not be a path the command reads, nor lie
inside a folder it reads (a store, an image folder), nor be written twice. The writers
themselves check the rest (an existing path, links, a store's folder: ``io.publish``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

SIDE_OUTPUTS = {"report": "--report", "plot": "--plot", "plot_dir": "--plot-dir"}


def absolute_paths(args: argparse.Namespace) -> None:
    """Every path the command reads or writes as an absolute path, before any user code
    runs: a function that changes the working folder cannot move them. A trailing ``/``
    (a folder, where a command tells files from folders by it) is kept."""
    names = [*getattr(args, "reads", ()), *getattr(args, "writes", ()), *SIDE_OUTPUTS]
    for name in names:
        value = getattr(args, name, None)
        if isinstance(value, str) and value and "://" not in value:
            folder = os.sep if value.endswith(os.sep) else ""
            setattr(args, name, os.path.abspath(value) + folder)


def check_paths(args: argparse.Namespace) -> None:
    """Refuse, before any work, a command whose outputs would land on its inputs.

    Raises:
        ValueError: an output is an input, lies inside an input folder, or is named twice.
    """
    reads = [(name, Path(v)) for name in getattr(args, "reads", ()) if (v := getattr(args, name))]
    names = [*((n, n.upper()) for n in getattr(args, "writes", ())), *SIDE_OUTPUTS.items()]
    writes = [(flag, Path(v)) for name, flag in names if (v := getattr(args, name, None))]
    for flag, out in writes:
        for source, src in reads:
            if _same(out, src):
                raise ValueError(
                    f"the output is the input: {flag} {str(out)!r} is the {source.upper()} "
                    "the command reads; name another path"
                )
            if src.is_dir() and _inside(out, src):
                raise ValueError(
                    f"{flag} {str(out)!r} lies inside the {source.upper()} the command reads; "
                    "name a path outside it"
                )
    _check_side_outputs(args)
    for k, (flag, out) in enumerate(writes):
        for other, path in writes[k + 1 :]:
            if _same(out, path) or (path.is_dir() and _inside(out, path)):
                raise ValueError(
                    f"{flag} and {other} both name {str(out)!r}; give each output its own path"
                )


def _check_side_outputs(args: argparse.Namespace) -> None:
    """``--report``, ``--plot`` and the files of ``--plot-dir`` as outputs (``io.publish``),
    now rather than after the run has been paid for."""
    from ..io.publish import check_output

    given = vars(args)  # the side outputs a command has (not every one has each)
    overwrite = bool(given.get("overwrite"))
    files = [given.get("report"), given.get("plot")]
    folder = given.get("plot_dir")
    if folder and Path(folder).is_dir():
        from ..metrics.timeline import PLOTS

        files += [Path(folder) / name for name in PLOTS]
    for path in files:
        if path and (Path(path).parent.is_dir() or Path(path).is_symlink()):
            check_output(path, overwrite=overwrite)


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return Path(os.path.abspath(a)) == Path(os.path.abspath(b))


def _inside(path: Path, folder: Path) -> bool:
    here = Path(os.path.realpath(path.parent)) / path.name
    return Path(os.path.realpath(folder)) in here.parents
