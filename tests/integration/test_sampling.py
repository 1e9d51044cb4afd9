"""Sampling at decode (issue 51): ``fps=``, ``at=``, ``num_frames=``, ``step=`` and
``keyframes=`` give exactly the frames a plain PyAV pass over every frame picks (the last
frame stamped at or before each time), with their indices, times and pixels, on constant
and variable frame rates, B-frames, open GOPs and an MPEG-TS whose timestamps restart;
and they decode less than every frame."""

from __future__ import annotations

import contextlib
import random
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.io.sampling import Sampling


class Reference:
    """Every frame of a video by a plain PyAV decode: times (exact) and RGB pixels."""

    def __init__(self, path: Path) -> None:
        self.times: list[Fraction] = []
        self.frames: list[np.ndarray] = []
        self.keys: list[int] = []
        with av.open(str(path)) as container:
            for k, frame in enumerate(container.decode(video=0)):
                self.times.append(frame.pts * frame.time_base)
                self.frames.append(frame.to_ndarray(format="rgb24"))
                if frame.key_frame:
                    self.keys.append(k)
        gap = self.times[-1] - self.times[-2]
        self.end = self.times[-1] + gap

    def played_at(self, t: Fraction) -> int:
        return max(k for k, time in enumerate(self.times) if time <= t)

    def at_rate(self, fps: Fraction) -> list[int]:
        first, step = self.times[0], 1 / fps
        count = -(-(self.end - first) // step)
        return [self.played_at(first + k * step) for k in range(int(count))]


def read(source: hf.VideoSource) -> tuple[list[int], list[int], list[float], list[np.ndarray]]:
    """A source's samples, frame indices, times and frames, through a pipeline."""
    ids: list[int] = []
    numbers: list[int] = []
    times: list[float] = []
    frames: list[np.ndarray] = []
    for index, batch, meta in hf.Pipeline.from_source(source, batch_size=4).iter_batches(meta=True):
        ids += index.tolist()
        numbers += meta.get("input_frame", index).tolist()
        times += meta["pts"].tolist()
        frames += [f.copy() for f in batch]
    return ids, numbers, times, frames


def encode(src: Path, out: Path, **options: str) -> Path:
    """``src`` as H.264 at 25 fps with the x264 ``options`` given."""
    with av.open(str(src)) as source, av.open(str(out), "w") as dst:
        stream = dst.add_stream("libx264", rate=25)
        first = next(source.decode(video=0))
        stream.width, stream.height, stream.pix_fmt = first.width, first.height, "yuv420p"
        stream.options = {"preset": "veryfast", **options}
        source.seek(0)
        for k, frame in enumerate(source.decode(video=0)):
            frame.pts, frame.time_base = k, Fraction(1, 25)
            dst.mux(stream.encode(frame))
        dst.mux(stream.encode(None))
    return out


@pytest.fixture(scope="module")
def clips(tmp_path_factory, clip_path, scene_clip) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sampling")
    bikes = clip_path("bikes.mp4")
    made = {
        "bikes": bikes,
        "b-frames": encode(bikes, folder / "bframes.mp4", g="40", bf="3"),
        "open-gop": encode(bikes, folder / "opengop.mp4", g="30", bf="3", x264opts="open-gop=1"),
    }
    with contextlib.suppress(pytest.skip.Exception):
        made["vfr"] = scene_clip("goldeneye-vfr-drop3.mp4")
    if shutil.which("ffmpeg"):  # two MPEG-TS files joined: the timestamps restart
        part = folder / "part.ts"
        subprocess.run(["ffmpeg", "-v", "error", "-i", str(made["b-frames"]), "-t", "4",
                        "-c", "copy", str(part)], check=True)  # fmt: skip
        joined = folder / "joined.ts"
        joined.write_bytes(part.read_bytes() * 2)
        made["ts-restart"] = joined
    return made


NAMES = ["bikes", "b-frames", "open-gop", "vfr", "ts-restart"]


def clip_of(clips: dict[str, Path], name: str) -> Path:
    if name not in clips:
        pytest.skip(f"{name} is not available here")
    return clips[name]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fps", ["3", "0.7", "60"])
def test_fps_picks_the_frame_played_at_each_instant(clips, name: str, fps: str) -> None:
    path = clip_of(clips, name)
    ref = Reference(path)
    expected = ref.at_rate(Fraction(fps))
    ids, numbers, times, frames = read(hf.VideoSource(path, fps=fps, colour="ffmpeg"))
    assert numbers == expected
    assert ids == list(range(len(expected)))  # samples are counted; repeats allowed
    assert times == pytest.approx([float(ref.times[n]) for n in expected])
    assert all(np.array_equal(a, ref.frames[n]) for a, n in zip(frames, expected, strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_at_gives_the_frames_played_at_the_times_in_the_order_asked(clips, name: str) -> None:
    path = clip_of(clips, name)
    ref = Reference(path)
    rng = random.Random(51)
    span = float(ref.end - ref.times[0])
    asked = [round(float(ref.times[0]) + rng.uniform(0, span * 0.999), 3) for _ in range(25)]
    asked += [asked[3], asked[3], float(ref.times[7])]  # repeats, and a frame's own time
    expected = [ref.played_at(Fraction(repr(t))) for t in asked]
    ids, numbers, _, frames = read(hf.VideoSource(path, at=asked, colour="ffmpeg"))
    assert numbers == expected and ids == list(range(len(asked)))
    assert all(np.array_equal(a, ref.frames[n]) for a, n in zip(frames, expected, strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_num_frames_every_and_keyframes_give_a_full_decodes_frames(clips, name: str) -> None:
    path = clip_of(clips, name)
    ref = Reference(path)
    count = len(ref.times)
    spread = [int(np.floor(v + 0.5)) for v in np.linspace(10, count - 6, 7)]
    cases = [({"num_frames": 7, "start": 10, "stop": count - 5}, spread),
             ({"step": 9, "start": 3}, list(range(3, count, 9)))]  # fmt: skip
    if name != "ts-restart":  # (key frames need the timestamps to number the frames)
        cases.append(({"keyframes": True}, ref.keys))
    for options, expected in cases:
        ids, numbers, _, frames = read(hf.VideoSource(path, colour="ffmpeg", **options))
        assert ids == numbers == expected, options
        assert all(np.array_equal(a, ref.frames[n]) for a, n in zip(frames, expected, strict=True))


def test_fewer_frames_than_asked_are_said(clips) -> None:
    source = hf.VideoSource(clips["bikes"], num_frames=100, start=0, stop=30)
    ids, _, _, _ = read(source)
    assert ids == list(range(30))
    assert "30 of the 100" in source.notes()["fewer"]


def test_a_sparse_read_decodes_less_and_says_how_much(clips) -> None:
    source = hf.VideoSource(clips["b-frames"], fps=1)
    read(source)
    notes = source.notes()
    assert notes["kept"] == 10 and notes["sampling"] == "1 a second"
    assert notes["decoded"] < 0.75 * 250  # frames nothing refers to, and GOP tails, skipped


def test_times_outside_and_bad_choices_are_refused_in_one_line(clips) -> None:
    path = clips["bikes"]
    with pytest.raises(ValueError, match=r"time 11s is outside the video's frames, played "
                       r"from 0.000s to 10.000s; give times"):  # fmt: skip
        hf.VideoSource(path, at=[1, 11])
    with pytest.raises(ValueError, match="fps and at each choose the frames; pass one"):
        hf.VideoSource(path, fps=1, at=[1])
    with pytest.raises(ValueError, match="fps must be a positive number"):
        hf.VideoSource(path, fps=0)
    with pytest.raises(ValueError, match="drop start and stop"):
        hf.VideoSource(path, at=[1], start=5)
    with pytest.raises(ValueError, match="num_frames must be 1 or more"):
        hf.VideoSource(path, num_frames=0)


def test_a_time_written_as_a_decimal_names_the_frame_stamped_there() -> None:
    from hyperframes.io.sampling import Timeline

    timeline = Timeline(np.arange(0, 250 * 512, 512), Fraction(1, 12800))  # 25 fps
    asked = [1.2, "1.2", "0:01.2", np.float64(1.2), np.float32(1.2)]
    assert Sampling.of(at=asked).pick(timeline).tolist() == [30] * 5
    assert Sampling.of(fps=Fraction(25)).pick(timeline, 10, 20).tolist() == list(range(10, 20))


def test_resuming_a_sampled_read_gives_the_rest(clips) -> None:
    path = clips["b-frames"]
    whole = read(hf.VideoSource(path, at=[5.0, 1.0, 1.0, 7.5, 0.2]))
    later = hf.VideoSource(path, at=[5.0, 1.0, 1.0, 7.5, 0.2])
    later.resume_from(2)
    rest = read(later)
    assert rest[0] == [2, 3, 4] and rest[1] == whole[1][2:]
    by_index = hf.VideoSource(path, num_frames=6)
    by_index.resume_from(100)
    assert read(by_index)[1] == [n for n in read(hf.VideoSource(path, num_frames=6))[1]
                                 if n >= 100]  # fmt: skip


def decoder_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name.startswith("hf-decode")]


def test_the_decoders_threads_end_with_the_read_also_when_left_early(clips) -> None:
    for leave in ("break", "error", "end"):
        source = hf.VideoSource(clips["b-frames"], fps=5, workers=2)
        with pytest.raises(RuntimeError) if leave == "error" else contextlib.nullcontext():
            for _, batch in hf.Pipeline.from_source(source, batch_size=2).iter_batches():
                assert batch.shape[0] <= 2
                if leave == "break":
                    break
                if leave == "error":
                    raise RuntimeError("the user's loop failed")
        assert decoder_threads() == [], leave


def test_a_frame_left_out_as_corrupt_keeps_the_others(clips, tmp_path) -> None:
    """A damaged packet in a sampled read: skipped (and listed) or failing with its index,
    on the packets' path and on the path for timestamps that cannot number the frames."""
    for name in ("b-frames", "ts-restart"):
        path = clip_of(clips, name)
        data = bytearray(path.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 4000] = bytes(4000)  # a run of zeros mid-file
        damaged = tmp_path / f"damaged{path.suffix}"
        damaged.write_bytes(bytes(data))
        source = hf.VideoSource(damaged, fps=5, on_corrupt="skip")
        ids, numbers, _, _ = read(source)
        assert len(ids) + len(source.skipped) >= 0.9 * (source.length or 0)
        assert numbers == sorted(numbers)
