"""File names that are not UTF-8, and images of 16 bits: read and written as they are."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from hyperframes import ImageSequenceSource, Pipeline
from hyperframes.cli import main

ODD = os.fsdecode(b"o\xff")  # a name that is not UTF-8, as Python hands it over


def png_bytes(image: np.ndarray) -> bytes:
    done, data = cv2.imencode(".png", image)
    assert done
    return data.tobytes()


def test_frame_writes_a_file_whose_name_is_not_utf8(tmp_path, synthetic_mp4):
    store = tmp_path / "S"
    assert main(["pack", str(synthetic_mp4), str(store), "--json"]) == 0
    out = tmp_path / f"{ODD}.png"
    assert main(["frame", str(store), "3", str(out)]) == 0
    names = os.listdir(os.fsencode(tmp_path))
    assert b"o\xff.png" in names
    image = cv2.imdecode(np.fromfile(out, np.uint8), cv2.IMREAD_COLOR)
    assert image.shape == (48, 64, 3)


def test_an_image_folder_with_names_that_are_not_utf8(tmp_path):
    frames = np.random.default_rng(0).integers(0, 256, (3, 8, 10, 3), dtype=np.uint8)
    for i, frame in enumerate(frames):
        (tmp_path / f"{ODD}_{i:03d}.png").write_bytes(png_bytes(frame[..., ::-1]))
    got = Pipeline.from_source(ImageSequenceSource(tmp_path)).collect()
    assert np.array_equal(got, frames)
    out = tmp_path / f"out{ODD}"
    Pipeline.from_frames(frames).write_images(out).run()
    assert len(os.listdir(os.fsencode(out))) == 3


@pytest.mark.parametrize("pix_fmt,channels", [("rgb24", 3), ("rgba", 4), ("gray", 1)])
def test_sixteen_bit_images_keep_sixteen_bits(tmp_path, pix_fmt, channels):
    rng = np.random.default_rng(1)
    rgba = rng.integers(0, 65536, (2, 6, 7, 4), dtype=np.uint16)
    for i, image in enumerate(rgba):
        bgra = image[..., [2, 1, 0, 3]]
        (tmp_path / f"f{i}.png").write_bytes(png_bytes(bgra if channels == 4 else bgra[..., :3]))
    source = ImageSequenceSource(tmp_path, pix_fmt=pix_fmt)
    assert source.spec.dtype == np.uint16 and source.spec.shape == (6, 7, channels)
    got = Pipeline.from_source(source).collect()
    if channels == 4:
        assert np.array_equal(got, rgba)
    elif channels == 3:
        assert np.array_equal(got, rgba[..., :3])
    else:
        assert got.dtype == np.uint16 and got.max() > 255


def test_a_sequence_whose_depth_changes_is_refused(tmp_path):
    (tmp_path / "f0.png").write_bytes(png_bytes(np.zeros((4, 4, 3), np.uint16)))
    (tmp_path / "f1.png").write_bytes(png_bytes(np.zeros((4, 4, 3), np.uint8)))
    with pytest.raises(Exception, match="same depth"):
        Pipeline.from_source(ImageSequenceSource(tmp_path)).collect()
