"""A rotation tag (the display matrix phones write) travels: frames come out upright where
they are converted, and the tag is kept where the planes go through untouched."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import main


def phone_clip(path: Path, angle: int, *, pix_fmt: str = "yuv420p") -> Path:
    """A 64x48 clip tagged to be shown turned ``angle`` degrees (plain PyAV), lossless."""
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, pix_fmt
        stream.options = {"qp": "0"}
        stream.set_display_rotation(angle)
        for i in range(12):
            frame = av.VideoFrame.from_ndarray(np.roll(base, i, axis=1), format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def first_frame(path: Path) -> av.VideoFrame:
    with av.open(str(path)) as container:
        return next(container.decode(video=0))


@pytest.mark.parametrize("angle", [90, 180, 270])
def test_rgb_frames_come_out_upright_and_planes_keep_the_tag(tmp_path, angle):
    path = phone_clip(tmp_path / "phone.mp4", angle)
    upright = hf.VideoSource(path)
    coded = hf.VideoSource(path, rotation="keep")
    assert upright.info["rotation"] == 0 and coded.info["rotation"] == angle
    turned = hf.Pipeline.from_source(upright).collect()
    frames = hf.Pipeline.from_source(coded).collect()
    assert frames.shape == (12, 48, 64, 3)
    assert turned.shape == ((12, 64, 48, 3) if angle % 180 else (12, 48, 64, 3))
    assert np.array_equal(turned, np.rot90(frames, angle // 90, axes=(1, 2)))
    small = hf.VideoSource(path, size=(24, 32))  # the upright frame's size
    assert small.spec.shape == (32, 24, 3)
    assert hf.Pipeline.from_source(small).collect().shape[1:] == small.spec.shape
    planes = hf.VideoSource(path, pix_fmt="yuv420p")
    assert planes.info["rotation"] == angle
    with pytest.raises(ValueError, match="planes cannot be turned; pass rotation='keep'"):
        hf.VideoSource(path, pix_fmt="yuv420p", rotation="apply")


@pytest.mark.parametrize("suffix", [".mp4", ".mkv", ".mov"])
def test_transcode_keeps_the_tag_or_turns_the_frames(tmp_path, capsys, suffix):
    path = phone_clip(tmp_path / "phone.mp4", 90)
    kept, applied = tmp_path / f"kept{suffix}", tmp_path / f"applied{suffix}"
    assert main(["transcode", str(path), str(kept), "--json"]) == 0
    assert main(["transcode", str(path), str(applied), "--rotation", "apply", "--json"]) == 0
    capsys.readouterr()
    frame = first_frame(kept)
    assert (frame.width, frame.height) == (64, 48) and frame.rotation % 360 == 90
    frame = first_frame(applied)
    assert (frame.width, frame.height) == (48, 64) and frame.rotation == 0


def test_a_store_keeps_the_tag_for_unpack(tmp_path, capsys):
    path = phone_clip(tmp_path / "phone.mp4", 270)
    store, out = tmp_path / "phone.hfs", tmp_path / "out.mkv"
    assert main(["pack", str(path), str(store)]) == 0
    assert main(["unpack", str(store), str(out), "--codec", "ffv1"]) == 0
    capsys.readouterr()
    frame = first_frame(out)
    assert (frame.width, frame.height) == (64, 48) and frame.rotation % 360 == 270
