"""Swscale: FFmpeg's conversion into an array is ``to_ndarray``'s, bit for bit, at every
size, from every input layout and colour tag, frame after frame from one kept context; a
slot of another size is refused."""

from __future__ import annotations

import av
import numpy as np
import pytest

from hyperframes.errors import FrameError
from hyperframes.io.swscale import Swscale


def frames_of(fmt: str, width: int, height: int, count: int = 3) -> list[av.VideoFrame]:
    """Noisy frames in ``fmt`` (random RGB converted by FFmpeg), tagged BT.709 where the
    width is odd, so one size and tag set is not all that is tried."""
    rng = np.random.default_rng(width * height)
    made = []
    for _ in range(count):
        rgb = rng.integers(0, 256, (height, width, 3), np.uint8)
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=fmt)
        if width % 2:
            frame.colorspace = 1  # BT.709
        made.append(frame)
    return made


@pytest.mark.parametrize("pix_fmt", ["rgb24", "rgba", "gray"])
@pytest.mark.parametrize("source", ["yuv420p", "yuvj420p", "yuv444p", "nv12"])
@pytest.mark.parametrize(
    "size", [(64, 48), (1280, 720), (1920, 1080)], ids=["small", "720p", "1080p"]
)
def test_the_pixels_are_to_ndarrays(pix_fmt: str, source: str, size: tuple[int, int]) -> None:
    convert = Swscale(pix_fmt)
    width, height = size
    channels = {"rgb24": 3, "rgba": 4, "gray": 1}[pix_fmt]
    out = np.empty((height, width, channels), np.uint8)
    for frame in frames_of(source, width, height):
        convert.convert_into(frame, out)
        want = frame.to_ndarray(format=pix_fmt).reshape(out.shape)
        np.testing.assert_array_equal(out, want)


def test_odd_sizes_and_tags_too() -> None:
    convert = Swscale("rgb24")
    out = np.empty((45, 63, 3), np.uint8)
    for frame in frames_of("yuv444p", 63, 45):
        convert.convert_into(frame, out)
        np.testing.assert_array_equal(out, frame.to_ndarray(format="rgb24"))


def test_a_slot_of_another_size_is_refused() -> None:
    frame = frames_of("yuv420p", 64, 48, count=1)[0]
    with pytest.raises(
        FrameError,
        match=r"cannot write a decoded 64x48, 3 channels, uint8 frame into a slot of 64x40",
    ):
        Swscale("rgb24").convert_into(frame, np.empty((40, 64, 3), np.uint8))
