"""kill -9 of ``hyperframes pack``, ``transcode`` and ``render`` at random moments.

Each trial starts the command as a subprocess in its own session, sends ``SIGKILL`` at a
moment drawn uniformly from the length of an uninterrupted run (interpreter start
included), and then checks what the kill left behind:

- ``transcode`` / ``render`` (FFV1 in Matroska, so decoding is bit-exact): the output
  path holds nothing, or (the kill came after the rename) the complete video. A hidden
  ``.NAME.partial.mkv`` temp may remain; the rerun must replace it and leave no temp.
- ``pack``: no store, or a store that opens, verifies, holds a prefix of the reference
  frames, and that ``pack --resume`` completes.

Then it reruns (``--resume`` for ``pack``) and requires the decoded frames (and
timestamps) to equal those of an uninterrupted run, the folder to hold nothing else, and
no process of the killed session to be left.

Run: ``python benchmarks/kill_trials.py [--trials 20] [--budget 600]``; prints one row
per command: trials, what the kill left (nothing / partial / complete), temps left by
the kill and cleaned by the rerun, failures.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np
import psutil

COMMANDS = ("pack", "transcode", "render")
WIDTH, HEIGHT = 160, 96
RENDER_MODULE = "hf_kill_render"


@dataclass
class Inputs:
    """The files every trial reads: an FFV1 clip and a module with a render function."""

    folder: Path
    clip: Path
    frames: int


@dataclass
class Outcome:
    command: str
    moment: float
    left: str  # "nothing", "partial", "complete"
    temp_left: bool = False
    committed: int = 0


@dataclass
class Tally:
    trials: int = 0
    left: dict[str, int] = field(default_factory=lambda: {"nothing": 0, "partial": 0,
                                                          "complete": 0})  # fmt: skip
    temps: int = 0
    failures: list[str] = field(default_factory=list)
    wall: float = 0.0


def make_inputs(folder: Path, frames: int = 120) -> Inputs:
    """Write the clip (moving gradients plus noise, FFV1) and the render module."""
    folder.mkdir(parents=True, exist_ok=True)
    clip = folder / "clip.mkv"
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    rng = np.random.default_rng(7)
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "bgr0"
        for i in range(frames):
            frame = np.empty((HEIGHT, WIDTH, 3), np.uint8)
            frame[..., 0] = (x * 2 + i * (i // 16)) % 256
            frame[..., 1] = (y * 3 + i) % 256
            frame[..., 2] = rng.integers(0, 8, (HEIGHT, WIDTH), dtype=np.uint8)
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    module = f"""
        import numpy as np

        def frame(i):
            y, x = np.mgrid[0:{HEIGHT}, 0:{WIDTH}]
            out = np.empty(({HEIGHT}, {WIDTH}, 3), np.uint8)
            out[..., 0] = (x + 3 * i) % 256
            out[..., 1] = (y * 2 + i * i) % 256
            out[..., 2] = (x * y + i) % 251
            return out
    """
    (folder / f"{RENDER_MODULE}.py").write_text(textwrap.dedent(module))
    return Inputs(folder, clip, frames)


def argv_for(command: str, inputs: Inputs, out: Path) -> list[str]:
    if command == "pack":
        return ["pack", str(inputs.clip), str(out), "--max-len", "8", "--batch-size", "8",
                "--json"]  # fmt: skip
    if command == "transcode":
        return ["transcode", str(inputs.clip), str(out), "--codec", "ffv1", "--batch-size", "8",
                "--json"]  # fmt: skip
    if command == "render":
        return ["render", f"{RENDER_MODULE}:frame", str(out), "--frames", str(inputs.frames),
                "--size", f"{WIDTH}x{HEIGHT}", "--fps", "25", "--codec", "ffv1",
                "--batch-size", "8", "--json"]  # fmt: skip
    raise ValueError(f"unknown command {command!r}")


def output_name(command: str) -> str:
    return "out.hfs" if command == "pack" else "out.mkv"


def start(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "hyperframes", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def run(argv: list[str], cwd: Path) -> float:
    """Run to the end; returns the wall time. Raises on a non-zero exit."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "hyperframes", *argv], cwd=cwd, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"hyperframes {argv[0]} failed: {done.stderr.strip()}")
    return time.perf_counter() - began


def content(command: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The decoded frames of an output and their timestamps (seconds)."""
    if command == "pack":
        from hyperframes.store import FrameStore

        with FrameStore(path, read_ahead=False) as store:
            return np.array(store[:]), np.asarray(store.info.timestamps, np.float64)
    frames, times = [], []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(float(frame.time or 0.0))
    return np.stack(frames), np.asarray(times)


def reference(command: str, inputs: Inputs, folder: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """An uninterrupted run: its frames, timestamps and wall time."""
    folder.mkdir(parents=True)
    out = folder / output_name(command)
    wall = run(argv_for(command, inputs, out), inputs.folder)
    frames, times = content(command, out)
    return frames, times, wall


def _session_left(sid: int) -> list[int]:
    left = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid:
                left.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return left


def trial(
    command: str,
    inputs: Inputs,
    folder: Path,
    moment: float,
    expected: tuple[np.ndarray, np.ndarray],
) -> Outcome:
    """Kill ``command`` after ``moment`` seconds, check the leftovers, rerun, compare."""
    folder.mkdir(parents=True)
    out = folder / output_name(command)
    argv = argv_for(command, inputs, out)
    child = start(argv, inputs.folder)
    try:
        child.wait(timeout=moment)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert child.stderr is not None
    err = child.stderr.read().decode(errors="replace").strip()
    child.stderr.close()
    finished = child.returncode == 0
    if child.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"{command} exited {child.returncode} before the kill: {err}")
    left = _session_left(child.pid)
    if left:
        raise AssertionError(f"processes of the killed {command} are still running: {left}")
    outcome = Outcome(command, moment, "complete" if finished else "nothing")
    if command == "pack":
        _check_killed_store(out, expected[0], outcome, finished)
        if not finished:
            run([*argv, "--resume"], inputs.folder)
    else:
        temp = out.with_name(f".{out.stem}.partial{out.suffix}")
        outcome.temp_left = temp.exists()
        if out.exists():  # renamed into place before the kill landed: must be complete
            outcome.left = "complete"
        else:
            run(argv, inputs.folder)
        if temp.exists():
            raise AssertionError(f"the rerun of {command} left its temp {temp.name}")
    frames, times = content(command, out)
    if frames.shape != expected[0].shape or not np.array_equal(frames, expected[0]):
        raise AssertionError(f"{command}: rerun frames differ from an uninterrupted run")
    if not np.allclose(times, expected[1], equal_nan=True):
        raise AssertionError(f"{command}: rerun timestamps differ from an uninterrupted run")
    names = sorted(p.name for p in folder.iterdir())
    if names != [out.name]:
        raise AssertionError(f"{command}: the folder holds more than the output: {names}")
    return outcome


def _check_killed_store(out: Path, expected: np.ndarray, outcome: Outcome, done: bool) -> None:
    """A killed pack leaves no store, or one that opens, verifies and holds a prefix."""
    from hyperframes.store import FrameStore
    from hyperframes.store.writer import resume_point

    if not out.exists():
        return
    committed, complete = resume_point(out)
    if complete != done and not (complete and committed == len(expected)):
        raise AssertionError(f"pack: store says complete={complete}, the run finished={done}")
    if committed:
        with FrameStore(out, read_ahead=False) as store:
            bad = store.verify()
            if bad:
                raise AssertionError(f"pack: the killed store fails verify at frames {bad[:5]}")
            if not np.array_equal(store[:], expected[: len(store)]):
                raise AssertionError("pack: the killed store is not a prefix of the reference")
    outcome.committed = committed
    outcome.left = "complete" if complete else ("partial" if committed else "nothing")


def trials(
    commands: tuple[str, ...] = COMMANDS,
    *,
    count: int = 20,
    budget: float = 600.0,
    seed: int = 0,
    frames: int = 120,
    root: Path | None = None,
    log: bool = True,
) -> dict[str, Tally]:
    """Run ``count`` trials per command (fewer if ``budget`` seconds run out)."""
    rng = random.Random(seed)
    began = time.perf_counter()
    tallies = {command: Tally() for command in commands}
    with tempfile.TemporaryDirectory(prefix="hf-kill-", dir=root) as tmp:
        inputs = make_inputs(Path(tmp) / "inputs", frames)
        refs = {c: reference(c, inputs, Path(tmp) / f"ref-{c}") for c in commands}
        per_command = budget / len(commands)
        for command in commands:
            frames_ref, times_ref, wall = refs[command]
            tally = tallies[command]
            t0 = time.perf_counter()
            for k in range(count):
                if time.perf_counter() - t0 > per_command or time.perf_counter() - began > budget:
                    break
                moment = rng.uniform(0.05, 1.05) * wall
                folder = Path(tmp) / f"{command}-{k}"
                try:
                    outcome = trial(command, inputs, folder, moment, (frames_ref, times_ref))
                except AssertionError as exc:
                    tally.failures.append(f"{moment:.2f} s: {exc}")
                    if log:
                        print(f"{command} trial {k} at {moment:.2f} s FAILED: {exc}", flush=True)
                    continue
                tally.left[outcome.left] += 1
                tally.temps += outcome.temp_left
                if log:
                    extra = f", {outcome.committed} frames committed" if command == "pack" else ""
                    temp = ", temp left and cleaned by the rerun" if outcome.temp_left else ""
                    print(f"{command} trial {k}: killed at {moment:.2f} s of {wall:.2f} s, "
                          f"left {outcome.left}{extra}{temp}", flush=True)  # fmt: skip
                tally.trials += 1
            tally.wall = time.perf_counter() - t0
    return tallies


def table(tallies: dict[str, Tally]) -> str:
    rows = ["| command | trials | left nothing | left partial | left complete | temp left "
            "(cleaned by rerun) | failures | wall s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for command, t in tallies.items():
        rows.append(
            f"| {command} | {t.trials + len(t.failures)} | {t.left['nothing']} | "
            f"{t.left['partial']} | {t.left['complete']} | {t.temps} | {len(t.failures)} | "
            f"{t.wall:.0f} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="random moments per command")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for all trials")
    parser.add_argument("--frames", type=int, default=480, help="frames of the test clip")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=COMMANDS)
    args = parser.parse_args()
    tallies = trials(
        tuple(args.commands), count=args.trials, budget=args.budget, seed=args.seed,
        frames=args.frames,
    )  # fmt: skip
    print()
    print(table(tallies))
    failed = sum(len(t.failures) for t in tallies.values())
    short = [c for c, t in tallies.items() if t.trials + len(t.failures) < args.trials]
    note = f"; budget ran out before {args.trials} trials of {short}" if short else ""
    print(f"\nverdict: {'held' if not failed else 'NOT HELD'} ({failed} failures){note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
