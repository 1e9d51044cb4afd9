"""The sound's cost in a transcode: `hyperframes transcode` vs `ffmpeg -c:a copy`, interleaved.

One job: Big Buck Bunny upscaled to 1920x1080 and looped to 528 frames, with a 48 kHz
stereo AAC track (a 440 Hz tone, 128 kb/s) as long as the video, into MP4 with libx264
veryfast crf 23. Each competitor runs as a fresh process (wall time from process start
to exit, median of ``--repeats`` interleaved rounds, alternating which tool goes first):

  ffmpeg          ffmpeg -i in.mp4 -c:v libx264 -preset veryfast -crf 23 -c:a copy out.mp4
  hyperframes     hyperframes transcode in.mp4 out.mp4 --preset veryfast --crf 23
                  (the sound is copied by default)
  hf-no-sound     the same with --audio none: the cost of the sound path, in the same run

The ratio is ffmpeg's wall time / the other's (above 1: faster than ffmpeg), of the
medians and as the median of each round's ratio. Each output is checked: frames equal,
the sound's packets equal to the input's up to the video's end (copied, not re-encoded),
and the sound's length against the video's.

Needs the ``ffmpeg`` command (as ``benchmarks/transcode.py``). The library never uses it.

Run:  python benchmarks/transcode_sound.py [--repeats 5] [--work DIR]
      (about 2 minutes on 2 cores; the input is made once in --work)
"""

from __future__ import annotations

import argparse
import compileall
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import av

from transcode import bunny, ensure_ffmpeg, frame_count, hyperframes_dir, timed

LOOPS, PRESET, CRF = 4, "veryfast", 23


def make_input(ffmpeg: str, work: Path) -> Path:
    """Bunny at 1080p, looped, with a 48 kHz stereo AAC tone as long as the video."""
    path = work / f"bunny_1080p_x{LOOPS}_aac.mp4"
    if not path.exists():
        partial = path.with_name(".partial" + path.name)
        subprocess.run(
            [ffmpeg, "-nostdin", "-v", "error", "-y", "-stream_loop", str(LOOPS - 1),
             "-i", str(bunny()), "-f", "lavfi", "-i", "sine=f=440:r=48000",
             "-map", "0:v", "-map", "1:a", "-shortest", "-vf", "scale=1920:1080",
             "-c:v", "libx264", "-preset", "medium", "-crf", "18", "-pix_fmt", "yuv420p",
             "-c:a", "aac", "-ac", "2", "-b:a", "128k", str(partial)],
            check=True,
        )  # fmt: skip
        partial.rename(path)
    return path


def sound(path: Path) -> tuple[list[bytes], float]:
    """The sound's packets and its length in seconds less the video's."""
    ends = {}
    packets: list[bytes] = []
    for kind in ("video", "audio"):
        with av.open(str(path)) as container:
            stream = getattr(container.streams, kind)[0]
            times = [
                (float(p.pts * p.time_base), float(p.duration * p.time_base), bytes(p))
                for p in container.demux(stream)
                if p.pts is not None and p.size
            ]
        ends[kind] = max(t + d for t, d, _ in times) - min(t for t, _, _ in times)
        if kind == "audio":
            packets = [data for _, _, data in times]
    return packets, ends["audio"] - ends["video"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hyperframes-bench-transcode"))
    ap.add_argument("--install-ffmpeg", action="store_true")
    args = ap.parse_args()
    ffmpeg = ensure_ffmpeg(args.install_ffmpeg)
    args.work.mkdir(parents=True, exist_ok=True)
    src = make_input(ffmpeg, args.work)
    hf = str(Path(sys.executable).with_name("hyperframes"))
    out = {tool: args.work / f"sound_{tool}.mp4" for tool in ("ffmpeg", "hf", "quiet")}
    options = ["--preset", PRESET, "--crf", str(CRF), "--overwrite", "--json"]
    cmds = {
        "ffmpeg": [ffmpeg, "-nostdin", "-v", "error", "-y", "-i", str(src), "-c:v", "libx264",
                   "-preset", PRESET, "-crf", str(CRF), "-pix_fmt", "yuv420p", "-c:a", "copy",
                   str(out["ffmpeg"])],
        "hyperframes": [hf, "transcode", str(src), str(out["hf"]), *options],
        "hf-no-sound": [hf, "transcode", str(src), str(out["quiet"]), *options, "--audio", "none"],
    }  # fmt: skip
    outputs = dict(zip(cmds, out.values(), strict=True))
    compileall.compile_dir(hyperframes_dir(), quiet=1)
    for cmd in cmds.values():  # warm the page cache and the imports, untimed
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    walls: dict[str, list[float]] = {tool: [] for tool in cmds}
    for round_ in range(args.repeats):
        for tool in list(cmds) if round_ % 2 == 0 else list(cmds)[::-1]:
            walls[tool].append(timed(cmds[tool])[0])
    print(f"# transcode with sound, {src.name}: median of {args.repeats} interleaved runs")
    for cmd in cmds.values():
        print(f"  $ {shlex.join(cmd)}")
    source_packets, _ = sound(src)
    print(f"  {'tool':<13}{'median s':>9}{'min s':>8}{'max s':>8}{'frames':>8}  sound")
    for tool, path in outputs.items():
        if tool == "hf-no-sound":
            with av.open(str(path)) as container:
                note = "none" if not container.streams.audio else "PRESENT"
        else:
            packets, offset = sound(path)
            same = (  # the video's end cuts the sound: the input's packets up to there
                "copied" if packets == source_packets[: len(packets)] else "DIFFERS from the input"
            )
            note = f"{same}, {len(packets)} packets, sound - video {offset * 1000:+.1f} ms"
        times = walls[tool]
        print(f"  {tool:<13}{statistics.median(times):9.2f}{min(times):8.2f}{max(times):8.2f}"
              f"{frame_count(path):8d}  {note}")  # fmt: skip
    for tool in ("hyperframes", "hf-no-sound"):
        ratio = statistics.median(walls["ffmpeg"]) / statistics.median(walls[tool])
        paired = statistics.median(f / h for f, h in zip(walls["ffmpeg"], walls[tool], strict=True))
        print(f"  ffmpeg / {tool}: {ratio:.2f}x (medians), {paired:.2f}x (paired rounds)")
    cost = statistics.median(
        h / q for h, q in zip(walls["hyperframes"], walls["hf-no-sound"], strict=True)
    )
    print(f"  the sound's cost in hyperframes: {100 * (cost - 1):+.1f} % (paired rounds); "
          "goal: ffmpeg / hyperframes >= 0.95x")  # fmt: skip


if __name__ == "__main__":
    main()
