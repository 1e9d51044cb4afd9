"""What monitoring lacked, seen in real runs: a reuse stage's running PSNR and the cache
tiers of a store's reads, typed in ``Runner.snapshot()`` and in the Prometheus text
(scraped over loopback, 127.0.0.1, while the run goes)."""

from __future__ import annotations

import math
import os
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hyperframes import FrameSpec, Pipeline
from hyperframes.engine.report import RunReport
from hyperframes.engine.watch import RunSnapshot, SnapshotFn, StageQuality
from hyperframes.frames import Batch, FramePool
from hyperframes.hyper.reuse.by_hyperframe import RECENT, ReuseStrategy
from hyperframes.io.base import CacheTier, Chunk, Source, SourceFigures
from hyperframes.metrics.monitors import Monitors
from hyperframes.metrics.prometheus import PrometheusExporter
from hyperframes.modes import ReuseByHyperframe
from hyperframes.store import FrameStore, StoreWriter
from hyperframes.store.source import StoreSource

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_thread_leak")


class Recorder:
    """Keeps the run's snapshot function and the snapshots taken at start and stop."""

    def __init__(self) -> None:
        self.snap: SnapshotFn | None = None
        self.first: RunSnapshot | None = None
        self.last: RunSnapshot | None = None

    def start(self, snapshot: SnapshotFn) -> None:
        self.snap = snapshot
        self.first = snapshot()

    def stop(self, report: RunReport | None) -> None:
        assert self.snap is not None
        self.last = self.snap()


def scrape(exporter: PrometheusExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """One loopback scrape as ``{(sample name, sorted labels): value}``."""
    assert exporter.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(exporter.url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def at_last_frame(n: int, take: Callable[[], None]) -> Callable[[int, np.ndarray], None]:
    """A ``for_each`` callback that calls ``take`` in the sink at frame ``n - 1``: every
    stage (and the source) has done all its work on the frames by then."""

    def each(i: int, frame: np.ndarray) -> None:
        if i == n - 1:
            take()

    return each


# -- reuse: the PSNR of its recent verifications -------------------------------------------


def copy_frames(frames: np.ndarray) -> np.ndarray:
    return frames.copy()


def drifting(n: int) -> tuple[np.ndarray, list[int]]:
    """``n`` flat frames whose level drifts one step every 20 frames, and the steps."""
    steps = [j // 20 for j in range(n)]
    frames = np.stack([np.full((16, 16, 3), 100 + d, np.uint8) for d in steps])
    return frames, steps


def test_a_reuse_runs_recent_psnr_is_in_the_snapshot_and_the_scrape() -> None:
    n = 100
    frames, steps = drifting(n)
    # One hyperframe; every member is within the bound of base 0 and is verified (in
    # order), and a verified member's shared result is frame 0 where frame j was exact:
    # its error is (step_j / 255) ** 2. The window holds the last RECENT of them.
    errors = [(d / 255) ** 2 for d in steps[1:]]
    recent = errors[-RECENT:]
    want = -10 * math.log10(sum(recent) / len(recent))
    everything = -10 * math.log10(sum(errors) / len(errors))
    assert abs(want - everything) > 1  # the window matters here

    exporter, recorder = PrometheusExporter(port=0), Recorder()
    seen: dict[str, Any] = {}

    def take() -> None:
        assert recorder.snap is not None
        seen["snapshot"] = recorder.snap()
        seen["scrape"] = scrape(exporter)

    report = (
        Pipeline.from_frames(frames, batch_size=8)
        .group(threshold=1e-3, min_len=1, max_len=128)
        .map(copy_frames, reuse=ReuseByHyperframe(psnr=30, verify_every=1))
        .for_each(at_last_frame(n, take))
        .run(monitor=Monitors([exporter, recorder]))
    )
    figures = report.extra["map:copy_frames"]
    assert report.extra["group"]["hyperframes"] == 1
    # verified frames are calls, not reuse: every frame was computed
    assert (figures["computed"], figures["reused"], figures["verified"]) == (n, 0, n - 1)
    assert figures["calls_saved"] == 0.0

    snap: RunSnapshot = seen["snapshot"]
    stage = snap.stage("map:copy_frames")
    assert stage is not None and stage.quality is not None
    assert stage.quality.psnr_db == pytest.approx(want, abs=1e-9)
    assert (stage.quality.samples, stage.quality.window) == (RECENT, RECENT)
    assert [s.name for s in snap.stages if s.quality is not None] == ["map:copy_frames"]
    assert snap.extra["map:copy_frames"]["psnr_mean_recent"] == round(want, 3)
    assert figures["psnr_mean_recent"] == round(want, 3)  # the report keeps it

    got = seen["scrape"]
    label = (("stage", "map:copy_frames"),)
    assert got[("hyperframes_psnr_db", label)] == pytest.approx(want, abs=1e-6)
    assert got[("hyperframes_psnr_window_frames", label)] == RECENT
    assert not [key for key in got if key[0] == "hyperframes_psnr_db" and key[1] != label]


def test_exact_reuse_reports_an_infinite_psnr_and_none_in_json() -> None:
    frames = np.full((24, 8, 8, 3), 7, np.uint8)
    recorder = Recorder()
    report = (
        Pipeline.from_frames(frames, batch_size=8)
        .group(threshold=1e-3, min_len=1, max_len=64)
        .map(copy_frames, reuse=ReuseByHyperframe(verify_every=2))
        .run(monitor=recorder)
    )
    assert recorder.last is not None
    stage = recorder.last.stage("map:copy_frames")
    assert stage is not None and stage.quality is not None
    assert stage.quality.psnr_db == math.inf and stage.quality.mse == 0.0
    assert stage.to_dict()["quality"]["psnr_db"] is None
    assert report.extra["map:copy_frames"]["psnr_mean_recent"] is None
    assert report.extra["map:copy_frames"]["verified"] == stage.quality.samples == 11


def test_the_recent_window_is_bounded_and_slides() -> None:
    """Fed directly: 10 verified frames with errors 1..10 (x 1e-4), a window of 4."""
    pool = FramePool(FrameSpec((2, 2, 1), np.float32), batch_size=1, slots=1, name="t")
    strategy = ReuseStrategy(1.0, verify_every=1, stage="s", recent=4)
    assert strategy.quality() is None
    slot = pool.acquire(holder="t")
    try:
        for k in range(11):
            batch = Batch(k, np.array([k]), pool, slot, {"hyperframe": np.array([0])})
            batch.frames[:] = 0.0
            level = math.sqrt(k * 1e-4)  # the computed result differs from the base's

            def compute(b: Batch, level: float = level) -> np.ndarray:
                return np.full((b.count, 2, 2, 1), level, np.float32)

            strategy.run(batch, compute)
    finally:
        pool.release(slot)
    quality = strategy.quality()
    assert quality is not None and (quality.samples, quality.window) == (4, 4)
    assert quality.mse == pytest.approx(np.mean([7e-4, 8e-4, 9e-4, 10e-4]), rel=1e-5)
    assert len(strategy._recent) == 4
    summary = strategy.summary()
    assert summary["verified"] == 10
    assert summary["verify_psnr_min"] == pytest.approx(-10 * math.log10(10e-4), abs=1e-3)
    assert summary["psnr_mean_recent"] == pytest.approx(quality.psnr_db, abs=1e-3)


# -- a store's cache tiers ---------------------------------------------------------------


GROUP = 4


@pytest.fixture
def store(tmp_path: Path, make_frames: Callable[..., np.ndarray]) -> Path:
    """Six groups of four frames."""
    frames = make_frames(24)
    path = tmp_path / "s.hfs"
    with StoreWriter(path, FrameSpec(frames.shape[1:], frames.dtype), {"fps": 25.0}) as writer:
        for a in range(0, len(frames), GROUP):
            writer.write_group(frames[a : a + GROUP].copy(), pts=np.arange(a, a + GROUP) / 25)
    return path


def test_a_store_sources_cache_tiers_are_in_the_snapshot_and_the_scrape(store: Path) -> None:
    with FrameStore(store, read_ahead=False) as reader:
        groups = len(reader.groups)
    data_bytes = os.path.getsize(store / "data.mdb")
    n = groups * GROUP
    # The source decodes each group once, whatever its batches, where its record lies in
    # LMDB's map (a cold read); it keeps no decoded frame (hot) and no record (warm).
    want = {
        "hot": (0, 0, 0),
        "warm": (0, 0, 0),
        "cold": (groups, 0, data_bytes),
    }
    exporter, recorder = PrometheusExporter(port=0), Recorder()
    seen: dict[str, Any] = {}

    def take() -> None:
        assert recorder.snap is not None
        seen["snapshot"] = recorder.snap()
        seen["scrape"] = scrape(exporter)

    report = (
        Pipeline.from_source(StoreSource(store), batch_size=2)
        .for_each(at_last_frame(n, take))
        .run(monitor=Monitors([exporter, recorder]))
    )
    assert report.frames == n

    def tiers(snap: RunSnapshot) -> dict[str, tuple[int, int, int]]:
        return {t.tier: (t.hits, t.misses, t.bytes) for t in snap.source_figures.cache}

    assert recorder.first is not None and recorder.first.source_figures == SourceFigures()
    assert tiers(seen["snapshot"]) == want
    assert recorder.last is not None and tiers(recorder.last) == want  # kept after close

    got = seen["scrape"]
    for tier, (hits, misses, nbytes) in want.items():
        labels = (("stage", "source"), ("tier", tier))
        assert got[("hyperframes_cache_hits_total", labels)] == hits, tier
        assert got[("hyperframes_cache_misses_total", labels)] == misses, tier
        assert got[("hyperframes_cache_bytes", labels)] == nbytes, tier
    warm = (("stage", "source"), ("tier", "warm"))
    assert got[("hyperframes_cache_capacity_bytes", warm)] == 64 << 20
    assert got[("hyperframes_cache_entries", warm)] == 0


# -- any source may report figures -------------------------------------------------------


class Counted(Source):
    """Black frames that report how many reads they served."""

    def __init__(self, n: int, figures: Callable[[int], Any]) -> None:
        self.spec, self.length, self.info = FrameSpec((4, 4, 3)), n, {}
        self._next, self._reads, self._figures = 0, 0, figures

    def read_into(self, out: np.ndarray) -> Chunk:
        count = min(len(out), self.length - self._next)
        out[:count] = 0
        index = np.arange(self._next, self._next + count)
        self._next += count
        self._reads += 1
        return Chunk(index)

    def figures(self) -> Any:
        return self._figures(self._reads)


def test_a_sources_own_numbers_reach_the_snapshot_and_the_scrape() -> None:
    def figures(reads: int) -> SourceFigures:
        return SourceFigures(
            cache=(CacheTier("disk", hits=reads, misses=1, bytes=10),), numbers={"reads": reads}
        )

    exporter, recorder = PrometheusExporter(port=0), Recorder()
    seen: dict[str, Any] = {}

    def take() -> None:
        seen["scrape"] = scrape(exporter)

    Pipeline.from_source(Counted(16, figures), batch_size=4).for_each(at_last_frame(16, take)).run(
        monitor=Monitors([exporter, recorder])
    )
    assert recorder.last is not None
    assert recorder.last.source_figures.numbers == {"reads": 5}  # 4 batches and the end
    got = seen["scrape"]
    assert got[("hyperframes_stage_figure", (("figure", "reads"), ("stage", "source")))] >= 4
    assert got[("hyperframes_cache_hits_total", (("stage", "source"), ("tier", "disk")))] >= 4


def test_a_source_whose_figures_are_not_typed_is_named() -> None:
    source = Counted(8, lambda reads: {"reads": reads})
    with pytest.raises(TypeError, match=r"Counted\.figures\(\) must return a SourceFigures"):
        Pipeline.from_source(source, batch_size=4).for_each(lambda i, f: None).run(
            monitor=Recorder()
        )


def test_stage_quality_is_validated() -> None:
    assert StageQuality.of_mse(1e-3, samples=1, window=1).psnr_db == pytest.approx(30.0)
    with pytest.raises(ValueError, match="samples"):
        StageQuality.of_mse(1e-3, samples=0, window=4)
    with pytest.raises(ValueError, match="mse"):
        StageQuality(psnr_db=1.0, mse=math.nan, samples=1, window=1)
    worst = StageQuality.of_mse(math.inf, samples=1, window=1)  # results far out of 0..1
    assert worst.psnr_db == -math.inf and worst.to_dict()["psnr_db"] is None
    with pytest.raises(ValueError, match=">= 0"):
        CacheTier("hot", hits=-1, misses=0, bytes=0)
