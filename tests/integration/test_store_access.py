"""Packing into a store and reading it back: exactness, random access, slices, the cache."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hyperframes import Pipeline, StoreError
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink, StoreWriter, is_store, store_info


def pack(frames: np.ndarray, path: Path, **sink: object) -> dict:
    pipeline = Pipeline.from_frames(frames, batch_size=8).group(threshold=0.02, max_len=12)
    report = pipeline.to(StoreSink(path, **sink)).run()  # type: ignore[arg-type]
    return report.output


@pytest.fixture
def frames(make_frames: Callable[..., np.ndarray]) -> np.ndarray:
    out = make_frames(90)
    out[40:60] = out[40]  # a still stretch: long groups and "copy" records
    return out


@pytest.fixture
def store_path(tmp_path: Path, frames: np.ndarray) -> Path:
    path = tmp_path / "s.hfs"
    pack(frames, path)
    return path


def test_pack_report_and_info(store_path: Path, frames: np.ndarray) -> None:
    info = store_info(store_path)
    assert is_store(store_path) and not is_store(store_path.parent)
    assert info["frames"] == 90 and info["complete"] is True
    assert info["raw_bytes"] == frames.nbytes
    assert 0 < info["stored_bytes"] < frames.nbytes
    assert info["psnr_min"] is None and info["tier"] == "lossless"
    assert info["hyperframes"] < 90


def test_random_access_equals_sequential_decode(store_path: Path, frames: np.ndarray) -> None:
    with FrameStore(store_path, hot_bytes=frames[0].nbytes * 4) as store:
        sequential = np.stack(list(store))
        assert np.array_equal(sequential, frames)
        rng = np.random.default_rng(1)
        for i in rng.integers(0, len(frames), 60):
            assert np.array_equal(store[int(i)], frames[i])
        assert store.verify() == []


@pytest.mark.parametrize("decode", ["auto", "group", "frame"])
def test_slices_negatives_and_index_errors(
    store_path: Path, frames: np.ndarray, decode: str
) -> None:
    with FrameStore(store_path, decode=decode) as store:  # type: ignore[arg-type]
        assert len(store) == 90
        assert np.array_equal(store[-1], frames[-1])
        assert np.array_equal(store[-90], frames[0])
        assert np.array_equal(store[5:47], frames[5:47])
        assert np.array_equal(store[80:200], frames[80:])
        assert np.array_equal(store[::7], frames[::7])
        assert np.array_equal(store[-3:], frames[-3:])
        assert store[50:40].shape == (0, *frames.shape[1:])
        assert np.array_equal(store.get_frames_in_range(3, 4), frames[3:4])
        for bad in (90, -91, 10**12):
            with pytest.raises(IndexError, match=r"valid indices: 0\.\.89 \(or -90\.\.-1\)"):
                store[bad]
        with pytest.raises(IndexError, match=r"not within 0\.\.90"):
            store.get_frames_in_range(10, 91)
        with pytest.raises(TypeError):
            store[1.5]  # type: ignore[index]
        with pytest.raises(ValueError, match="read-only"):
            store[0][0, 0, 0] = 1


def test_cache_tiers_count_hits(store_path: Path, frames: np.ndarray) -> None:
    with FrameStore(store_path, hot_bytes=frames[0].nbytes * 30, read_ahead=False) as store:
        store[10]
        store[10]
        stats = store.cache_stats()
        assert stats["hot"].misses == 1 and stats["hot"].hits == 1
        assert stats["warm"].misses == 1
        assert stats["cold"].hits == 1 and stats["cold"].bytes > 0
        assert 0 < stats["hot"].bytes <= stats["hot"].capacity_bytes


def test_read_ahead_makes_playback_hit(store_path: Path, frames: np.ndarray) -> None:
    with FrameStore(store_path, hot_bytes=frames[0].nbytes * 40, decode="group") as store:
        for i in range(len(store)):
            assert np.array_equal(store.get_frame_at(i), frames[i])
        hot = store.cache_stats()["hot"]
    assert hot.hit_rate >= 0.9, hot


def test_lossy_tier_reports_psnr(tmp_path: Path, frames: np.ndarray) -> None:
    out = pack(frames, tmp_path / "lossy.hfs", tier="psnr", psnr=35.0)
    assert out["psnr_min"] is not None and out["psnr_min"] >= 35.0
    with FrameStore(tmp_path / "lossy.hfs") as store:
        assert store.info.psnr_min == out["psnr_min"]
        assert store.verify() == []
        err = np.mean((store[0:90].astype(float) - frames) ** 2)
        assert 10 * np.log10(255**2 / err) >= 35.0


def test_one_open_per_process(store_path: Path) -> None:
    with FrameStore(store_path) as first, FrameStore(store_path) as second:
        assert len(first) == len(second)  # readers share the environment
        with pytest.raises(StoreError, match="already open for reading in this process"):
            StoreWriter(store_path, first.spec, resume=True)
    with FrameStore(store_path) as again:  # closing both released it
        assert len(again) == 90


def test_existing_store_needs_resume_or_overwrite(store_path: Path, frames: np.ndarray) -> None:
    with pytest.raises(FileExistsError, match="resume=True"):
        pack(frames, store_path)
    pack(frames[:20], store_path, overwrite=True)
    with FrameStore(store_path) as store:
        assert len(store) == 20


def test_sink_refuses_untagged_frames(tmp_path: Path, frames: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"add \.group\(\)"):
        Pipeline.from_frames(frames).to(StoreSink(tmp_path / "x.hfs")).run()


def test_real_clip_round_trip_is_bit_exact(
    tmp_path: Path, clip_path: Callable[[str], Path]
) -> None:
    clip = clip_path("bikes.mp4")
    path = tmp_path / "bikes.hfs"
    Pipeline.from_source(VideoSource(clip, stop=48), batch_size=16).group().to(
        StoreSink(path)
    ).run()
    source = VideoSource(clip, stop=48)
    expected = np.empty((48, *source.spec.shape), np.uint8)
    chunk = source.read_into(expected)
    source.close()
    with FrameStore(path) as store:
        assert np.array_equal(store[0:48], expected)
        assert np.allclose(store.info.timestamps, chunk.meta["pts"])
        assert store.info.fps == 25.0 and store.info.time_base == "1/12800"
        assert np.array_equal(store[33], expected[33])


def test_webp_intra_store_is_exact_smaller_and_kept_on_resume(
    tmp_path: Path, clip_path: Callable[[str], Path]
) -> None:
    source = VideoSource(clip_path("bikes.mp4"), stop=24)
    expected = np.empty((24, *source.spec.shape), np.uint8)
    source.read_into(expected)
    source.close()
    sizes = {}
    for intra in ("gradient", "webp"):
        path = tmp_path / f"{intra}.hfs"
        sizes[intra] = pack(expected, path, intra=intra)["stored_bytes"]
        with FrameStore(path) as store:
            assert store.header.intra == intra and store_info(path)["intra"] == intra
            assert np.array_equal(store[0:24], expected)
            assert np.array_equal(store.get_frame_at(17), expected[17])
    assert sizes["webp"] < sizes["gradient"]
    with pytest.raises(StoreError, match="intra=webp"):
        StoreWriter(tmp_path / "webp.hfs", source.spec, resume=True)


def test_the_warm_tier_keeps_group_headers_not_records(
    store_path: Path, frames: np.ndarray
) -> None:
    with FrameStore(store_path, decode="frame", hot_bytes=0, read_ahead=False) as store:
        first, stop = store.groups.span(3)
        assert stop - first >= 2
        assert np.array_equal(store[first], frames[first])  # its header parsed, kept
        assert np.array_equal(store[first + 1], frames[first + 1])  # known
        assert np.array_equal(store[first], frames[first])
        warm = store.cache_stats()["warm"]
        assert (warm.hits, warm.misses, len(store.cache.warm)) == (2, 1, 1)
        with store._record(3) as (record, header):
            assert warm.bytes == header.payload_start < len(record)  # never the record
        assert store.cache_stats()["cold"].hits == 4  # each read decodes from the map
        assert np.array_equal(store[first:stop], frames[first:stop])


FAULTS = """
import random, resource, sys
from hyperframes.hyper.codec.coder import decode_frame
from hyperframes.store import FrameStore
store = FrameStore(sys.argv[1], hot_bytes=0, warm_bytes=0, read_ahead=False)
picks = random.Random(5).choices(range(len(store)), k=40)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in picks:  # (each frame from its records in place, as a read does)
    g = store.groups.group_of(i)
    with store._record(g) as (data, header):
        decode_frame(data, i - store.groups.span(g)[0], header=header)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / len(picks))
"""


def test_a_random_frame_decodes_without_mapping_its_buffers_afresh(tmp_path: Path) -> None:
    """glibc maps each buffer over its threshold anew and page-faults it in: these
    512x512 uint16 frames made ~340 faults a read (a fresh process) before the store
    raised the threshold on open (1,100 before a delta's sum was made in place), 30 after."""
    rng = np.random.default_rng(2)
    base = rng.integers(0, 4096, (512, 512), dtype=np.uint16)
    frames = np.stack([base + rng.integers(0, 4, base.shape, dtype=np.uint16) for _ in range(40)])
    path = tmp_path / "sim.hfs"
    Pipeline.from_frames(frames, batch_size=8).group(threshold=1.0, max_len=20).to(
        StoreSink(path)
    ).run()
    done = subprocess.run(
        [sys.executable, "-c", FAULTS, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    per_read = float(done.stdout)
    assert per_read < 200, per_read  # a frame is 128 pages


def test_a_frame_read_alone_holds_no_memory_but_its_own(tmp_path: Path) -> None:
    """The hot tier counts a frame's bytes: a frame decoded along a chain of records must
    not keep its references' rows alive with it."""
    rng = np.random.default_rng(4)
    base = rng.integers(0, 4096, (64, 48), dtype=np.uint16)
    frames = np.stack([base + np.uint16(i) for i in range(12)])
    path = tmp_path / "chain.hfs"
    Pipeline.from_frames(frames, batch_size=4).group(threshold=1.0, max_len=12).to(
        StoreSink(path)
    ).run()
    with FrameStore(path, decode="frame") as store:
        with store._record(0) as (_, header):
            i = max(range(12), key=lambda k: len(header.chain(k)))
            assert len(header.chain(i)) >= 2
        frame = store[i]
        assert np.array_equal(frame, frames[i])
        owner = frame if frame.base is None else frame.base
        assert owner.nbytes == frame.nbytes
