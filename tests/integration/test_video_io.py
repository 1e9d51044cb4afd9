"""VideoSource, VideoSink and probe against real PyAV, sample clips and files in tmp_path."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from hyperframes.errors import CorruptFrame, FrameError, MediaError
from hyperframes.frames import FrameSpec
from hyperframes.io import frame_table
from hyperframes.io import video as video_module
from hyperframes.io import video_sink as video_sink_module
from hyperframes.io.probe import probe
from hyperframes.io.video import VideoSource
from hyperframes.io.video_sink import VideoSink


def read_all(source: VideoSource, batch: int = 16) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """Every frame id, pts and a crc of every frame's pixels (keeps memory flat)."""
    out = np.empty((batch, *source.spec.shape), source.spec.dtype)
    ids, stamps, frames = [], [], []
    with source:
        while len(chunk := source.read_into(out)):
            ids.extend(chunk.index.tolist())
            stamps.extend(chunk.meta["pts"].tolist())
            frames.extend(zlib.crc32(out[i].tobytes()).to_bytes(4) for i in range(len(chunk)))
    return np.array(ids), np.array(stamps), frames


def read_frames(source: VideoSource) -> np.ndarray:
    """All frames of a small source as one array."""
    out = np.empty((256, *source.spec.shape), source.spec.dtype)
    with source:
        chunk = source.read_into(out)
        assert len(source.read_into(out[:1])) == 0
    return out[: len(chunk)].copy()


def write_all(sink: VideoSink, frames: np.ndarray, pts: np.ndarray | None = None) -> str:
    sink.open(FrameSpec(frames.shape[1:]), {"rate": "25", "time_base": "1/12800"})
    for start in range(0, len(frames), 8):
        part = slice(start, start + 8)
        meta = {} if pts is None else {"pts": pts[part]}
        sink.write(frames[part], np.arange(len(frames))[part], meta)
    return sink.close(ok=True)


def pyav_times(path: Path) -> list[float]:
    with av.open(str(path)) as container:
        return [frame.time for frame in container.decode(video=0)]


def corrupt_copy(path: Path, out: Path, *, packets: tuple[int, ...] = (20, 21, 22)) -> Path:
    """``path`` remuxed with every byte but the first 16 of the given packets flipped.

    Damaging whole packets (not bytes at file offsets, which may land where the decoder
    conceals the damage without a flag) makes the decoder see broken frames every time.
    """
    with av.open(str(path)) as source, av.open(str(out), "w") as target:
        stream = target.add_stream_from_template(source.streams.video[0])
        for k, packet in enumerate(p for p in source.demux(video=0) if p.size):
            if k in packets:
                data = bytes(packet)
                damaged = av.Packet(data[:16] + bytes(b ^ 0xFF for b in data[16:]))
                damaged.pts, damaged.dts, damaged.time_base = (
                    packet.pts,
                    packet.dts,
                    packet.time_base,
                )
                damaged.is_keyframe = packet.is_keyframe
                packet = damaged
            packet.stream = stream
            target.mux(packet)
    return out


# --- VideoSource -------------------------------------------------------------------------


def test_fast_colour_path_matches_swscale_within_rounding(clip_path):
    path = clip_path("bigbuckbunny.mp4")
    ours = read_frames(VideoSource(path, stop=6, colour="fast")).astype(np.int16)
    with av.open(str(path)) as container:
        frames = [
            f.to_ndarray(format="rgb24")
            for _, f in zip(range(6), container.decode(video=0), strict=False)
        ]
    diff = np.abs(ours - np.stack(frames))
    assert diff.max() <= 6 and diff.mean() < 1.2  # same BT.601 matrix; rounding, chroma filter


@pytest.fixture(scope="module")
def bunny(clip_path) -> tuple[Path, tuple[np.ndarray, np.ndarray, list[bytes]]]:
    """The bigbuckbunny clip and a full read of it (ids, pts, crcs), done once."""
    path = clip_path("bigbuckbunny.mp4")
    return path, read_all(VideoSource(path), batch=32)


def test_bigbuckbunny_gives_132_frames_of_720p(bunny):
    path, (ids, pts, _) = bunny
    source = VideoSource(path)
    assert source.spec == FrameSpec((720, 1280, 3))
    assert source.length == 132
    assert source.info["fps"] == 25.0 and source.info["codec"] == "h264"
    assert ids.tolist() == list(range(132))
    np.testing.assert_allclose(pts, np.arange(132) / 25)


@pytest.mark.parametrize(("start", "stop"), [(5, 9), (70, 100), (100, None)])
def test_start_stop_match_a_full_read(bunny, start, stop):
    path, (ids, pts, crcs) = bunny
    part = VideoSource(path, start=start, stop=stop)
    assert part.length == len(ids[start:stop])
    ids2, pts2, crcs2 = read_all(part)
    assert ids2.tolist() == ids[start:stop].tolist()
    assert pts2.tolist() == pts[start:stop].tolist()
    assert crcs2 == crcs[start:stop]


def test_a_seek_whose_frames_break_the_promise_decodes_from_the_top(bunny, monkeypatch):
    path, (ids, _, crcs) = bunny
    real = frame_table.scan

    def shifted(container, stream, **options):  # every timestamp one tick late
        table = real(container, stream, **options)
        return dataclasses.replace(table, pts=table.pts + 1)

    monkeypatch.setattr(video_module, "scan", shifted)
    source = VideoSource(path, start=70, stop=80)
    ids2, _, crcs2 = read_all(source)
    assert ids2.tolist() == ids[70:80].tolist() and crcs2 == crcs[70:80]
    assert "decoded from the first frame" in source.notes()["seek"]
    monkeypatch.undo()
    trusted = VideoSource(path, start=70, stop=80)
    assert read_all(trusted)[2] == crcs[70:80]
    assert trusted.notes()["seek"].endswith("checked frame by frame")


def test_vfr_timestamps_are_pyav_times(scene_clip):
    path = scene_clip("goldeneye-vfr-drop3.mp4")
    assert probe(path)["vfr"] is True
    ids, pts, _ = read_all(VideoSource(path, pix_fmt="gray"))
    assert np.all(np.diff(pts) > 0)
    assert pts.tolist() == pyav_times(path)
    ids2, pts2, _ = read_all(VideoSource(path, pix_fmt="gray", start=100))
    assert ids2.tolist() == ids[100:].tolist() and pts2.tolist() == pts[100:].tolist()


def test_gray_and_rgba(synthetic_mp4):
    rgb = read_frames(VideoSource(synthetic_mp4))
    gray = read_frames(VideoSource(synthetic_mp4, pix_fmt="gray"))
    rgba = read_frames(VideoSource(synthetic_mp4, pix_fmt="rgba"))
    assert gray.shape == (40, 48, 64, 1) and rgba.shape == (40, 48, 64, 4)
    with av.open(str(synthetic_mp4)) as container:
        reference = np.stack([f.to_ndarray(format="gray") for f in container.decode(video=0)])
    np.testing.assert_array_equal(gray[..., 0], reference)
    np.testing.assert_array_equal(rgba[..., :3], rgb)
    assert (rgba[..., 3] == 255).all()


@pytest.mark.parametrize("threads", [False, 1, True])
def test_threads_setting_gives_the_same_frames(synthetic_mp4, threads):
    expected = read_all(VideoSource(synthetic_mp4))[2]
    assert read_all(VideoSource(synthetic_mp4, threads=threads))[2] == expected


def test_bad_inputs_raise_media_error(tmp_path, synthetic_mp4):
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n" * 100)
    truncated = tmp_path / "cut.mp4"
    truncated.write_bytes(synthetic_mp4.read_bytes()[: synthetic_mp4.stat().st_size // 2])
    for path, words in [
        (tmp_path / "missing.mp4", "no such video file"),
        (tmp_path, "is a folder"),
        (text, "cannot read"),
        (truncated, "truncated or damaged"),
    ]:
        with pytest.raises(MediaError, match=words) as caught:
            VideoSource(path)
        assert "\n" not in str(caught.value)


def test_truncated_stream_is_detected(tmp_path, make_frames, make_video):
    full = make_video(tmp_path / "full.mkv", make_frames(40), codec="ffv1")
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    with pytest.raises(MediaError, match="truncated"):
        read_all(VideoSource(cut))
    source = VideoSource(cut, on_corrupt="skip")
    ids, _, _ = read_all(source)
    assert 0 < len(ids) < 40


def test_audio_only_file_has_no_video_stream(tmp_path):
    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 800), np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 8000
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    with pytest.raises(MediaError, match="no video stream"):
        VideoSource(path)


def test_start_past_the_end_is_refused(synthetic_mp4):
    with pytest.raises(ValueError, match="past the last frame"):
        VideoSource(synthetic_mp4, start=40)


def test_corrupt_frame_fails_with_its_index_or_is_skipped(tmp_path, synthetic_mp4, make_video):
    noisy = make_video(
        tmp_path / "noisy.mp4",
        np.random.default_rng(0).integers(0, 256, (40, 48, 64, 3), dtype=np.uint8),
    )
    damaged = corrupt_copy(noisy, tmp_path / "damaged.mp4")
    # one decoding thread: with frame threads, which frame FFmpeg flags can vary run to run
    with pytest.raises(CorruptFrame) as caught:
        read_all(VideoSource(damaged, threads=False))
    assert isinstance(caught.value.frame, int) and 0 < caught.value.frame < 40
    assert f"frame {caught.value.frame}" in str(caught.value)
    source = VideoSource(damaged, on_corrupt="skip", threads=False)
    ids, _, _ = read_all(source)
    assert source.skipped[0] == caught.value.frame  # the first damaged frame, then any others
    assert sorted([*ids.tolist(), *source.skipped]) == list(range(40))


# --- VideoSink ---------------------------------------------------------------------------


def test_ffv1_round_trip_is_exact_and_keeps_vfr_pts(tmp_path, make_frames):
    frames = make_frames(20)
    pts = np.cumsum([0.0] + [0.04, 0.04, 0.12] * 6 + [0.04])
    output = write_all(VideoSink(tmp_path / "out.mkv", codec="ffv1"), frames, pts)
    assert output == str(tmp_path / "out.mkv")
    source = VideoSource(output)
    np.testing.assert_array_equal(read_frames(source), frames)
    np.testing.assert_allclose(read_all(VideoSource(output))[1], pts, atol=1e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mkv"]


def test_x264_qp0_yuv444_round_trip_is_near_lossless(tmp_path, make_frames):
    frames = make_frames(20)
    sink = VideoSink(tmp_path / "out.mp4", pix_fmt="yuv444p", options={"qp": "0"})
    back = read_frames(VideoSource(write_all(sink, frames))).astype(np.int16)
    assert np.abs(back - frames).max() <= 3  # only RGB <-> YUV rounding


def x264_settings(path: str | Path) -> dict[str, str]:
    """The options x264 wrote into the stream's SEI, e.g. ``{"sliced_threads": "0", ...}``."""
    head = Path(path).read_bytes()[:200_000]
    options = head.split(b" - options: ", 1)[1].split(b"\x00", 1)[0].decode()
    return dict(item.split("=", 1) for item in options.split() if "=" in item)


@pytest.mark.slow  # 14 s of x264 at 1080p
def test_x264_uses_frame_threads_and_keeps_every_frame_in_order(tmp_path, make_frames):
    # FFmpeg's own default (frame threads, as the ffmpeg command uses), not PyAV's slices
    # (x264 slices a frame of 192 rows or more); with B-frames and several frames in
    # flight, every frame still comes back, in order
    frames = make_frames(60, 192, 256)
    path = write_all(VideoSink(tmp_path / "out.mp4"), frames)
    settings = x264_settings(path)
    assert settings["sliced_threads"] == "0" and "slices" not in settings
    assert int(settings["bframes"]) > 0
    ids, pts, _ = read_all(VideoSource(path))
    np.testing.assert_array_equal(ids, np.arange(60))
    assert np.all(np.diff(pts) > 0)
    back = read_frames(VideoSource(path)).astype(np.float32)
    errors = ((back[:, None] - frames[None].astype(np.float32)) ** 2).mean(axis=(2, 3, 4))
    np.testing.assert_array_equal(errors.argmin(axis=1), np.arange(60))  # each is itself


@pytest.mark.parametrize("planar", [False, True], ids=["rgb24", "yuv420p"])
def test_x264_is_handed_the_slot_and_a_reused_slot_changes_nothing(
    tmp_path, make_frames, monkeypatch, planar
):
    """libx264 gets a view of the batch, not a copy: it must be done with each frame when
    ``write`` returns, since the engine refills the same slot with the next batch."""
    frames = make_frames(48, 192, 256)
    if planar:
        frames = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2YUV_I420) for f in frames])

    def encode(name: str) -> np.ndarray:
        sink = VideoSink(tmp_path / name, input_pix_fmt="yuv420p" if planar else None)
        sink.open(FrameSpec(frames.shape[1:]), {"rate": "25"})
        slot = np.empty_like(frames[:8])
        for start in range(0, len(frames), 8):
            slot[:] = frames[start : start + 8]  # one slot, refilled as the engine does
            sink.write(slot, np.arange(start, start + 8), {})
        slot[:] = 0  # the next run's batch lands in the slot
        return read_frames(VideoSource(sink.close(ok=True)))

    viewed = encode("view.mp4")
    monkeypatch.setattr(video_sink_module, "_COPIES_INPUT", frozenset())
    np.testing.assert_array_equal(viewed, encode("copied.mp4"))


def test_x264_thread_options_still_win(tmp_path, make_frames):
    sink = VideoSink(tmp_path / "out.mp4", options={"thread_type": "slice", "threads": "2"})
    settings = x264_settings(write_all(sink, make_frames(10, 192, 256)))
    assert settings["sliced_threads"] == "1" and settings["threads"] == "2"


def test_constant_fps_without_pts(tmp_path, make_frames):
    sink = VideoSink(tmp_path / "out.mp4", fps="30000/1001")
    path = write_all(sink, make_frames(10))
    _, pts, _ = read_all(VideoSource(path))
    np.testing.assert_allclose(pts, np.arange(10) * 1001 / 30000, atol=1e-4)
    assert probe(path)["rate"] == "30000/1001"


@pytest.mark.parametrize(
    ("codec", "name"),
    [
        ("libx264", "a.mp4"),
        ("libx265", "b.mp4"),
        ("ffv1", "c.mkv"),
        ("libvpx-vp9", "d.webm"),
        ("mpeg4", "e.mp4"),
    ],
)
def test_every_codec_writes_a_readable_file(tmp_path, codec, name, make_frames):
    if codec not in av.codecs_available:
        pytest.skip(f"{codec} is not in this FFmpeg build")
    path = write_all(VideoSink(tmp_path / name, codec=codec), make_frames(10))
    assert probe(path)["codec"] in {"h264", "hevc", "ffv1", "vp9", "mpeg4"}
    assert read_frames(VideoSource(path)).shape == (10, 48, 64, 3)


def test_gray_and_rgba_frames_are_written(tmp_path, make_frames):
    gray = make_frames(5)[..., :1]
    path = write_all(VideoSink(tmp_path / "g.mkv", codec="ffv1"), gray)
    np.testing.assert_array_equal(read_frames(VideoSource(path, pix_fmt="gray")), gray)
    rgba = np.concatenate([make_frames(5), np.full((5, 48, 64, 1), 255, np.uint8)], axis=3)
    path = write_all(VideoSink(tmp_path / "a.mkv", codec="ffv1"), rgba)
    np.testing.assert_array_equal(read_frames(VideoSource(path, pix_fmt="rgba")), rgba)


def test_bad_sink_arguments_fail_before_any_work(tmp_path, make_frames):
    with pytest.raises(ValueError, match="libx264"):
        VideoSink(tmp_path / "x.mp4", codec="h266")
    with pytest.raises(ValueError, match="crf"):
        VideoSink(tmp_path / "x.mkv", codec="ffv1", crf=10)
    with pytest.raises(ValueError, match="preset"):
        VideoSink(tmp_path / "x.webm", codec="libvpx-vp9", preset="fast")
    with pytest.raises(ValueError, match="pix_fmt"):
        VideoSink(tmp_path / "x.mp4", codec="mpeg4", pix_fmt="yuv444p")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        VideoSink(tmp_path / "nowhere" / "x.mp4")
    (tmp_path / "there.mp4").write_bytes(b"keep me")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        VideoSink(tmp_path / "there.mp4")
    write_all(VideoSink(tmp_path / "there.mp4", overwrite=True), make_frames(3))
    assert (tmp_path / "there.mp4").read_bytes() != b"keep me"


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can write into. Root ignores file modes but not a read-only mount,
    so as root it is a tmpfs mounted read-only; otherwise a folder of mode 0o500. Skips only
    when neither can be set up."""
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)  # so that pytest can remove tmp_path
        return
    if shutil.which("mount") is None:
        pytest.skip("running as root without a mount command: no read-only folder to test")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs as root: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_unwritable_folder_fails_early(read_only_folder: Path):
    with pytest.raises(OSError):  # the set-up is real: nothing can be created there
        (read_only_folder / "probe").write_bytes(b"x")
    with pytest.raises(PermissionError, match="not writable"):
        VideoSink(read_only_folder / "x.mp4")
    assert list(read_only_folder.iterdir()) == []


def test_odd_size_yuv420p_is_refused_and_yuv444p_works(tmp_path, make_frames):
    odd = make_frames(4, height=47, width=63)
    sink = VideoSink(tmp_path / "odd.mp4")
    with pytest.raises(ValueError, match="even width and height"):
        sink.open(FrameSpec(odd.shape[1:]), {})
    assert list(tmp_path.iterdir()) == []
    path = write_all(VideoSink(tmp_path / "odd.mp4", pix_fmt="yuv444p"), odd)
    assert VideoSource(path).spec.shape == (47, 63, 3)


def test_failure_leaves_nothing_behind(tmp_path, make_frames):
    sink = VideoSink(tmp_path / "out.mkv", codec="ffv1")
    sink.open(FrameSpec((48, 64, 3)), {})
    sink.write(make_frames(4), np.arange(4), {})
    assert sink.temp.exists()
    with pytest.raises(FrameError, match="64x48, 4 channels, uint8"):
        sink.write(np.zeros((2, 48, 64, 4), np.uint8), np.arange(4, 6), {})
    assert sink.close(ok=False) is None
    assert list(tmp_path.iterdir()) == []


def test_empty_output_is_an_error_and_is_removed(tmp_path):
    sink = VideoSink(tmp_path / "out.mp4")
    sink.open(FrameSpec((48, 64, 3)), {})
    with pytest.raises(MediaError, match="no frames"):
        sink.close(ok=True)
    assert list(tmp_path.iterdir()) == []


# --- probe -------------------------------------------------------------------------------


def test_probe_describes_a_clip(clip_path):
    facts = probe(clip_path("bigbuckbunny.mp4"))
    assert facts["container"].startswith("mov,mp4")
    assert (facts["codec"], facts["width"], facts["height"]) == ("h264", 1280, 720)
    assert (facts["pix_fmt"], facts["fps"], facts["frames"]) == ("yuv420p", 25.0, 132)
    assert facts["time_base"] == "1/12800" and facts["duration"] == pytest.approx(5.28)
    assert facts["bit_rate"] > 0 and facts["vfr"] is False and facts["frames_estimated"] is False


def test_probe_of_a_non_video_is_a_media_error(tmp_path):
    path = tmp_path / "x.mkv"
    path.write_bytes(b"\x00" * 1000)
    with pytest.raises(MediaError):
        probe(path)
