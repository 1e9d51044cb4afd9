"""for_each(meta=True): the per-frame values of map(into=...) reach the callback.

README example 3 (detect once per hyperframe, save the detections) on a real video.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.modes import ReuseByHyperframe


def detect(frames: np.ndarray) -> list[float]:
    return [float(frame.mean()) for frame in frames]


def decoded(path: Path) -> np.ndarray:
    """The frames as plain PyAV + hyperframes' own source read them (the oracle's input)."""
    return hf.Pipeline.from_source(hf.VideoSource(path)).collect()


def test_readme_example_3_hands_the_detections_to_save(synthetic_mp4: Path) -> None:
    detections: dict[int, Any] = {}
    keys: list[set[str]] = []

    def save(ids: np.ndarray, frames: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        assert len(meta["detections"]) == len(ids) == len(frames)
        keys.append(set(meta))
        detections.update(zip(ids.tolist(), meta["detections"], strict=True))

    report = (
        hf.Pipeline.from_source(hf.VideoSource(synthetic_mp4))
        .group()
        .map(detect, reuse=ReuseByHyperframe(psnr=45), into="detections", workers=2)
        .for_each(save, batched=True, meta=True)
        .run()
    )
    with av.open(str(synthetic_mp4)) as container:
        count = container.streams.video[0].frames
    assert report.frames == count == len(detections) == 40
    assert sorted(detections) == list(range(40))
    assert keys and all({"detections", "pts", "hyperframe", "hf_pos", "hf_len"} <= k for k in keys)
    frames = decoded(synthetic_mp4)
    # every frame has its own detection or its base's (reused within 45 dB)
    for i, value in detections.items():
        assert value == pytest.approx(detect(frames[i : i + 1])[0], abs=1.0)


def test_batched_meta_is_exactly_what_into_stored(synthetic_mp4: Path) -> None:
    seen: dict[int, float] = {}
    pts: dict[int, float] = {}

    def save(ids: np.ndarray, frames: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        seen.update(zip(ids.tolist(), meta["mean"].tolist(), strict=True))
        pts.update(zip(ids.tolist(), meta["pts"].tolist(), strict=True))

    (
        hf.Pipeline.from_source(hf.VideoSource(synthetic_mp4), batch_size=8)
        .map(detect, into="mean", workers=2)
        .for_each(save, batched=True, meta=True)
        .run()
    )
    frames = decoded(synthetic_mp4)
    assert [seen[i] for i in range(len(frames))] == detect(frames)
    assert [pts[i] for i in range(len(frames))] == pytest.approx(np.arange(40) / 25)


def test_per_frame_meta_gives_each_frame_its_own_values(synthetic_mp4: Path) -> None:
    calls: list[tuple[int, float, Any, int]] = []

    def save(i: int, frame: np.ndarray, meta: dict[str, Any]) -> None:
        calls.append((i, meta["mean"], meta["label"], meta["hf_pos"]))
        assert frame.ndim == 3

    (
        hf.Pipeline.from_source(hf.VideoSource(synthetic_mp4), batch_size=4)
        .group()
        .map(detect, into="mean")
        .map(lambda b: [f"frame{int(b[k].sum())}" for k in range(len(b))], into="label")
        .for_each(save, meta=True)
        .run()
    )
    frames = decoded(synthetic_mp4)
    assert [c[0] for c in calls] == list(range(40))
    assert [c[1] for c in calls] == detect(frames)
    assert all(type(c[1]) is float and type(c[3]) is int for c in calls)  # numbers, not numpy
    assert [c[2] for c in calls] == [f"frame{int(f.sum())}" for f in frames]


def test_without_meta_the_callbacks_keep_two_arguments() -> None:
    frames = np.arange(8, dtype=np.uint8).reshape(8, 1, 1)
    got: list[Any] = []
    hf.Pipeline.from_frames(frames, batch_size=4).for_each(lambda i, f: got.append(i)).run()
    hf.Pipeline.from_frames(frames, batch_size=4).for_each(
        lambda ids, fs: got.append(ids.tolist()), batched=True
    ).run()
    assert got == [*range(8), [0, 1, 2, 3], [4, 5, 6, 7]]
