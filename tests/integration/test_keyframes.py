"""Only the key frames (issue 51, first part): ``VideoSource(keyframes=True)`` and
``--keyframes`` give the key frames a full decode flags, with their indices, times and
pixels, and feed the decoder only their packets."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import main


def full_decode_keyframes(path: Path) -> tuple[list[int], list[float], list[np.ndarray]]:
    """The reference: every frame decoded by PyAV, those flagged key kept."""
    indices, times, frames = [], [], []
    with av.open(str(path)) as container:
        for k, frame in enumerate(container.decode(video=0)):
            if frame.key_frame:
                indices.append(k)
                times.append(float(frame.time))
                frames.append(frame.to_ndarray(format="rgb24"))
    return indices, times, frames


@pytest.fixture
def gop_clip(tmp_path: Path, clip_path) -> Path:
    """bikes.mp4 re-encoded with B-frames and a key frame every 24 frames (and at cuts)."""
    out = tmp_path / "gop.mp4"
    with av.open(str(clip_path("bikes.mp4"))) as src, av.open(str(out), "w") as dst:
        stream = dst.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 640, 272, "yuv420p"
        stream.options = {"g": "24", "bf": "2", "preset": "ultrafast"}
        for k, frame in enumerate(src.decode(video=0)):
            frame.pts, frame.time_base = k, Fraction(1, 25)
            dst.mux(stream.encode(frame))
        dst.mux(stream.encode(None))
    return out


@pytest.mark.parametrize("clip", ["bikes", "gop"])
def test_the_key_frames_of_a_full_decode(clip: str, clip_path, gop_clip: Path) -> None:
    path = clip_path("bikes.mp4") if clip == "bikes" else gop_clip
    indices, times, frames = full_decode_keyframes(path)
    assert len(indices) > 3
    source = hf.VideoSource(path, keyframes=True, colour="ffmpeg")
    assert source.length == len(indices)
    got_ids, got_times, got = [], [], []
    for ids, batch, meta in hf.Pipeline.from_source(source, batch_size=4).iter_batches(meta=True):
        got_ids += ids.tolist()
        got_times += meta["pts"].tolist()
        got += [f.copy() for f in batch]
    assert got_ids == indices and got_times == pytest.approx(times)
    assert all(np.array_equal(a, b) for a, b in zip(got, frames, strict=True))


def test_a_range_of_key_frames_and_the_cli(gop_clip: Path, tmp_path: Path, monkeypatch) -> None:
    indices, _, _ = full_decode_keyframes(gop_clip)
    source = hf.VideoSource(gop_clip, keyframes=True, start=30, stop=200)
    assert source.length == len([k for k in indices if 30 <= k < 200])
    (tmp_path / "mean_fn.py").write_text(
        "def mean(frames):\n    return [float(f.mean()) for f in frames]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "keys.jsonl"
    assert main(["map", str(gop_clip), "mean_fn:mean", "--out", str(out), "--keyframes"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["frame"] for r in rows] == indices
    with pytest.raises(ValueError, match="step and keyframes each choose the frames"):
        hf.VideoSource(gop_clip, keyframes=True, step=2)


def test_transcode_keeps_the_key_frames_each_until_the_next(gop_clip: Path, tmp_path: Path):
    _, times, _ = full_decode_keyframes(gop_clip)
    out = tmp_path / "keys.mkv"
    assert main(["transcode", str(gop_clip), str(out), "--keyframes", "--codec", "ffv1"]) == 0
    with av.open(str(out)) as container:
        shown = [float(f.time) for f in container.decode(video=0)]
    assert shown == pytest.approx([t - times[0] for t in times], abs=1e-3)  # the input's times
    assert main(["transcode", str(gop_clip), str(out), "--keyframes", "--every", "2"]) == 2
