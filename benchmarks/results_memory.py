"""Memory bounded by answers, not by rows: ``hyperframes map`` of a function whose answers
are heavy (a 16 KiB mask, a 256 KiB float map per frame), this tree against an earlier
commit (rows buffered by count) side by side, JSON Lines and Parquet, whole processes.

For each: the whole command's wall time, its peak PSS, and the memory budget of the run's
plan (``--memory``); the sink's share of the plan is ``results.WANTS_BYTES`` at most. The
rows of the two trees are compared (equal, frame by frame).

    python benchmarks/results_memory.py [--frames 1000] [--before 8319dce] [--memory 256MiB]

Goal (issue 47): peak PSS with 256 KiB answers within the plan: no more than a run of tiny
answers plus the plan's budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from map_job import bunny, copied, measure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ANSWERS = """
import numpy as np

def tiny(frames):
    return [float(f.mean()) for f in frames]

def mask16k(frames):                 # a 128 x 128 uint8 mask a frame: 16 KiB
    return [np.full((128, 128), int(f[0, 0, 0]) % 2, np.uint8) for f in frames]

def map256k(frames):                 # a 256 x 256 float32 map a frame: 256 KiB
    return [np.full((256, 256), f.mean() / 255, np.float32) for f in frames]
"""


def run(tree: Path, clip: Path, fn: str, out: Path, memory: str, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{work}:{tree / 'src'}"}
    argv = [sys.executable, "-m", "hyperframes", "map", str(clip), f"answers:{fn}", "--out",
            str(out), "--workers", "2", "--memory", memory, "--json", "--overwrite"]  # fmt: skip
    try:
        got = measure(argv, env=env, cwd=work)
    except RuntimeError as exc:
        return {"wall": 0.0, "pss": 0, "error": str(exc)[-300:]}
    report = json.loads(got["out"].strip().splitlines()[-1])
    return got | {"budget": report["memory_budget"], "batch": report["batch_size"],
                  "slots": report["pool_slots"]}  # fmt: skip


def rows(path: Path) -> list:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--before", default="8319dce", help="the commit to compare with")
    ap.add_argument("--memory", default="256MiB")
    ap.add_argument("--fns", default="tiny,mask16k,map256k")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hf-results-mem-"))
    (work / "answers.py").write_text(ANSWERS)
    before = work / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before),
                    args.before], check=True)  # fmt: skip
    try:
        clip = copied(bunny(), args.frames, work / f"bunny-{args.frames}.mp4")
        print(f"# {args.frames} frames of 720p, --memory {args.memory}, 2 workers; whole command")
        print("# over tiny: peak PSS above the same tree's run of tiny answers (same format)")
        print(f"{'answers':<9}{'format':<9}{'tree':<8}{'wall s':>8}{'peak PSS MiB':>14}"
              f"{'over tiny':>11}  note")  # fmt: skip
        tiny: dict[tuple[str, str], float] = {}
        for fn in args.fns.split(","):
            for suffix in (".jsonl", ".parquet"):
                got = {}
                for name, tree in (("ours", ROOT), ("before", before)):
                    out = work / f"{name}-{fn}{suffix}"
                    got[name] = r = run(tree, clip, fn, out, args.memory, work)
                    base = tiny.setdefault((name, suffix), r["pss"]) if fn == "tiny" else None
                    over = (r["pss"] - tiny.get((name, suffix), r["pss"])) / 2**20
                    note = r.get("error") or (
                        f"budget {r['budget'] / 2**20:.0f} MiB, batch {r['batch']} x "
                        f"{r['slots']} slots"
                    )
                    print(f"{fn:<9}{suffix[1:]:<9}{name:<8}{r['wall']:>8.1f}"
                          f"{r['pss'] / 2**20:>14.0f}{over:>11.0f}  {note}")  # fmt: skip
                    del base
                if "error" not in got["ours"] and "error" not in got["before"]:
                    same = rows(work / f"ours-{fn}{suffix}") == rows(work / f"before-{fn}{suffix}")
                    ratio = got["ours"]["pss"] / got["before"]["pss"]
                    print(f"{'':<26}ours / before peak PSS {ratio:.2f}; rows equal: {same}")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)])


if __name__ == "__main__":
    main()
