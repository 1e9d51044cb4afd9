"""Video benchmark: the serial PyAV loop vs `transcode` vs the bound of its parts.

Job: decode Big Buck Bunny (1280x720 H.264, looped to N frames) -> resize to 640x360
(OpenCV INTER_AREA) -> encode libx264 ultrafast. Side by side in one run, each in its own
process (so peak RSS is its own):

  serial      a plain PyAV loop: decode, to_ndarray (RGB), resize, from_ndarray, encode, mux
  serial-yuv  the same loop kept in yuv420p planes (no colour conversion), for fairness
  pipeline    hyperframes transcode (source thread, resize workers, sink; it stays in
              yuv420p planes from decoder to encoder when it can, as here)
  decode      decode-only through VideoSource (the pipeline's source alone)
  op          resize-only on frames already in memory (as the pipeline does it)
  encode      encode-only from frames already in memory through VideoSink

Targets (issue 3): pipeline >= 0.9 x min(decode, op, encode) and >= 1.3 x serial;
peak RSS flat from 3,000 to 30,000 frames.

Run:  python benchmarks/video.py [--frames 3000] [--rss-frames 30000]
"""

from __future__ import annotations

import argparse
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

from clips import clip_folder  # this folder's helper: the real clips

W, H = 640, 360


def clip() -> Path:
    return clip_folder() / "bigbuckbunny.mp4"


def resize(frame: np.ndarray) -> np.ndarray:
    return cv2.resize(frame, (W, H), interpolation=cv2.INTER_AREA)


def run_serial(n: int, out: Path, planar: bool = False) -> int:
    from hyperframes.io.yuv import resize_i420

    done = 0
    with av.open(str(out), "w") as dst:
        stream = dst.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        while done < n:
            with av.open(str(clip())) as src:
                src.streams.video[0].thread_type = "AUTO"
                for frame in src.decode(video=0):
                    if planar:
                        small = resize_i420(frame.to_ndarray()[None], W, H)[0]
                        out_frame = av.VideoFrame.from_ndarray(small, "yuv420p")
                    else:
                        small = resize(frame.to_ndarray(format="rgb24"))
                        out_frame = av.VideoFrame.from_ndarray(small, "rgb24")
                    for packet in stream.encode(out_frame):
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
    return Looped(lambda: VideoSource(clip(), pix_fmt="yuv420p"), times=times)


def run_serial_yuv(n: int, out: Path) -> int:
    return run_serial(n, out, planar=True)


def run_pipeline(n: int, out: Path) -> int:
    from hyperframes.cli.video import transcode

    job = argparse.Namespace(
        input=str(clip()), output=str(out), codec="libx264", crf=None, preset="ultrafast",
        pix_fmt=None, overwrite=True, size=(W, H), start=0, stop=None, loop=-(-n // 132),
        on_corrupt="fail", workers=2, batch_size=16, json=True,
    )  # fmt: skip
    report, _ = transcode(job)
    return report.frames


def run_decode(n: int, out: Path) -> int:
    from hyperframes import Pipeline

    return Pipeline.from_source(looped_source(n), batch_size=16).run().frames


def memory_frames(count: int = 132) -> np.ndarray:
    from hyperframes import Pipeline
    from hyperframes.io.video import VideoSource

    source = VideoSource(clip(), pix_fmt="yuv420p")
    return Pipeline.from_source(source, batch_size=16).collect()[:count]


def run_op(n: int, out: Path) -> tuple[int, float]:
    from hyperframes.io.yuv import resize_i420

    frames = memory_frames()
    t0 = time.perf_counter()
    for start in range(0, n, 16):
        idx = np.arange(start, min(start + 16, n)) % len(frames)
        resize_i420(frames[idx], W, H)
    return n, time.perf_counter() - t0


def run_encode(n: int, out: Path) -> tuple[int, float]:
    from hyperframes.io.video_sink import VideoSink
    from hyperframes.io.yuv import resize_i420

    small = resize_i420(memory_frames(), W, H)
    sink = VideoSink(
        out, codec="libx264", preset="ultrafast", overwrite=True, fps=25, input_pix_fmt="yuv420p"
    )
    from hyperframes import FrameSpec

    sink.open(FrameSpec(small.shape[1:]), {})
    t0 = time.perf_counter()
    for start in range(0, n, 16):
        count = min(16, n - start)
        idx = np.arange(start, start + count)
        sink.write(small[idx % len(small)], idx, {})
    sink.close(ok=True)
    return n, time.perf_counter() - t0


MODES = {"serial": run_serial, "serial-yuv": run_serial_yuv, "pipeline": run_pipeline,
         "decode": run_decode, "op": run_op, "encode": run_encode}  # fmt: skip


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
    for mode in ["serial", "serial-yuv", "pipeline", "decode", "op", "encode"]:
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
    line("pipeline / serial-yuv", rows["pipeline"]["fps"] / rows["serial-yuv"]["fps"], 1.0)
    line(f"pipeline RSS {args.rss_frames} / {n} frames",
         big["rss_mib"] / rows["pipeline"]["rss_mib"], 1.05, "<=")  # fmt: skip


if __name__ == "__main__":
    main()
