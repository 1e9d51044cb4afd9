"""Stores of a video's native planes: bit-exact round trips for every layout the decoder
gives (clips made here with PyAV, coded with FFV1 so each layout reaches the decoder as
is), RGB on the way out as VideoSource converts, old (version 1) stores, pack/unpack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import lmdb
import numpy as np
import pytest

import hyperframes as hf
from hyperframes import Pipeline
from hyperframes.cli import main
from hyperframes.hyper import decode_frame, decode_group, encode_group, read_group_info
from hyperframes.io.layouts import NATIVE, Layout
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink, StoreWriter
from hyperframes.store import format as fmt

LAYOUTS = ["yuv420p", "yuvj420p", "yuv422p", "yuv444p", "gray", "yuv420p10le", "yuv444p10le"]


def make_clip(path: Path, pix_fmt: str, size: tuple[int, int] = (64, 48), count: int = 24) -> Path:
    """A clip in ``pix_fmt`` (FFV1, so the decoder gives exactly these planes; MJPEG for
    full-range ``yuvj420p``, which FFV1 does not take): a moving pattern with noise and a
    few repeated frames (copies and deltas in the store)."""
    rng = np.random.default_rng(7)
    w, h = size
    layout = Layout.of(pix_fmt, w, h)
    peak = 1023 if layout.dtype.itemsize == 2 else 255
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mjpeg" if pix_fmt.startswith("yuvj") else "ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
        for i in range(count):
            frame = np.empty(layout.shape, layout.dtype)
            for k, plane in enumerate(layout.planes(frame)):
                y, x = np.mgrid[: plane.shape[0], : plane.shape[1]]
                base = (x * 3 + y * 2 + (i // 3) * 5 + 40 * k) % (peak // 2)
                noise = rng.integers(0, 4, plane.shape)
                plane[...] = base + noise
            video = layout.to_frame(frame)
            video.pts = i
            out.mux(stream.encode(video))
        out.mux(stream.encode(None))
    return path


def decoded_planes(path: Path) -> list[list[np.ndarray]]:
    """The oracle: each decoded frame's planes straight from PyAV."""
    out = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            layout = Layout.of(frame.format.name, frame.width, frame.height)
            planes = []
            for plane, (h, w) in zip(frame.planes, layout.plane_shapes, strict=True):
                rows = np.frombuffer(memoryview(plane), layout.dtype).reshape(plane.height, -1)
                planes.append(rows[:h, :w].copy())
            out.append(planes)
    return out


def pack(clip: Path, store: Path, intra: str = "gradient") -> dict:
    source = VideoSource(clip, pix_fmt="native")
    sink = StoreSink(store, intra=intra)
    report = Pipeline.from_source(source, batch_size=8).group(max_len=12).to(sink).run()
    return report.output


@pytest.mark.parametrize("intra", ["gradient", "ffv1", "x264"])
@pytest.mark.parametrize("pix_fmt", LAYOUTS)
def test_every_layout_round_trips_bit_exact(tmp_path: Path, pix_fmt: str, intra: str) -> None:
    clip = make_clip(tmp_path / "in.mkv", pix_fmt)
    pack(clip, tmp_path / "s.hfs", intra)
    oracle = decoded_planes(clip)
    with FrameStore(tmp_path / "s.hfs", pix_fmt="native") as store:
        layout = store.header.layout
        assert layout is not None and layout.name == pix_fmt
        assert store.spec == layout.spec and len(store) == len(oracle)
        for i in (5, 0, 23, 11):  # random access, then a whole range
            got = layout.planes(np.ascontiguousarray(store[i]))
            assert all(np.array_equal(a, b) for a, b in zip(got, oracle[i], strict=True))
        for frame, want in zip(store[:], oracle, strict=True):
            got = layout.planes(np.ascontiguousarray(frame))
            assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        assert store.verify() == []
    # by default the same RGB VideoSource gives
    rgb = VideoSource(clip)
    want = np.empty((len(oracle), *rgb.spec.shape), np.uint8)
    rgb.read_into(want)
    with FrameStore(tmp_path / "s.hfs") as store:
        assert store.spec == rgb.spec
        assert np.array_equal(store[:], want)
        assert np.array_equal(store[7], want[7])


def test_yuv420p_store_gives_the_planes_videosource_gives(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "in.mkv", "yuv420p", size=(80, 60))
    pack(clip, tmp_path / "s.hfs")
    source = VideoSource(clip, pix_fmt="yuv420p")
    want = np.empty((24, *source.spec.shape), np.uint8)
    source.read_into(want)
    with FrameStore(tmp_path / "s.hfs", pix_fmt="yuv420p") as store:
        assert store.spec == source.spec
        assert np.array_equal(store[:], want)
    with pytest.raises(ValueError, match="pix_fmt must be one of"):
        FrameStore(tmp_path / "s.hfs", pix_fmt="yuv444p")


def test_odd_sized_420_planes_round_trip(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "in.mkv", "yuv420p", size=(65, 49), count=10)
    pack(clip, tmp_path / "s.hfs", "ffv1")
    oracle = decoded_planes(clip)
    with FrameStore(tmp_path / "s.hfs", pix_fmt="native") as store:
        layout = store.header.layout
        assert layout is not None and layout.plane_shapes == ((49, 65), (25, 33), (25, 33))
        for frame, want in zip(store[:], oracle, strict=True):
            got = layout.planes(np.ascontiguousarray(frame))
            assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_arrays_that_are_not_video_are_stored_as_before(tmp_path: Path) -> None:
    frames = np.random.default_rng(1).integers(0, 255, (6, 8, 10, 3), dtype=np.uint8)
    Pipeline.from_frames(frames).group().to(StoreSink(tmp_path / "a.hfs")).run()
    with FrameStore(tmp_path / "a.hfs") as store:
        assert store.header.pixels is None and store.header.version == fmt.VERSION
        assert np.array_equal(store[:], frames)
        assert np.array_equal(FrameStore(tmp_path / "a.hfs", pix_fmt="native")[:], frames)


def _rewrite_header(path: Path, header: dict) -> None:
    env = lmdb.open(str(path), subdir=True, max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(fmt.HEADER_KEY, fmt.dump_json(header))
    env.close()


def test_a_version_1_store_still_opens_and_resumes(tmp_path: Path) -> None:
    """A store as 0.1.0 wrote it (version 1: no ``pixels``; RGB groups, whose records this
    release writes the same way) opens, reads and resumes as version 1."""
    frames = np.random.default_rng(3).integers(0, 255, (8, 6, 5, 3), dtype=np.uint8)
    path = tmp_path / "old.hfs"
    with StoreWriter(path, hf.FrameSpec((6, 5, 3)), {"fps": 25.0}, workers=1) as writer:
        writer.write_group(frames[:4])
        writer.close(complete=False)
    old = fmt.StoreHeader(hf.FrameSpec((6, 5, 3)), {"fps": 25.0}, created_by="0.1.0", version=1)
    assert "pixels" not in old.to_json()
    _rewrite_header(path, old.to_json())
    with FrameStore(path) as store:
        assert store.header.version == 1 and store.header.pixels is None
        assert np.array_equal(store[:], frames[:4])
    with StoreWriter(path, hf.FrameSpec((6, 5, 3)), {"fps": 25.0}, resume=True) as writer:
        writer.write_group(frames[4:])
    with FrameStore(path) as store:
        assert store.header.version == 1 and np.array_equal(store[:], frames)


def test_a_newer_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    frames = np.zeros((2, 4, 4, 3), np.uint8)
    path = tmp_path / "new.hfs"
    with StoreWriter(path, hf.FrameSpec((4, 4, 3)), {}, workers=1) as writer:
        writer.write_group(frames)
    head = fmt.StoreHeader(hf.FrameSpec((4, 4, 3))).to_json() | {"version": 5}
    _rewrite_header(path, head)
    with pytest.raises(hf.StoreError, match=r"version 5 is not supported.*release that wrote"):
        FrameStore(path)


def test_planar_groups_decode_from_at_most_six_records() -> None:
    layout = Layout.of("yuv420p", 32, 16)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, layout.shape, dtype=np.uint8)
    frames = np.stack([base + (rng.random(layout.shape) < 0.01) for _ in range(60)])
    group = encode_group(frames, planes=layout.plane_shapes, pix_fmt="yuv420p")
    info = read_group_info(group.data)
    assert info.layout == "anchors" and max(info.frames_touched) <= 6
    assert info.frames_touched[30] == 1 and sorted(info.frames_touched)[-1] == 6
    assert np.array_equal(decode_group(group.data), frames)
    assert all(np.array_equal(decode_frame(group.data, i), frames[i]) for i in (0, 29, 59))


def test_planes_predict_only_within_their_plane() -> None:
    """Changing every sample of the U plane leaves the coded Y segments unchanged."""
    layout = Layout.of("yuv420p", 64, 32)
    frame = np.random.default_rng(0).integers(0, 255, (1, *layout.shape), dtype=np.uint8)
    other = frame.copy()
    layout.planes(other[0])[1][...] += 1
    a = encode_group(frame, planes=layout.plane_shapes)
    b = encode_group(other, planes=layout.plane_shapes)
    parts_a = json.loads(a.data[8 : 8 + int.from_bytes(a.data[4:8], "little")])["frames"][0][6]
    parts_b = json.loads(b.data[8 : 8 + int.from_bytes(b.data[4:8], "little")])["frames"][0][6]
    assert parts_a[0] == parts_b[0] and len(parts_a) == 3  # Y, U, V segments


def test_native_source_refuses_what_it_cannot_keep(tmp_path: Path) -> None:
    clip = tmp_path / "rgb.mkv"
    with av.open(str(clip), "w") as out:
        stream = out.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 16, 16, "bgr0"
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        out.mux(stream.encode(frame.reformat(format="bgr0")))
        out.mux(stream.encode(None))
    assert "bgr0" not in NATIVE
    with pytest.raises(ValueError, match="does not keep as planes"):
        VideoSource(clip, pix_fmt="native")


def test_pack_and_unpack_keep_the_planes(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "in.mkv", "yuv420p", size=(64, 48))
    cli = [sys.executable, "-m", "hyperframes"]
    store, out = tmp_path / "s.hfs", tmp_path / "out.mkv"
    subprocess.run([*cli, "pack", str(clip), str(store), "--json"], check=True, capture_output=True)
    subprocess.run([*cli, "unpack", str(store), str(out)], check=True, capture_output=True)
    with FrameStore(store) as opened:
        assert opened.header.pixels is not None and opened.header.pixels["layout"] == "yuv420p"
    want, got = decoded_planes(clip), decoded_planes(out)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    rgb = tmp_path / "rgb.hfs"
    subprocess.run([*cli, "pack", str(clip), str(rgb), "--pix-fmt", "rgb24"], check=True,
                   capture_output=True)  # fmt: skip
    with FrameStore(rgb) as opened, FrameStore(store) as planes:
        assert opened.header.pixels is None and opened.spec == planes.spec
        assert np.array_equal(opened[:], planes[:])


@pytest.mark.parametrize(
    ("pix_fmt", "size"),
    [(name, (64, 48)) for name in LAYOUTS if name != "yuv420p"] + [("yuv420p10le", (63, 47))],
)
def test_unpack_writes_every_layout_as_its_planes(
    tmp_path: Path, pix_fmt: str, size: tuple[int, int]
) -> None:
    """No RGB round trip for any layout (10-bit stays 10-bit), odd sizes too (FFV1), and
    full-range planes are written as their ``yuv`` twin tagged full range."""
    clip = make_clip(tmp_path / "in.mkv", pix_fmt, size=size, count=10)
    store, out = tmp_path / "s.hfs", tmp_path / "out.mkv"
    assert main(["pack", str(clip), str(store), "--json"]) == 0
    assert main(["unpack", str(store), str(out)]) == 0
    want, got = decoded_planes(clip), decoded_planes(out)
    assert len(got) == len(want) == 10
    for a, b in zip(got, want, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    with av.open(str(out)) as container:
        frame = next(container.decode(video=0))
    assert frame.format.name == pix_fmt.replace("yuvj", "yuv")
    if pix_fmt.startswith("yuvj"):
        assert frame.color_range == 2  # full range, as the source


def test_unpack_to_h264_keeps_the_chroma_layout(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "in.mkv", "yuv422p", count=6)
    store, out = tmp_path / "s.hfs", tmp_path / "out.mp4"
    assert main(["pack", str(clip), str(store)]) == 0
    assert main(["unpack", str(store), str(out), "--codec", "libx264"]) == 0
    with av.open(str(out)) as container:
        assert next(container.decode(video=0)).format.name == "yuv422p"  # not 4:2:0 via RGB


def test_an_intra_coding_that_does_not_apply_is_refused_not_ignored(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "in.mkv", "yuv420p")
    with pytest.raises(ValueError, match="intra='webp' codes RGB frames"):
        pack(clip, tmp_path / "planes.hfs", intra="webp")
    rgb = Pipeline.from_source(VideoSource(clip), batch_size=8)
    with pytest.raises(ValueError, match="intra='ffv1' codes a video's planes"):
        rgb.group().to(StoreSink(tmp_path / "rgb.hfs", intra="ffv1")).run()
    cli = [sys.executable, "-m", "hyperframes", "pack", str(clip)]
    done = subprocess.run([*cli, str(tmp_path / "w.hfs"), "--intra", "webp", "--json"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(done.stdout)["raw_bytes"] == 24 * 48 * 64 * 3  # WebP stores RGB
    done = subprocess.run([*cli, str(tmp_path / "n.hfs"), "--intra", "webp", "--pix-fmt",
                           "native"], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1 and "drop --pix-fmt native" in done.stderr


def test_info_gives_the_shape_a_read_gives_and_the_planes_kept(tmp_path: Path) -> None:
    from hyperframes.store import store_info

    clip = make_clip(tmp_path / "in.mkv", "yuv420p", size=(64, 48))
    pack(clip, tmp_path / "s.hfs")
    info = store_info(tmp_path / "s.hfs")
    assert info["shape"] == [48, 64, 3] and info["dtype"] == "uint8"
    assert info["stored_as"] == "yuv420p planes, [72, 64] uint8"


def test_no_frame_of_any_group_length_needs_more_than_six_records() -> None:
    from hyperframes.hyper.codec._planes import reference

    def records(i: int, b: int, n: int) -> int:
        count = 1
        while (i := reference(i, b, n)) >= 0:
            count += 1
        return count

    for n in range(1, 400):
        assert max(records(i, n // 2, n) for i in range(n)) <= 6, n
