"""Overhead of the Prometheus exporter and the timeline sampler, side by side.

The same pipeline (generated 640x360 RGB frames, an in-place invert stage on 2 workers,
a checksum sink) runs without a monitor, with the exporter scraped 4 times a second
from another process (60 times more often than Prometheus' default), with the timeline
sampling every 0.05 s (ten times its default rate), and with both. Rounds interleave the
modes; each mode's median of ``--repeats`` runs is printed with its ratio to the plain
run, as frames/s (wall clock, sensitive to other load on the machine) and as CPU time
of this process per frame (less so).

Run:  python benchmarks/observability.py [--frames 3000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from hyperframes import FrameSpec, Pipeline
from hyperframes.cli.observe import Monitors
from hyperframes.metrics.prometheus import PrometheusExporter
from hyperframes.metrics.timeline import Timeline

H, W = 360, 640


SCRAPE = """
import sys, urllib.request
for url in sys.stdin:  # one line per scrape: the URL; EOF ends the loop
    try:
        urllib.request.urlopen(url.strip()).read()
    except OSError:  # asked just as a run ended and its server closed
        pass
"""


class Scraper:
    """Asks a scraping child process, as Prometheus would scrape from outside, to fetch the
    exporter's page every ``interval`` seconds (a scraper in this process would compete
    for the GIL and be counted as the exporter's cost)."""

    child: subprocess.Popen[str] | None = None

    def __init__(self, exporter: PrometheusExporter, interval: float) -> None:
        self.exporter, self.interval = exporter, interval
        self.done = threading.Event()
        if Scraper.child is None:
            Scraper.child = subprocess.Popen(
                [sys.executable, "-c", SCRAPE], stdin=subprocess.PIPE, text=True
            )

    def start(self, snapshot: Any) -> None:
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def stop(self, report: Any) -> None:
        self.done.set()
        self.thread.join()

    def _loop(self) -> None:
        stdin = Scraper.child.stdin if Scraper.child else None
        assert stdin is not None
        while not self.done.wait(self.interval):
            stdin.write(self.exporter.url + "\n")
            stdin.flush()

    @classmethod
    def close(cls) -> None:
        if cls.child is not None and cls.child.stdin is not None:
            cls.child.stdin.close()
            cls.child.wait()
            cls.child = None


def monitor_for(mode: str) -> Any:
    parts: list[Any] = []
    if mode in ("exporter", "both"):
        exporter = PrometheusExporter(port=0)
        parts += [exporter, Scraper(exporter, 0.25)]
    if mode in ("timeline", "both"):
        parts.append(Timeline(interval_s=0.05))
    return Monitors(parts) if parts else None


def once(frames: int, mode: str) -> tuple[float, float]:
    """Frames/s and CPU milliseconds per 1000 frames (all threads of this process)."""
    bank = np.random.default_rng(0).integers(0, 256, (4, H, W, 3), dtype=np.uint8)
    total = 0

    def add(ids: np.ndarray, batch: np.ndarray) -> None:
        nonlocal total
        total += int(batch[:, ::32, ::32].sum())

    pipeline = (
        Pipeline.from_generator(
            lambda i: bank[i % 4], count=frames, spec=FrameSpec((H, W, 3)), batch_size=32
        )
        .map(lambda f: np.bitwise_not(f, out=f), workers=2, name="invert")
        .for_each(add, batched=True)
    )
    start, cpu = time.perf_counter(), time.process_time()
    pipeline.run(monitor=monitor_for(mode))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return frames / wall, cpu * 1e6 / frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    modes = ["none", "exporter", "timeline", "both"]
    rates: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    once(args.frames // 10, "none")  # warm-up
    for _ in range(args.repeats):
        for mode in modes:
            rate, cpu = once(args.frames, mode)
            rates[mode].append(rate)
            cpus[mode].append(cpu)
    Scraper.close()
    base = statistics.median(rates["none"])
    base_cpu = statistics.median(cpus["none"])
    print(f"\n{args.frames} frames {W}x{H}, median of {args.repeats} runs")
    print("| what | fps | ratio | CPU ms / 1000 frames | CPU ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    labels = {
        "none": "no monitor",
        "exporter": "exporter, scraped every 0.25 s",
        "timeline": "timeline, sampled every 0.05 s",
        "both": "both",
    }
    for mode in modes:
        rate, cpu = statistics.median(rates[mode]), statistics.median(cpus[mode])
        print(
            f"| {labels[mode]} | {rate:.0f} | {rate / base:.3f}x | {cpu:.0f} | "
            f"{cpu / base_cpu:.3f}x |"
        )


if __name__ == "__main__":
    main()
