"""Where a chunked command's time goes, timed as the user waits (issue 30).

The job of issue 30: ``bikes.mp4`` x 8 (2,000 frames, a keyframe every 50) transcoded to
FFV1 at 320x136 by the whole command

    hyperframes transcode in.mp4 out.mkv --codec ffv1 --size 320x136 \\
        --chunks --executor ray --ray-address 127.0.0.1:6399

on a local cluster of one or two 1-CPU nodes (``ray start``, loopback only: the script
re-runs itself under ``tests/loopback.py``), and the same transcode run locally (threads,
no Ray) for what one machine gives. Rounds alternate one node, two nodes and local.

Each command runs in a child that times its phases from inside (the interpreter's
start-up and imports, importing Ray, joining the cluster, reading the packets to plan,
the segments, the join, Ray's disconnect, the interpreter's exit) and reports its
segments' busy time (source: decode and resize, sink: encode).

``--pin`` starts each node under ``taskset`` on a core of its own, as 1-CPU machines
are: unpinned, a "1-CPU" node on this 2-core machine runs its decoder and encoder
threads on both cores, so one node is not one CPU and two are not twice that.

``--job 1080p-ffv1`` / ``1080p-x264``: bigbuckbunny upscaled to 1080p (1,056 frames) to FFV1
or to x264, the same way (issue 30's 1080p jobs).

Run:  python benchmarks/chunked_command.py [--rounds 3] [--pin] [--job bikes]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PORT = 6399
PHASES = """
import atexit, json, os, sys, time
t0 = time.time()
marks = {}
def timed(module, name, label):
    orig = getattr(module, name)
    def wrapper(*a, **k):
        t = time.time()
        try:
            return orig(*a, **k)
        finally:
            marks[label] = marks.get(label, 0.0) + time.time() - t
    setattr(module, name, wrapper)
import hyperframes.executors.ray as er
timed(er, "import_ray", "import ray")
timed(er, "start_ray", "join the cluster")
import hyperframes.chunked as ch
timed(ch, "video_frames", "plan (read packets)")
timed(ch, "join", "join segments")
timed(ch, "_wait_all", "segments")
from hyperframes.cli import main
marks["start-up and imports"] = time.time() - t0
code = main(sys.argv[1:])
def write_marks():
    marks["until exit"] = time.time() - t0
    with open(os.environ["HF_PHASES"], "w") as f:
        json.dump(marks, f)
atexit.register(write_marks)  # as the hyperframes command ends (hyperframes.cli.run):
if "ray" in sys.modules:  # a driver of a cluster it joined leaves at once
    from hyperframes.executors.ray import leave_quickly
    t = time.time()
    leave_quickly(code)
    if sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()
        marks["disconnect"] = time.time() - t
sys.exit(code)
"""


def in_own_namespace() -> bool:
    import socket

    return [name for _, name in socket.if_nameindex()] == ["lo"]


def start_cluster(nodes: int, pin: bool, env: dict[str, str]) -> None:
    ray = str(Path(sys.executable).parent / "ray")
    for k in range(nodes):
        where = ["--head", "--port", str(PORT), "--include-dashboard=false"]
        if k:
            where = ["--address", f"127.0.0.1:{PORT}"]
        pinned = ["taskset", "-c", str(k % (os.cpu_count() or 1))] if pin else []
        subprocess.run([*pinned, ray, "start", *where, "--num-cpus", "1",
                        "--disable-usage-stats"], env=env, check=True,
                       capture_output=True)  # fmt: skip
    time.sleep(2)  # the second node registers


def stop_cluster(env: dict[str, str]) -> None:
    ray = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray, "stop", "--force"], env=env, capture_output=True)


JOBS = {
    "bikes": ["--codec", "ffv1", "--size", "320x136"],
    "1080p-ffv1": ["--codec", "ffv1"],
    "1080p-x264": ["--codec", "libx264"],
}
"""The transcodes timed: issue 30's bikes job, and the 1080p jobs (bigbuckbunny upscaled,
1,056 frames) to FFV1 and to x264 (its default settings here: crf 23, preset medium)."""


def make_1080p(folder: Path) -> Path:
    """bigbuckbunny upscaled to 1920x1080 (bicubic), 8 times in a row (1,056 frames), H.264
    crf 18 with a keyframe every 48 frames (made as ``chunked.make_input`` makes bikes')."""
    import av

    from clips import clip_folder

    path = folder / "bbb-1080p-x8.mp4"
    with av.open(str(clip_folder() / "bigbuckbunny.mp4")) as source:
        frames = [
            f.reformat(
                width=1920, height=1080, format="yuv420p", interpolation="BICUBIC"
            ).to_ndarray()
            for f in source.decode(video=0)
        ]
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        stream.options = {"g": "48", "keyint_min": "48", "sc_threshold": "0", "crf": "18"}
        for i in range(8 * len(frames)):
            frame = av.VideoFrame.from_ndarray(frames[i % len(frames)], format="yuv420p")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def command(
    source: Path, out: Path, phases: Path, env: dict[str, str], ray: bool, job: str = "bikes"
) -> dict:
    """Run the whole command in a child; its wall, its phases and its report."""
    args = [str(source), str(out), *JOBS[job], "--json"]
    if ray:
        args += ["--chunks", "--executor", "ray", "--ray-address", f"127.0.0.1:{PORT}"]
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    got = subprocess.run(
        [sys.executable, "-c", PHASES, "transcode", *args],
        env=env | {"HF_PHASES": str(phases)}, capture_output=True, text=True,
    )  # fmt: skip
    if got.returncode:
        raise SystemExit(f"the command failed: {got.stderr[-2000:]}")
    wall = time.perf_counter() - t0
    report = json.loads(got.stdout)
    marks = json.loads(phases.read_text())
    marks["exit"] = wall - marks.pop("until exit")
    busy = {s["name"]: s["busy_s"] for s in report["stages"]}
    return {"wall": wall, "report_wall": report["wall_s"], "phases": marks, "busy": busy}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", type=int, default=8)
    ap.add_argument("--pin", action="store_true", help="each node on a core of its own")
    ap.add_argument("--job", choices=sorted(JOBS), default="bikes", help="the transcode timed")
    ap.add_argument(
        "--prestart",
        action="store_true",
        help="start the nodes with RAY_enable_worker_prestart=1 (each boots a worker per CPU)",
    )
    args = ap.parse_args()
    if not in_own_namespace():
        loopback = [sys.executable, str(REPO / "tests" / "loopback.py"), sys.executable]
        raise SystemExit(subprocess.call([*loopback, __file__, *sys.argv[1:]]))
    sys.path.insert(0, str(HERE))
    from chunked import make_input

    folder = Path(tempfile.mkdtemp(prefix="hf-chunked-command-"))
    source = make_input(folder, args.loops) if args.job == "bikes" else make_1080p(folder)
    env = os.environ | {
        "PYTHONPATH": str(REPO / "src"), "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }  # fmt: skip
    if args.prestart:
        env["RAY_enable_worker_prestart"] = "1"
    runs: dict[str, list[dict]] = {"1 node": [], "2 nodes": [], "local": []}
    out = folder / ("out.mp4" if args.job.endswith("x264") else "out.mkv")
    try:
        for _ in range(args.rounds):
            for name in runs:
                if name == "local":
                    got = command(source, out, folder / "p.json", env, ray=False, job=args.job)
                else:
                    start_cluster(int(name[0]), args.pin, env)
                    try:
                        got = command(source, out, folder / "p.json", env, ray=True, job=args.job)
                    finally:
                        stop_cluster(env)
                runs[name].append(got)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"job {args.job}, {'pinned' if args.pin else 'unpinned'} nodes"
          f"{', workers prestarted' if args.prestart else ''}, "
          f"median of {args.rounds} rounds (seconds)")  # fmt: skip
    phases = sorted({p for r in runs["2 nodes"] for p in r["phases"]})
    print(f"{'':<26}" + "".join(f"{n:>10}" for n in runs))
    for label, pick in [("whole command", lambda r: r["wall"]),
                        ("run report's wall_s", lambda r: r["report_wall"]),
                        *[(p, lambda r, p=p: r["phases"].get(p, 0.0)) for p in phases],
                        ("source busy (summed)", lambda r: r["busy"].get("source", 0.0)),
                        ("sink busy (summed)", lambda r: r["busy"].get("sink", 0.0))]:  # fmt: skip
        cells = "".join(f"{statistics.median(pick(r) for r in rs):>10.2f}" for rs in runs.values())
        print(f"{label:<26}{cells}")
    one, two, local = (statistics.median(r["wall"] for r in runs[n]) for n in runs)
    print(
        f"two nodes / one node, whole command: {one / two:.2f}x (goal >= 1.6x); "
        f"local threads on this machine: {one / local:.2f}x one node"
    )


if __name__ == "__main__":
    main()
