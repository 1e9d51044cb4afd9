"""A stream whose frame size changes part-way: a clear error, or every frame resized.

The input is two H.264 segments of different sizes concatenated into one MPEG-TS file,
as a broadcast capture or ``cat a.ts b.ts`` gives. Decoding it used to write the frames
after the change nowhere (OpenCV allocated a new array instead of filling the slot), so
``pack`` and ``transcode --codec ffv1`` exited 0 with stale frames.
"""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import pytest

import hyperframes as hf
from hyperframes import FrameSpec
from hyperframes.cli import main
from hyperframes.errors import FrameError, MediaError
from hyperframes.frames import describe_shape
from hyperframes.io.formats import cv_into
from hyperframes.io.video import VideoSource
from hyperframes.io.video_sink import VideoSink

FIRST, SECOND = (320, 240), (256, 192)  # (width, height)
PER_SEGMENT = 24


def _segment(width: int, height: int, count: int, offset: int, level: int) -> bytes:
    """``count`` flat frames of grey ``level`` plus a gradient, as MPEG-TS bytes."""
    import io

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mpegts") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "10"}
        x = np.linspace(0, 60, width, dtype=np.float32)[None, :, None]
        for i in range(count):
            image = np.clip(level + x + np.zeros((height, 1, 3), np.float32), 0, 255)
            frame = av.VideoFrame.from_ndarray(image.astype(np.uint8), format="rgb24")
            frame.pts = offset + i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return buffer.getvalue()


@pytest.fixture
def size_change(tmp_path: Path) -> Path:
    """24 frames of 320x240 at grey 40, then 24 of 256x192 at grey 160, in one .ts file."""
    path = tmp_path / "joined.ts"
    path.write_bytes(
        _segment(*FIRST, PER_SEGMENT, 0, 40) + _segment(*SECOND, PER_SEGMENT, PER_SEGMENT, 160)
    )
    return path


def _read(source: VideoSource) -> np.ndarray:
    out = np.empty((8, *source.spec.shape), source.spec.dtype)
    frames = []
    source.open()
    try:
        while len(chunk := source.read_into(out)):
            frames.append(out[: len(chunk)].copy())
    finally:
        source.close()
    return np.concatenate(frames)


@pytest.mark.parametrize("pix_fmt", ["rgb24", "gray", "rgba", "yuv420p"])
def test_a_size_change_without_size_is_one_clear_error(size_change, pix_fmt):
    source = VideoSource(size_change, pix_fmt=pix_fmt)
    with pytest.raises(MediaError) as caught:
        _read(source)
    message = str(caught.value)
    assert "\n" not in message
    assert f"frame {PER_SEGMENT} " in message
    assert "256x192" in message and "320x240" in message
    assert "size=(320, 240)" in message and "--size 320x240" in message


@pytest.mark.parametrize("pix_fmt", ["rgb24", "gray", "rgba", "yuv420p"])
@pytest.mark.parametrize("size", [(160, 120), (320, 240), (256, 192), (480, 270)])
def test_with_size_every_frame_is_resized(size_change, pix_fmt, size):
    source = VideoSource(size_change, pix_fmt=pix_fmt, size=size)
    frames = _read(source)
    assert len(frames) == 2 * PER_SEGMENT
    width, height = size
    if pix_fmt == "yuv420p":
        assert frames.shape[1:] == (height * 3 // 2, width)
        luma = frames[:, :height, :].astype(np.float64)
    else:
        assert frames.shape[1:3] == (height, width)
        luma = frames[..., 0].astype(np.float64)
    # The first segment is dark, the second bright: each frame shows its own segment
    # (a stale or unwritten slot would repeat the first segment's level).
    first, second = luma[:PER_SEGMENT].mean(axis=(1, 2)), luma[PER_SEGMENT:].mean(axis=(1, 2))
    assert first.max() < 110 < second.min(), (first, second)
    if pix_fmt == "rgba":
        assert (frames[..., 3] == 255).all()


def test_size_resizes_like_opencv_inter_area(size_change):
    native = _read(VideoSource(size_change, stop=PER_SEGMENT))
    resized = _read(VideoSource(size_change, stop=PER_SEGMENT, size=(160, 120)))
    expected = [cv2.resize(f, (160, 120), interpolation=cv2.INTER_AREA) for f in native]
    np.testing.assert_array_equal(resized, np.stack(expected))


def test_size_is_checked():
    with pytest.raises(ValueError, match="size must be"):
        VideoSource("unused.mp4", size=(0, 10))
    with pytest.raises(ValueError, match="size must be"):
        VideoSource("unused.mp4", size="640x360")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "extra", [["pack"], ["transcode", "--codec", "ffv1"], ["transcode"]], ids=str
)
def test_cli_refuses_a_size_change_with_one_line(tmp_path, size_change, capsys, extra):
    suffix = {"pack": ".hfs"}.get(extra[0], ".mkv" if "ffv1" in extra else ".mp4")
    out = tmp_path / f"out{suffix}"
    code = main([extra[0], str(size_change), str(out), *extra[1:]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, err
    assert len(err) == 1 and err[0].startswith("hyperframes: error: frame 24 "), err
    assert "256x192" in err[0] and "--size 320x240" in err[0]
    assert "broadcast" not in err[0]


def test_cv_into_refuses_a_slot_of_another_shape():
    src = np.zeros((192 * 3 // 2, 256), np.uint8)
    slot = np.full((240, 320, 3), 7, np.uint8)
    with pytest.raises(
        FrameError, match="256x192, 3 channels, uint8 result into a slot of 320x240"
    ):
        cv_into(slot, (192, 256, 3), cv2.cvtColor, src, cv2.COLOR_YUV2RGB_I420)
    assert (slot == 7).all()


def test_cv_into_copies_what_opencv_did_not_write_in_place():
    src = np.full((48 * 3 // 2, 64), 128, np.uint8)
    slot = np.zeros((48, 64, 6), np.uint8)[..., ::2]  # the right shape, but strided
    cv_into(slot, (48, 64, 3), cv2.cvtColor, src, cv2.COLOR_YUV2RGB_I420)
    np.testing.assert_array_equal(slot, cv2.cvtColor(src, cv2.COLOR_YUV2RGB_I420))


@pytest.mark.parametrize("planar", [False, True])
def test_sink_refuses_a_batch_of_another_shape(tmp_path, planar):
    if planar:
        spec, batch = FrameSpec((360, 320)), np.zeros((2, 288, 256), np.uint8)
    else:
        spec, batch = FrameSpec((240, 320, 3)), np.zeros((2, 192, 256, 3), np.uint8)
    sink = VideoSink(tmp_path / "o.mp4", input_pix_fmt="yuv420p" if planar else None)
    sink.open(spec, {})
    try:
        with pytest.raises(FrameError) as caught:
            sink.write(batch, np.arange(2), {})
    finally:
        sink.close(ok=False)
    message = str(caught.value)
    assert "\n" not in message and "broadcast" not in message
    assert describe_shape(batch.shape[1:], batch.dtype) in message
    assert not (tmp_path / "o.mp4").exists()


@pytest.mark.parametrize("command", ["pack", "transcode"])
def test_cli_with_size_handles_a_size_change(tmp_path, size_change, command):
    out = tmp_path / ("out.hfs" if command == "pack" else "out.mkv")
    extra = [] if command == "pack" else ["--codec", "ffv1"]
    assert main([command, str(size_change), str(out), "--size", "160x120", *extra]) == 0
    if command == "pack":
        with hf.FrameStore(out) as store:
            frames = np.stack([store[i] for i in range(len(store))])
    else:
        frames = hf.Pipeline.from_source(VideoSource(out)).collect()
    assert frames.shape == (2 * PER_SEGMENT, 120, 160, 3)
    # each half keeps its own level: no black frames, no copies of the first half
    first, second = frames[:PER_SEGMENT].mean(), frames[PER_SEGMENT:].mean()
    assert second > first + 50 and frames.reshape(len(frames), -1).max(axis=1).min() > 0
