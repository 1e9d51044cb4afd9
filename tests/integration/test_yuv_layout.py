"""yuv420p frames at every even size, including heights of 2 (mod 4) such as 480x270.

PyAV and OpenCV lay an I420 frame out as the Y plane followed by the U and V planes packed
byte after byte; with ``H / 2`` odd a chroma plane does not fill whole rows of width ``W``,
so splitting by rows (the old ``planes()``) failed with "cannot reshape array".
"""

from __future__ import annotations

import json
import subprocess
import sys

import av
import cv2
import numpy as np
import pytest

from hyperframes.cli import main
from hyperframes.io.formats import i420_spec
from hyperframes.io.video import VideoSource
from hyperframes.io.yuv import planes, resize_frame_into, resize_i420, resize_i420_into

SIZES = [(480, 270), (64, 48), (62, 34), (6, 2), (1280, 720), (250, 142)]


def _random_i420(width: int, height: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, i420_spec(width, height).shape, dtype=np.uint8)


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_planes_match_pyav_planes(width, height):
    frame = _random_i420(width, height)
    video_frame = av.VideoFrame.from_ndarray(frame, format="yuv420p")
    for index, plane in enumerate(planes(frame)):
        source = video_frame.planes[index]
        rows = np.frombuffer(bytes(source), np.uint8).reshape(-1, source.line_size)
        np.testing.assert_array_equal(plane, rows[:, : plane.shape[1]])
    assert [p.shape for p in planes(frame)] == [
        (height, width),
        (height // 2, width // 2),
        (height // 2, width // 2),
    ]


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_planes_are_views_that_match_opencv(width, height):
    frame = _random_i420(width, height, seed=1)
    y, u, v = planes(frame)
    for plane in (y, u, v):
        assert np.shares_memory(plane, frame)
    rgb = cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_I420)
    rebuilt = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)
    assert rebuilt.shape == frame.shape  # OpenCV uses the same stacked layout
    u[...] = 0
    assert (frame.reshape(-1)[height * width : height * width + u.size] == 0).all()


def test_planes_refuses_what_cannot_be_split_into_views():
    with pytest.raises(ValueError, match="even H and W"):
        planes(np.zeros((404, 480), np.uint8))
    with pytest.raises(ValueError, match="contiguous"):
        planes(np.zeros((405, 960), np.uint8)[:, ::2])


@pytest.mark.parametrize(("width", "height"), [(480, 270), (320, 180), (64, 48), (66, 50)])
def test_resize_i420_matches_a_plane_by_plane_oracle(width, height):
    frames = np.stack([_random_i420(640, 360, seed=s) for s in range(2)])
    out = resize_i420(frames, width, height)
    assert out.shape == (2, height * 3 // 2, width)
    for src, dst in zip(frames, out, strict=True):
        flat = src.reshape(-1)
        y = flat[: 640 * 360].reshape(360, 640)
        u = flat[640 * 360 : 640 * 360 + 320 * 180].reshape(180, 320)
        v = flat[640 * 360 + 320 * 180 :].reshape(180, 320)
        expected = [
            cv2.resize(y, (width, height), interpolation=cv2.INTER_AREA),
            cv2.resize(u, (width // 2, height // 2), interpolation=cv2.INTER_AREA),
            cv2.resize(v, (width // 2, height // 2), interpolation=cv2.INTER_AREA),
        ]
        np.testing.assert_array_equal(
            dst.reshape(-1), np.concatenate([e.ravel() for e in expected])
        )


def test_resize_i420_keeps_the_clear_error_for_odd_sizes():
    with pytest.raises(ValueError, match="even size, got 481x270"):
        resize_i420(np.zeros((1, 540, 640), np.uint8), 481, 270)
    with pytest.raises(ValueError, match="even H and W"):
        resize_i420_into(np.zeros((540, 640), np.uint8), np.zeros((404, 481), np.uint8))


def test_round_trip_through_pyav_at_480x270():
    frame = _random_i420(480, 270, seed=3)
    back = av.VideoFrame.from_ndarray(frame, format="yuv420p").to_ndarray()
    np.testing.assert_array_equal(back, frame)
    rgb = cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_I420)
    assert rgb.shape == (270, 480, 3)


def _gradient_clip(path, width=320, height=180, count=12):
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "12"}
        x = np.linspace(0, 200, width, dtype=np.float32)
        ramp = np.stack([x, np.full_like(x, 100), 200 - x], axis=-1)  # red up, blue down
        for i in range(count):
            image = np.broadcast_to(ramp[None] + i, (height, width, 3))
            frame = av.VideoFrame.from_ndarray(image.astype(np.uint8), format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def test_video_source_decodes_yuv420p_at_a_height_of_2_mod_4(tmp_path):
    clip = _gradient_clip(tmp_path / "in.mp4", 480, 270)
    source = VideoSource(clip, pix_fmt="yuv420p")
    out = np.empty((16, *source.spec.shape), np.uint8)
    count = len(source.read_into(out))
    source.close()
    assert count == 12
    with av.open(str(clip)) as container:
        expected = [f.to_ndarray() for f in container.decode(video=0)]
    np.testing.assert_array_equal(out[:count], np.stack(expected))


@pytest.mark.parametrize("size", ["480x270", "250x142"])
def test_cli_transcode_to_a_height_of_2_mod_4(tmp_path, capsys, size):
    clip = _gradient_clip(tmp_path / "in.mp4")
    out = tmp_path / "out.mp4"
    assert main(["transcode", str(clip), str(out), "--size", size, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["frames"] == 12
    width, height = (int(v) for v in size.split("x"))
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 12 and frames[0].shape == (height, width, 3)
    # The colour ramps survive: the chroma planes were resized, not scrambled.
    row = frames[5][height // 2].astype(int)
    assert row[-8:, 0].mean() - row[:8, 0].mean() > 150
    assert row[:8, 2].mean() - row[-8:, 2].mean() > 150
    assert abs(row[:, 1].mean() - 105) < 12


def test_hyperframes_command_transcodes_to_480x270(tmp_path):
    clip = _gradient_clip(tmp_path / "in.mp4", count=6)
    out = tmp_path / "out.mp4"
    command = [sys.executable, "-m", "hyperframes", "transcode", str(clip), str(out)]
    done = subprocess.run(
        [*command, "--size", "480x270"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height, stream.frames) == (480, 270, 6)


def _smooth_frame(width: int, height: int, fmt: str = "yuv420p") -> av.VideoFrame:
    """A picture-like yuv420p frame (gradients and soft shapes, not noise)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    rgb = np.stack(
        [
            128 + 100 * np.sin(xx / 17.0) * np.cos(yy / 23.0),
            255 * xx / width,
            255 * yy / height,
        ],
        axis=-1,
    ).astype(np.uint8)
    return av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=fmt)


@pytest.mark.parametrize(
    ("size", "target"),
    [
        ((1280, 720), (640, 360)),
        ((1280, 720), (320, 180)),
        ((1278, 720), (426, 240)),
        ((1280, 720), (1280, 360)),  # one direction unchanged
        ((250, 150), (50, 30)),  # rows padded past the width (line_size 256): skipped
    ],
)
def test_resize_frame_into_at_whole_ratios_is_opencv_inter_area(size, target):
    frame = _smooth_frame(*size)
    dst = np.zeros(i420_spec(*target).shape, np.uint8)
    resize_frame_into(frame, dst)
    expected = resize_i420(frame.to_ndarray()[None], *target)[0]
    np.testing.assert_array_equal(dst, expected)


@pytest.mark.parametrize(
    ("size", "target", "fmt"),
    [
        ((1920, 1080), (1280, 720), "yuv420p"),
        ((1280, 720), (480, 270), "yuv420p"),
        ((1280, 720), (1920, 1080), "yuv420p"),
        ((1280, 720), (640, 360), "yuvj420p"),  # another pixel format: swscale converts
        ((251, 141), (124, 70), "yuv420p"),  # odd frame: only swscale can read it
    ],
)
def test_resize_frame_into_elsewhere_is_swscale_area(size, target, fmt):
    frame = _smooth_frame(*size, fmt=fmt)
    dst = np.zeros(i420_spec(*target).shape, np.uint8)
    resize_frame_into(frame, dst)
    width, height = target
    swscale = frame.reformat(width=width, height=height, format="yuv420p", interpolation="AREA")
    np.testing.assert_array_equal(dst, swscale.to_ndarray())
    if fmt == "yuv420p" and size[0] % 2 == 0 and width < size[0]:
        # Both average areas; on a smooth picture they agree to a few levels (the rounding
        # and the weights at the area edges differ; bigbuckbunny: mean 0.06-0.13, max 12).
        opencv = resize_i420(frame.to_ndarray()[None], width, height)[0]
        diff = np.abs(dst.astype(np.int16) - opencv)
        assert diff.mean() < 0.5 and diff.max() <= 10, (diff.mean(), diff.max())
