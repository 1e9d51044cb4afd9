"""Soak: a million small frames through a three-stage pipeline with flat resources.

The source writes each frame's id into its pixels; three stages run on it (an in-place
add, a mirror that returns a new array, a per-frame score kept in ``meta``); the sink
checks that ids arrive contiguous and in order and folds every frame into one xxh3
digest, which must equal the digest of the same computation done with a plain loop on a
sample. The progress callback samples, at every 2 % of the frames: RSS, open file
descriptors, threads, and entries in ``/dev/shm``.

Verdicts, after a warm-up (the first 10 % of the frames):

- RSS grows less than 5 % over its value at the end of the warm-up;
- open descriptors, threads and ``/dev/shm`` entries never exceed their warm-up values,
  and after the run they are back to what they were before it ("before" is taken after
  a short priming run, which starts what multiprocessing keeps for the life of the
  parent: its forkserver and resource tracker, two pipes).

Run: ``python benchmarks/soak.py [--frames 1000000] [--executor threads|processes]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil
import xxhash

from hyperframes import Chunk, FrameSpec, Pipeline, Sink, Source

SHAPE = (8, 8, 3)
WARMUP = 0.10
RSS_LIMIT = 0.05


class CountingSource(Source):
    """Frame ``i`` holds its id in its first three bytes and ``i % 251`` elsewhere."""

    def __init__(self, count: int) -> None:
        self.spec, self.length, self.info = FrameSpec(SHAPE), count, {"source": "soak"}
        self._next = 0

    def open(self) -> None:
        self._next = 0

    def read_into(self, out: np.ndarray) -> Chunk:
        start = self._next
        stop = min(start + len(out), self.length or 0)
        ids = np.arange(start, stop, dtype=np.int64)
        fill(out[: stop - start], ids)
        self._next = stop
        return Chunk(ids)


def fill(out: np.ndarray, ids: np.ndarray) -> None:
    out[...] = (ids % 251).astype(np.uint8)[:, None, None, None]
    out[:, 0, 0, 0] = ids & 0xFF
    out[:, 0, 0, 1] = (ids >> 8) & 0xFF
    out[:, 0, 0, 2] = (ids >> 16) & 0xFF


def brighten(frames: np.ndarray) -> np.ndarray:
    """Stage 1: in place, leaving the id pixel alone."""
    np.add(frames[:, 1:], 1, out=frames[:, 1:])
    return frames


def mirror(frames: np.ndarray) -> np.ndarray:
    """Stage 2: a new array (the rows below the id row reversed)."""
    out = frames.copy()
    out[:, 1:] = frames[:, :0:-1]
    return out


def score(frames: np.ndarray) -> np.ndarray:
    """Stage 3: one value per frame, into ``meta["score"]``."""
    return frames.reshape(len(frames), -1).sum(axis=1, dtype=np.int64)


def plain(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The oracle: the three stages as a plain loop over a batch of ids."""
    frames = np.empty((len(ids), *SHAPE), np.uint8)
    fill(frames, ids)
    frames = mirror(brighten(frames))
    return frames, score(frames)


@dataclass
class Sample:
    frames: int
    seconds: float
    rss: int
    fds: int
    threads: int
    shm: int


@dataclass
class Checker:
    """The sink: order, contiguity, scores against the oracle on a sample, one digest."""

    next_id: int = 0
    digest: Any = field(default_factory=xxhash.xxh3_64)
    checked: int = 0

    def __call__(self, ids: np.ndarray, frames: np.ndarray, meta: dict[str, Any]) -> None:
        if len(ids) and (ids[0] != self.next_id or np.any(np.diff(ids) != 1)):
            raise AssertionError(f"frames out of order at {ids[0]} (expected {self.next_id})")
        self.next_id += len(ids)
        self.digest.update(np.ascontiguousarray(frames).data)
        if ids[0] % 16384 < len(ids):  # a batch now and then: compare with the plain loop
            want, want_score = plain(ids)
            if not np.array_equal(frames, want) or not np.array_equal(meta["score"], want_score):
                raise AssertionError(f"the batch at frame {ids[0]} differs from a plain loop")
            self.checked += len(ids)


def shm_entries() -> int:
    try:
        return len(os.listdir("/dev/shm"))
    except OSError:
        return 0


def resources(process: psutil.Process) -> tuple[int, int, int, int]:
    return process.memory_info().rss, process.num_fds(), threading.active_count(), shm_entries()


def soak(
    frames: int = 1_000_000,
    *,
    batch_size: int = 64,
    workers: int = 2,
    executor: str = "threads",
    every: float = 0.02,
    log: bool = True,
) -> dict[str, Any]:
    """Run the soak; returns the samples, the figures and the verdicts."""
    process = psutil.Process()
    # A short run first: multiprocessing starts its forkserver and resource tracker once per
    # parent (two pipes that stay open); they are not growth, so "before" comes after them.
    Pipeline.from_source(CountingSource(4 * batch_size), batch_size=batch_size).map(
        brighten, workers=workers
    ).run(executor=executor)
    before = resources(process)
    samples: list[Sample] = []
    step = max(batch_size, int(frames * every))
    began = time.perf_counter()
    mark = [step]

    def progress(p: Any) -> None:
        if p.frames >= mark[0] or p.frames == frames:
            rss, fds, threads, shm = resources(process)
            samples.append(Sample(p.frames, time.perf_counter() - began, rss, fds, threads, shm))
            mark[0] += step
            if log:
                print(f"{p.frames:>9,} frames  {samples[-1].seconds:6.1f} s  RSS "
                      f"{rss / 2**20:7.1f} MiB  fds {fds:3d}  threads {threads:2d}  "
                      f"/dev/shm {shm}", flush=True)  # fmt: skip

    checker = Checker()
    report = (
        Pipeline.from_source(CountingSource(frames), batch_size=batch_size)
        .map(brighten, workers=workers, name="brighten")
        .map(mirror, workers=workers, name="mirror")
        .map(score, workers=workers, name="score", into="score")
        .to(CheckingSink(checker))
        .run(progress=progress, executor=executor)
    )
    wall = time.perf_counter() - began
    after = resources(process)
    if checker.next_id != frames:
        raise AssertionError(f"{checker.next_id} frames reached the sink, expected {frames}")
    return verdicts(samples, before, after, report.fps, wall, checker)


class CheckingSink(Sink):
    """Hands each batch, with its meta, to the checker."""

    def __init__(self, checker: Checker) -> None:
        self.checker = checker

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, Any]) -> None:
        self.checker(index, frames, meta)


def verdicts(
    samples: list[Sample], before: tuple[int, ...], after: tuple[int, ...], fps: float,
    wall: float, checker: Checker,
) -> dict[str, Any]:  # fmt: skip
    total = samples[-1].frames if samples else 0
    warm = [s for s in samples if s.frames >= WARMUP * total]
    base = warm[0]
    growth = max(s.rss for s in warm) / base.rss - 1
    peak = {k: max(getattr(s, k) for s in warm) for k in ("fds", "threads", "shm")}
    held = {
        f"RSS growth after warm-up < {RSS_LIMIT:.0%}": growth < RSS_LIMIT,
        "fds never above the warm-up value": peak["fds"] <= base.fds,
        "threads never above the warm-up value": peak["threads"] <= base.threads,
        "/dev/shm entries never above the warm-up value": peak["shm"] <= base.shm,
        "fds back to the value before the run": after[1] <= before[1],
        "threads back to the value before the run": after[2] <= before[2],
        "/dev/shm back to the value before the run": after[3] <= before[3],
    }
    return {
        "frames": total, "wall_s": wall, "fps": fps, "rss_warm_mib": base.rss / 2**20,
        "rss_max_mib": max(s.rss for s in warm) / 2**20, "rss_growth": growth,
        "before": before, "after": after, "samples": samples, "held": held,
        "checked_frames": checker.checked, "digest": checker.digest.hexdigest(),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--executor", choices=("threads", "processes"), default="threads")
    args = parser.parse_args()
    result = soak(
        args.frames, batch_size=args.batch_size, workers=args.workers, executor=args.executor
    )
    print(
        f"\n{result['frames']:,} frames ({args.executor}) in {result['wall_s']:.1f} s "
        f"({result['fps']:,.0f} frames/s); {result['checked_frames']:,} frames compared with "
        f"a plain loop; digest {result['digest']}"
    )
    print(
        f"RSS after warm-up {result['rss_warm_mib']:.1f} MiB, max {result['rss_max_mib']:.1f} "
        f"MiB: growth {result['rss_growth']:+.2%}"
    )
    b, a = result["before"], result["after"]
    print(f"before/after the run: fds {b[1]}/{a[1]}, threads {b[2]}/{a[2]}, /dev/shm {b[3]}/{a[3]}")
    for what, ok in result["held"].items():
        print(f"  {'held    ' if ok else 'NOT HELD'}  {what}")
    return 0 if all(result["held"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
