"""ImageSequenceSource and ImageSequenceSink against real files in tmp_path."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from hyperframes.errors import CorruptFrame, FrameError, MediaError
from hyperframes.frames import FrameSpec
from hyperframes.io.image_sink import ImageSequenceSink
from hyperframes.io.images import ImageSequenceSource


def write_seq(folder: Path, frames: np.ndarray, *, batch: int = 4, **kwargs: object) -> str:
    sink = ImageSequenceSink(folder, **kwargs)
    sink.open(FrameSpec(frames.shape[1:]), {})
    for start in range(0, len(frames), batch):
        sink.write(
            frames[start : start + batch], np.arange(start, min(start + batch, len(frames))), {}
        )
        assert len(sink._pending) <= 2 * sink.workers  # bounded in-flight writes
    return sink.close(ok=True)


def read_seq(source: ImageSequenceSource, batch: int = 4) -> tuple[np.ndarray, np.ndarray]:
    out = np.empty((batch, *source.spec.shape), np.uint8)
    ids, frames = [], []
    with source:
        while len(chunk := source.read_into(out)):
            ids.extend(chunk.index.tolist())
            frames.append(out[: len(chunk)].copy())
    return np.array(ids), np.concatenate(frames)


def test_png_round_trip_is_exact(tmp_path, make_frames):
    frames = make_frames(10)
    assert write_seq(tmp_path / "out", frames, workers=2) == str(tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [f"frame_{i:06d}.png" for i in range(10)]  # no temp folder left
    ids, back = read_seq(ImageSequenceSource(tmp_path / "out"))
    assert ids.tolist() == list(range(10))
    np.testing.assert_array_equal(back, frames)
    # on disk the channels are in OpenCV's BGR order
    np.testing.assert_array_equal(
        cv2.imread(str(tmp_path / "out" / names[3]))[..., ::-1], frames[3]
    )


def test_gray_and_rgba_round_trip(tmp_path, make_frames):
    gray = make_frames(3)[..., :1]
    write_seq(tmp_path / "g", gray)
    np.testing.assert_array_equal(
        read_seq(ImageSequenceSource(tmp_path / "g", pix_fmt="gray"))[1], gray
    )
    rgba = np.concatenate([make_frames(3), make_frames(3)[..., :1]], axis=3)
    write_seq(tmp_path / "a", rgba)
    np.testing.assert_array_equal(
        read_seq(ImageSequenceSource(tmp_path / "a", pix_fmt="rgba"))[1], rgba
    )
    opaque = read_seq(ImageSequenceSource(tmp_path / "g", pix_fmt="rgba"))[1]
    assert opaque.shape == (3, 48, 64, 4) and (opaque[..., 3] == 255).all()


def test_jpeg_is_close(tmp_path, make_frames):
    frames = make_frames(3)
    write_seq(tmp_path / "j", frames, pattern="{index}.jpg", params=[cv2.IMWRITE_JPEG_QUALITY, 98])
    back = read_seq(ImageSequenceSource(tmp_path / "j" / "*.jpg"))[1].astype(int)
    assert np.abs(back - frames).mean() < 3


def test_printf_pattern_orders_by_number_and_start_stop(tmp_path, make_frames):
    frames = make_frames(12)
    write_seq(tmp_path / "s", frames, pattern="shot_{index}.png")  # shot_2 sorts after shot_10
    ids, back = read_seq(ImageSequenceSource(tmp_path / "s" / "shot_%d.png", start=1, stop=11))
    assert ids.tolist() == list(range(1, 11))
    np.testing.assert_array_equal(back, frames[1:11])
    padded = tmp_path / "p"
    write_seq(padded, frames[:3])
    (padded / "notes.txt").write_text("ignored")
    assert ImageSequenceSource(padded / "frame_%06d.png").length == 3
    assert ImageSequenceSource(padded).length == 3


def test_unreadable_image_fails_with_its_index_or_is_skipped(tmp_path, make_frames):
    frames = make_frames(8)
    write_seq(tmp_path / "c", frames)
    (tmp_path / "c" / "frame_000003.png").write_bytes(b"not a png")
    with pytest.raises(CorruptFrame, match="frame 3") as caught:
        read_seq(ImageSequenceSource(tmp_path / "c"))
    assert caught.value.frame == 3
    source = ImageSequenceSource(tmp_path / "c", on_corrupt="skip")
    ids, back = read_seq(source, batch=4)
    assert source.skipped == [3]
    assert ids.tolist() == [0, 1, 2, 4, 5, 6, 7]
    np.testing.assert_array_equal(back, frames[[0, 1, 2, 4, 5, 6, 7]])


def test_bad_source_inputs(tmp_path, make_frames):
    with pytest.raises(MediaError, match="no images found"):
        ImageSequenceSource(tmp_path)
    with pytest.raises(MediaError, match="no images found"):
        ImageSequenceSource(tmp_path / "missing" / "frame_%06d.png")
    write_seq(tmp_path / "m", make_frames(2))
    cv2.imwrite(str(tmp_path / "m" / "frame_000002.png"), np.zeros((10, 10, 3), np.uint8))
    with pytest.raises(FrameError, match="same size"):
        read_seq(ImageSequenceSource(tmp_path / "m"))


@pytest.mark.parametrize(
    "pattern",
    [
        "../escape_{index}.png",
        "/tmp/abs_{index}.png",
        "sub/{index}.png",
        "{index}/../x.png",
        "same.png",
        "{frame}.png",
        "{index}.unknownext",
    ],
)
def test_patterns_that_escape_or_cannot_be_written_are_refused(tmp_path, pattern):
    with pytest.raises(ValueError):
        ImageSequenceSink(tmp_path, pattern=pattern)


def test_existing_files_need_overwrite(tmp_path, make_frames):
    write_seq(tmp_path / "o", make_frames(2))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        ImageSequenceSink(tmp_path / "o")
    write_seq(tmp_path / "o", make_frames(2)[::-1], overwrite=True)
    np.testing.assert_array_equal(
        read_seq(ImageSequenceSource(tmp_path / "o"))[1], make_frames(2)[::-1]
    )


def test_failure_leaves_nothing_behind(tmp_path, make_frames):
    sink = ImageSequenceSink(tmp_path / "new" / "out", workers=2)
    sink.open(FrameSpec((48, 64, 3)), {})
    sink.write(make_frames(6), np.arange(6), {})
    with pytest.raises(FrameError):
        sink.write(np.zeros((1, 48, 64), np.uint8), np.arange(6, 7), {})
    assert sink.close(ok=False) is None
    assert list((tmp_path / "new").iterdir()) == []  # the folder it created is gone too


def test_writer_error_surfaces(tmp_path, make_frames):
    sink = ImageSequenceSink(tmp_path / "w", workers=1)
    sink.open(FrameSpec((48, 64, 3)), {})
    for partial in (tmp_path / "w").iterdir():
        partial.rmdir()  # the disk "fails": writes into a vanished folder
    sink.write(make_frames(2), np.arange(2), {})
    with pytest.raises(FileNotFoundError, match=r"frame_000000\.png"):  # the OSError itself
        sink.close(ok=True)
    assert list((tmp_path / "w").iterdir()) == []
