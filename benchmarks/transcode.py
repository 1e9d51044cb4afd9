"""`hyperframes transcode` vs the ffmpeg command line on the same jobs, interleaved.

Two jobs, each run by each competitor as a fresh process (wall time from process start to
exit, median of ``--repeats`` interleaved rounds, alternating which tool goes first):

  720p   Big Buck Bunny 1280x720 H.264 (looped to 528 frames) -> 640x360, x264 ultrafast
  1080p  the same upscaled to 1920x1080 (528 frames)           -> 1280x720, x264 veryfast

Same encoder settings on both sides: libx264, the same ``-crf``/``--crf`` and preset,
yuv420p, no audio, FFmpeg's default threading (``threads=auto``: frame threads and a
lookahead thread). Both average areas when they resize: ffmpeg is told
``scale=W:H:flags=area`` (swscale's area averaging, not its bicubic default); hyperframes
resizes in its source thread from the decoder's planes (``io/yuv.py: resize_frame_into``),
with OpenCV ``INTER_AREA`` at 1280x720 -> 640x360 (a whole ratio: OpenCV's exact box
average, faster there than swscale) and with swscale's area averaging, as ffmpeg does, at
1920x1080 -> 1280x720 (OpenCV is 3x slower at that ratio). The x264 builds differ (PyAV
bundles its own FFmpeg and x264; the ffmpeg command is the system's), which the table
shows as the ``x264`` core versions; the x264 settings that differ between the two outputs
are printed (none is expected but the version). Output frame counts must be equal.

Competitors: ``ffmpeg``; ``hyperframes`` (the ``hyperframes transcode`` command);
``hf-slices``, the same command with the sink's x264 threading as it was before it asked
for frame threads (PyAV's default ``thread_type="SLICE"``: x264 encodes each frame in
slices, ``threads=2 slices=2`` on 2 cores), for a before/after in the same run;
``hf-copies``, the same command with the sink copying each frame into a new buffer for
x264 as it did before it handed x264 views of the batch (``COPIES``), for a before/after.

The table also shows CPU seconds and minor page faults (memory touched for the first
time, e.g. a buffer the allocator gave back to the system and takes again every frame).

The speed ratio is ffmpeg's wall time / the other's (above 1: faster than ffmpeg), of the
medians and as the median of each round's ratio (paired runs share the machine's load).

Needs the ``ffmpeg`` command (Debian: ``apt-get install -y ffmpeg``; ``--install-ffmpeg``
runs that when it is missing and this is root). The library never uses it.

Run:  python benchmarks/transcode.py [--repeats 5] [--jobs 720p 1080p] [--work DIR]
      (about 3 minutes on 2 cores with the defaults; inputs are made once in --work)
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import av

from clips import clip_folder  # this folder's helper: the real clips

LOOPS = 4  # 132 frames of bigbuckbunny -> 528
CRF = 23  # x264's own default, passed explicitly to both tools


@dataclass(frozen=True)
class Job:
    name: str
    input_size: tuple[int, int]
    size: tuple[int, int]
    preset: str


JOBS = {
    "720p": Job("720p", (1280, 720), (640, 360), "ultrafast"),
    "1080p": Job("1080p", (1920, 1080), (1280, 720), "veryfast"),
}


def bunny() -> Path:
    return clip_folder() / "bigbuckbunny.mp4"


def hyperframes_dir() -> str:
    spec = importlib.util.find_spec("hyperframes")
    assert spec is not None and spec.submodule_search_locations
    return spec.submodule_search_locations[0]


def ensure_ffmpeg(install: bool) -> str:
    found = shutil.which("ffmpeg")
    if found:
        return found
    if install and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "ffmpeg"], check=True)
        found = shutil.which("ffmpeg")
    if not found:
        sys.exit("needs the ffmpeg command: apt-get install -y ffmpeg (or pass --install-ffmpeg)")
    return found


def make_input(ffmpeg: str, job: Job, work: Path) -> Path:
    """The job's input: bigbuckbunny looped, scaled to the input size, H.264 crf 18."""
    width, height = job.input_size
    path = work / f"bunny_{width}x{height}_x{LOOPS}.mp4"
    if not path.exists():
        scale = [] if (width, height) == (1280, 720) else ["-vf", f"scale={width}:{height}"]
        partial = path.with_name(".partial" + path.name)
        subprocess.run(
            [ffmpeg, "-nostdin", "-v", "error", "-y", "-stream_loop", str(LOOPS - 1),
             "-i", str(bunny()), "-an", *scale, "-c:v", "libx264", "-preset", "medium",
             "-crf", "18", "-pix_fmt", "yuv420p", str(partial)],
            check=True,
        )  # fmt: skip
        partial.rename(path)
    return path


#: hyperframes as it was before the sink asked x264 for frame threads: PyAV's default
#: thread_type="SLICE" makes x264 encode each frame in slices (threads=2, slices=2 on 2 cores).
SLICES = (
    "import sys, hyperframes.io.video_sink as sink; sink._FRAME_THREADED = frozenset(); "
    "from hyperframes.cli import main; sys.exit(main(sys.argv[1:]))"
)

#: hyperframes as it was before the sink handed x264 views of the batch: ``from_ndarray``
#: copied every frame into a new buffer (1.4 MB at 720p), which the allocator gives back to
#: the system and faults in again (x264 copies its input as it takes it: same output).
COPIES = (
    "import sys, hyperframes.io.video_sink as sink; sink._COPIES_INPUT = frozenset(); "
    "from hyperframes.cli import main; sys.exit(main(sys.argv[1:]))"
)


def commands(ffmpeg: str, job: Job, src: Path, work: Path) -> dict[str, tuple[list[str], Path]]:
    """The competitors' command lines and outputs: ffmpeg, hyperframes, hyperframes with
    x264 slice threads and with a copy of each frame for x264 (the sink before each of
    those changes, for before/afters in one run)."""
    width, height = job.size
    hf = Path(sys.executable).with_name("hyperframes")
    tools = ("ffmpeg", "hf", "slices", "copies")
    out = {tool: work / f"out_{job.name}_{tool}.mp4" for tool in tools}
    transcode = ["transcode", str(src)]
    options = ["--size", f"{width}x{height}", "--preset", job.preset, "--crf", str(CRF),
               "--overwrite", "--json"]  # fmt: skip
    return {
        "ffmpeg": (
            [ffmpeg, "-nostdin", "-v", "error", "-y", "-i", str(src), "-an",
             "-vf", f"scale={width}:{height}:flags=area", "-c:v", "libx264",
             "-preset", job.preset, "-crf", str(CRF), "-pix_fmt", "yuv420p", str(out["ffmpeg"])],
            out["ffmpeg"],
        ),
        "hyperframes": ([str(hf), *transcode, str(out["hf"]), *options], out["hf"]),
        "hf-slices": (
            [sys.executable, "-c", SLICES, *transcode, str(out["slices"]), *options],
            out["slices"],
        ),
        "hf-copies": (
            [sys.executable, "-c", COPIES, *transcode, str(out["copies"]), *options],
            out["copies"],
        ),
    }  # fmt: skip


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds from process start to exit, the CPU seconds it used and its minor
    page faults."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_minflt - before.ru_minflt


def frame_count(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for p in container.demux(video=0) if p.size)


def x264_settings(path: Path) -> dict[str, str]:
    """The settings x264 wrote into the stream (its SEI), plus its core version."""
    head = path.read_bytes()[:1_000_000]
    match = re.search(rb"x264 - core (\d+)[^\x00]*? - options: ([^\x00]*)", head)
    if not match:
        return {}
    pairs = dict(item.split("=", 1) for item in match[2].decode().split() if "=" in item)
    return {"core": match[1].decode(), **pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--jobs", nargs="+", choices=sorted(JOBS), default=["720p", "1080p"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/hyperframes-bench-transcode"))
    ap.add_argument("--install-ffmpeg", action="store_true")
    args = ap.parse_args()
    ffmpeg = ensure_ffmpeg(args.install_ffmpeg)
    args.work.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([ffmpeg, "-version"], capture_output=True, text=True).stdout
    print(f"# transcode vs {version.splitlines()[0]}; PyAV {av.__version__}; "
          f"{os.cpu_count()} CPUs; median of {args.repeats} interleaved runs\n")  # fmt: skip
    summary = []
    for name in args.jobs:
        job = JOBS[name]
        src = make_input(ffmpeg, job, args.work)
        cmds = commands(ffmpeg, job, src, args.work)
        walls: dict[str, list[float]] = {tool: [] for tool in cmds}
        cpus: dict[str, list[float]] = {tool: [] for tool in cmds}
        faults: dict[str, list[int]] = {tool: [] for tool in cmds}
        # hyperframes' bytecode, as installing it compiles it (PYTHONDONTWRITEBYTECODE, set
        # here, would otherwise leave edited modules to be compiled again at every start)
        compileall.compile_dir(hyperframes_dir(), quiet=1)
        for cmd, _out in cmds.values():  # warm the page cache and the imports, untimed
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        for round_ in range(args.repeats):
            order = list(cmds) if round_ % 2 == 0 else list(cmds)[::-1]
            for tool in order:
                wall, cpu, faulted = timed(cmds[tool][0])
                walls[tool].append(wall)
                cpus[tool].append(cpu)
                faults[tool].append(faulted)
        print(f"{name}: {src.name} -> {job.size[0]}x{job.size[1]} x264 {job.preset} crf {CRF}")
        for cmd, _out in cmds.values():
            print(f"  $ {shlex.join(cmd)}")
        print(f"  {'tool':<12}{'median s':>9}{'min s':>8}{'max s':>8}{'CPU s':>8}"
              f"{'faults':>8}{'frames':>8}{'MB':>7}  x264")  # fmt: skip
        frames, settings = {}, {}
        for tool, (_cmd, out) in cmds.items():
            frames[tool], settings[tool] = frame_count(out), x264_settings(out)
            s = settings[tool]
            x264 = f"core {s.get('core')} threads={s.get('threads')} "
            x264 += f"sliced_threads={s.get('sliced_threads')}"
            print(
                f"  {tool:<12}{statistics.median(walls[tool]):9.2f}{min(walls[tool]):8.2f}"
                f"{max(walls[tool]):8.2f}{statistics.median(cpus[tool]):8.2f}"
                f"{statistics.median(faults[tool]):8.0f}{frames[tool]:8d}"
                f"{out.stat().st_size / 1e6:7.2f}  {x264}"
            )
        ff = settings["ffmpeg"]
        for tool in list(cmds)[1:]:
            ratio = statistics.median(walls["ffmpeg"]) / statistics.median(walls[tool])
            paired = statistics.median(
                f / h for f, h in zip(walls["ffmpeg"], walls[tool], strict=True)
            )
            mine = settings[tool]
            differ = {
                key: (ff.get(key), mine.get(key))
                for key in sorted(ff.keys() | mine.keys())
                if key != "core" and ff.get(key) != mine.get(key)
            }
            same = frames["ffmpeg"] == frames[tool]
            print(f"  ffmpeg / {tool}: {ratio:.2f}x (medians), {paired:.2f}x (median of paired "
                  f"rounds); frames {'equal' if same else 'DIFFER'}; x264 settings that differ "
                  f"(ffmpeg, {tool}): {differ or 'none'}")  # fmt: skip
            fastest = min(walls["ffmpeg"]) / min(walls[tool])
            cpu = statistics.median(cpus["ffmpeg"]) / statistics.median(cpus[tool])
            summary.append((name, tool, ratio, paired, fastest, cpu, same))
        copies, hf_out = cmds["hf-copies"][1], cmds["hyperframes"][1]
        identical = copies.read_bytes() == hf_out.read_bytes()
        print(f"  hf-copies' output is {'' if identical else 'NOT '}byte for byte hyperframes'")
        print()
    print("speed ratios: ffmpeg wall / hyperframes wall (target >= 0.95 for hyperframes, of the")
    print("medians); on a machine others load too, the fastest runs and the CPU seconds vary less")
    for name, tool, ratio, paired, fastest, cpu, same in summary:
        verdict = (
            ("held" if ratio >= 0.95 and same else "NOT HELD") if tool == "hyperframes" else ""
        )
        print(f"  {name:<6}{tool:<12}{ratio:6.2f}x  (paired {paired:.2f}x, fastest {fastest:.2f}x, "
              f"CPU {cpu:.2f}x)  {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
