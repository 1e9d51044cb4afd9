"""The many-inputs job on a local Ray cluster: two 1-CPU nodes against one (issue 50).

The job of ``many_inputs.py`` (``--clips`` short clips, mixed sizes and codecs, one damaged
and one with irregular timestamps), run as the whole command a user runs:

    hyperframes map CLIPS fn:brightness --out rows.parquet --size 640x360 \\
        --executor ray --ray-address 127.0.0.1:6399

on a cluster of one node and of two (``ray start``, 1 CPU each, loopback only: the script
re-runs itself under ``tests/loopback.py``), rounds alternating. Runs of whole inputs go
to the nodes as Ray tasks, each reading its files with a decoder of its own. The two
tables are compared row for row with a local run's. ``--pin`` starts each node under
``taskset`` on a core of its own, as 1-CPU machines are; unpinned, a node's threads (the
function's, the reader process's) use both cores of this machine.

Run:  python benchmarks/many_inputs_nodes.py [--clips 400] [--rounds 2] [--pin] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--clips", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pin", action="store_true", help="each node on a core of its own")
    ap.add_argument("--cache", type=Path, help="where the clips are made once (default: a "
                    "folder in the temporary folder, by --clips)")  # fmt: skip
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from chunked_command import PORT, in_own_namespace, start_cluster, stop_cluster

    if not in_own_namespace():
        loopback = [sys.executable, str(REPO / "tests" / "loopback.py"), sys.executable]
        raise SystemExit(subprocess.call([*loopback, __file__, *sys.argv[1:]]))
    import pyarrow.parquet as pq

    from many_inputs import CACHE, FUNCTION, make_clips

    folder = args.cache or CACHE.with_name(f"{CACHE.name}-{args.clips}")
    folder.mkdir(parents=True, exist_ok=True)
    clips, _, _, frames = make_clips(args.clips, folder)
    (folder / "fn.py").write_text(FUNCTION)
    env = os.environ | {
        "PYTHONPATH": f"{REPO / 'src'}:{folder}", "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }  # fmt: skip
    job = [sys.executable, "-m", "hyperframes", "map", str(clips), "fn:brightness",
           "--size", "640x360", "--overwrite"]  # fmt: skip

    def command(out: str, *extra: str) -> float:
        t0 = time.perf_counter()
        got = subprocess.run([*job, "--out", str(folder / out), *extra], env=env,
                             capture_output=True, text=True, cwd=folder)  # fmt: skip
        if got.returncode not in (0, 4):  # 4: the damaged clip, listed
            raise SystemExit(f"the command failed: {got.stderr[-2000:]}")
        return time.perf_counter() - t0

    local = command("local.parquet", "--workers", "2")
    walls: dict[str, list[float]] = {"1 node": [], "2 nodes": []}
    ray = ["--executor", "ray", "--ray-address", f"127.0.0.1:{PORT}"]
    for _ in range(args.rounds):
        for name in walls:
            start_cluster(int(name[0]), args.pin, env)
            try:
                walls[name].append(command(f"ray{name[0]}.parquet", *ray))
            finally:
                stop_cluster(env)
    expected = pq.read_table(folder / "local.parquet")
    for n in "12":
        assert pq.read_table(folder / f"ray{n}.parquet").equals(expected), f"{n} node(s) differ"
    one, two = (statistics.median(w) for w in walls.values())
    pinned = "pinned" if args.pin else "unpinned"
    print(f"{args.clips} clips, {frames} frames; {pinned} nodes, median of {args.rounds} "
          "rounds; the tables equal a local run's row for row")  # fmt: skip
    print("| run | whole command s | frames/s |\n|---|---:|---:|")
    for name, wall in (("local, threads (2 workers)", local), ("1 node", one), ("2 nodes", two)):
        print(f"| {name} | {wall:.1f} | {frames / wall:.0f} |")
    print(f"\ntwo nodes / one node, whole command: {one / two:.2f}x (goal >= 1.6x)")


if __name__ == "__main__":
    main()
