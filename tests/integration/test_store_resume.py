"""Killed packs, resumed packs, readers beside a writer, and the store CLI."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hyperframes.cli import main
from hyperframes.cli import store as cli
from hyperframes.store import FrameStore
from hyperframes.store.resume import resume_point

CLI = """
import sys
from hyperframes.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *argv], capture_output=True, text=True, timeout=120
    )


def call(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 frames of 192x128 FFV1 (lossless, so a resumed decode is bit-identical)."""
    import av

    path = tmp_path_factory.mktemp("media") / "clip.mkv"
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:128, 0:192]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 192, 128, "bgr0"
        for i in range(200):
            frame = np.empty((128, 192, 3), np.uint8)
            frame[..., 0] = (x * 2 + i * (i // 20)) % 256
            frame[..., 1] = (y * 3 + i) % 256
            frame[..., 2] = rng.integers(0, 256, (128, 192), dtype=np.uint8) // 32
            out = av.VideoFrame.from_ndarray(frame, format="rgb24")
            out.pts = i
            container.mux(stream.encode(out))
        container.mux(stream.encode(None))
    return path


@pytest.fixture(scope="module")
def reference(video: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("ref") / "ref.hfs"
    assert call("pack", str(video), str(path), "--max-len", "8", "--batch-size", "8") == 0
    with FrameStore(path) as store:
        return path, store[:]


def _kill_mid_pack(args: list[str], store: Path, delay: float, total: int) -> tuple[int, float]:
    """SIGKILL a pack ``delay`` s after its first committed group; returns the frames
    committed and the delay that landed. When the pack finished first, it is tried again
    with a quarter of the delay, then with none, so that the kill always lands mid-pack
    (``0 < committed < total``)."""
    for attempt in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CLI, *args], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            while resume_point(store)[0] == 0 and child.poll() is None:
                time.sleep(0.002)  # another process's commits: only polling sees them
            time.sleep(delay)  # the random moment after the first commit
            child.send_signal(signal.SIGKILL)  # no-op once it has exited
            _, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stderr is not None:
                child.stderr.close()  # also when polling raised before communicate()
        assert child.returncode in (0, -signal.SIGKILL), err
        committed, _ = resume_point(store)
        if 0 < committed < total:
            return committed, delay
        shutil.rmtree(store, ignore_errors=True)
        delay = delay / 4 if attempt == 0 else 0.0
    pytest.fail("the pack finished before SIGKILL landed in 3 tries; give it a longer input")


def _kill_and_resume(
    video: Path, tmp: Path, delay: float, expected: np.ndarray
) -> tuple[int, float]:
    store = tmp / "killed.hfs"
    args = ["pack", str(video), str(store), "--max-len", "8", "--batch-size", "8", "--json"]
    committed, delay = _kill_mid_pack(args, store, delay, len(expected))
    with FrameStore(store) as partial:
        assert len(partial) == committed and not partial.complete
        assert partial.verify() == []
        assert np.array_equal(partial[:], expected[:committed])
    done = run_cli(*args, "--resume")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["frames"] == len(expected) and report["resumed_from"] == committed
    with FrameStore(store) as resumed:
        assert resumed.complete and resumed.verify() == []
        assert np.array_equal(resumed[:], expected)
    return committed, delay


def _trials(video: Path, tmp_path: Path, reference: tuple[Path, np.ndarray], seeds: range) -> None:
    _, expected = reference
    for seed in seeds:
        delay = np.random.default_rng(seed).uniform(0.0, 0.15)  # after the first commit
        folder = tmp_path / f"trial{seed}"
        folder.mkdir()
        committed, delay = _kill_and_resume(video, folder, delay, expected)
        print(f"trial {seed}: killed {delay:.3f} s after the first commit, {committed} of "
              f"{len(expected)} frames committed")  # fmt: skip


@pytest.mark.slow  # random kills of a pack: 5 s (test_interrupt kills packs by default)
def test_kill_then_resume_gives_identical_frames(
    video: Path, tmp_path: Path, reference: tuple[Path, np.ndarray]
) -> None:
    _trials(video, tmp_path, reference, range(3))


@pytest.mark.slow
def test_kill_then_resume_more_trials(
    video: Path, tmp_path: Path, reference: tuple[Path, np.ndarray]
) -> None:
    _trials(video, tmp_path, reference, range(3, 15))


WRITER = """
import sys, numpy as np
from hyperframes import FrameSpec
from hyperframes.store import StoreWriter
with StoreWriter(sys.argv[1], FrameSpec((16, 24, 3)), {"fps": 10.0}, workers=1) as writer:
    for g in range(6):
        frames = np.stack([np.full((16, 24, 3), 10 * g + j, np.uint8) for j in range(4)])
        writer.write_group(frames)
        writer.flush()
        print(writer.frames, flush=True)
        sys.stdin.readline()
"""


def test_reading_while_another_process_writes(tmp_path: Path) -> None:
    path = tmp_path / "live.hfs"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "4"
        with FrameStore(path) as store:
            assert len(store) == 4 and not store.complete
            for g in range(1, 6):
                child.stdin.write("\n")
                child.stdin.flush()
                assert int(child.stdout.readline()) == 4 * (g + 1)
                assert len(store) == 4 * g  # a snapshot until refresh
                assert store.refresh() == 4
                assert int(store[-1][0, 0, 0]) == 10 * g + 3
            assert store.verify() == []
        child.stdin.write("\n")
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    with FrameStore(path) as store:
        assert store.complete and len(store) == 24


def test_cli_unpack_frame_verify_and_info(
    reference: tuple[Path, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import cv2

    path, expected = reference
    assert cli.is_store(path) and cli.store_info(path)["frames"] == 200
    assert call("frame", str(path), "-1", str(tmp_path / "last.png")) == 0
    png = cv2.cvtColor(cv2.imread(str(tmp_path / "last.png")), cv2.COLOR_BGR2RGB)
    assert np.array_equal(png, expected[-1])
    assert call("unpack", str(path), str(tmp_path / "out.mkv")) == 0
    assert call("unpack", str(path), str(tmp_path / "images")) == 0
    assert len(list((tmp_path / "images").glob("*.png"))) == 200
    capsys.readouterr()
    assert call("verify", str(path), "--json") == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_cli_verify_names_damaged_frames(
    reference: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path = tmp_path / "copy.hfs"
    shutil.copytree(reference[0], path)
    with FrameStore(path) as store, store._record(3) as (held, _):
        record = bytes(held)
        first, stop = store.groups.span(3)
    data = bytearray((path / "data.mdb").read_bytes())
    at = data.find(record[-300:])
    data[at + 100] ^= 0x55
    (path / "data.mdb").write_bytes(bytes(data))
    done = run_cli("verify", str(path))
    assert done.returncode == 1
    assert f"{stop - first} of 200 frames are damaged: {first}, {first + 1}" in done.stderr
    assert done.stderr.count("\n") == 1
    missing = run_cli("verify", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "not a hyperframes store" in missing.stderr


def test_pack_json_report(video: Path, tmp_path: Path) -> None:
    done = run_cli("pack", str(video), str(tmp_path / "p.hfs"), "--psnr", "40", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    keys = {"frames", "hyperframes", "raw_bytes", "stored_bytes", "ratio", "fps", "psnr_min"}
    assert keys <= set(report)
    assert report["frames"] == 200 and report["psnr_min"] >= 40
    again = run_cli("pack", str(video), str(tmp_path / "p.hfs"))
    assert again.returncode == 1 and "exists" in again.stderr


def test_pack_intra_webp_from_the_cli(video: Path, tmp_path: Path, reference, capsys) -> None:
    path = tmp_path / "webp.hfs"
    args = ["pack", str(video), str(path), "--max-len", "8", "--intra", "webp", "--json"]
    assert call(*args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["frames"] == 200
    with FrameStore(path) as store:
        assert store.header.intra == "webp" and np.array_equal(store[:], reference[1])
    refused = run_cli("pack", str(video), str(path), "--max-len", "8", "--resume")
    assert refused.returncode != 0 and "--intra webp" in refused.stderr


@pytest.fixture(scope="module")
def yuv_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 frames of 160x96 yuv420p FFV1, moving: a store of its planes (the x264 mode)."""
    import av

    path = tmp_path_factory.mktemp("media") / "yuv.mkv"
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0:96, 0:160]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        for i in range(120):
            frame = np.empty((96, 160, 3), np.uint8)
            frame[..., 0] = (x * 2 + 3 * i) % 256
            frame[..., 1] = (y * 3 + i) % 256
            frame[..., 2] = rng.integers(0, 256, (96, 160), dtype=np.uint8) // 16
            out = av.VideoFrame.from_ndarray(frame, format="rgb24").reformat(format="yuv420p")
            out.pts = i
            container.mux(stream.encode(out))
        container.mux(stream.encode(None))
    return path


def test_pack_intra_x264_cuts_one_gop_per_group_and_keeps_the_planes(
    yuv_video: Path, tmp_path: Path, capsys
) -> None:
    from hyperframes.hyper import read_group_info

    plain, small = tmp_path / "gradient.hfs", tmp_path / "x264.hfs"
    assert call("pack", str(yuv_video), str(plain)) == 0
    assert call("pack", str(yuv_video), str(small), "--intra", "x264", "--gop", "8", "--json") == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    with FrameStore(plain, pix_fmt="native") as want, FrameStore(small, pix_fmt="native") as got:
        assert got.header.intra == "x264" and got.header.gop == 8
        assert cli.store_info(small)["gop"] == 8 and "gop" not in cli.store_info(plain)
        # cut by length only (a group's start is a keyframe), one GOP each
        assert got.header.grouping["threshold"] == 1.0
        assert got.header.grouping["max_len"] == 8
        assert report["stored_bytes"] < 0.8 * store_info_bytes(plain)
        for i in (77, 0, 119, 8, 63):  # random access from the nearest keyframe
            assert np.array_equal(got[i], want[i])
        assert np.array_equal(got[:], want[:]) and got.verify() == []
        with got._record(1) as (data, _):
            info = read_group_info(data)
        assert info.frames_touched == tuple(range(1, 9))  # from the keyframe on


def store_info_bytes(path: Path) -> int:
    from hyperframes.store import store_info

    return int(store_info(path)["stored_bytes"])


def test_a_gop_without_x264_and_a_bad_gop_are_refused(yuv_video: Path, tmp_path: Path) -> None:
    done = run_cli("pack", str(yuv_video), str(tmp_path / "a.hfs"), "--gop", "8")
    assert done.returncode == 1 and "--gop applies to --intra x264 only" in done.stderr
    assert not (tmp_path / "a.hfs").exists()
    done = run_cli("pack", str(yuv_video), str(tmp_path / "b.hfs"), "--intra", "x264",
                   "--pix-fmt", "rgb24")  # fmt: skip
    assert done.returncode == 1 and "--intra x264 codes a video's planes" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_kill_then_resume_an_x264_store(yuv_video: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole.hfs"
    args = ["--intra", "x264", "--gop", "4", "--max-len", "8", "--batch-size", "8"]
    assert call("pack", str(yuv_video), str(whole), *args) == 0
    with FrameStore(whole, pix_fmt="native") as store:
        expected = store[:]
    killed = tmp_path / "killed.hfs"
    committed, _ = _kill_mid_pack(["pack", str(yuv_video), str(killed), *args], killed, 0.02, 120)
    done = run_cli("pack", str(yuv_video), str(killed), *args, "--resume", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resumed_from"] == committed
    other = run_cli("pack", str(yuv_video), str(killed), "--intra", "x264", "--gop", "8",
                    "--max-len", "8", "--resume")  # fmt: skip
    assert other.returncode == 1 and "settings" in other.stderr, other.stderr
    with FrameStore(killed, pix_fmt="native") as store:
        assert store.complete and store.verify() == [] and np.array_equal(store[:], expected)


def test_a_store_written_before_surfaces_resumed_takes_the_version_its_new_groups_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partial 16-bit store of version 3 (as 0.8-0.16 wrote them) resumed by this
    release: its new groups may code against a surface, so it says version 4, which
    earlier releases refuse by its version, and every frame reads back."""
    from hyperframes import FrameSpec
    from hyperframes.hyper.codec import group_header
    from hyperframes.store import format as fmt

    rng = np.random.default_rng(13)
    y, x = np.mgrid[0:48, 0:64] / 512
    frames = np.stack([2048 + 600 * np.sin(14 * (x + 0.3 * y) - t / 40) + rng.normal(0, 4, x.shape)
                       for t in range(12)]).astype(np.uint16)  # fmt: skip
    path, spec = tmp_path / "s.hfs", FrameSpec((48, 64), np.uint16)
    with monkeypatch.context() as earlier:
        earlier.setattr(fmt, "version_for", lambda *_: fmt.ZIGZAG_VERSION)
        earlier.setattr(group_header, "surface_frames", lambda *_: False)
        writer = FrameStore.create(path, spec)
        writer.write_group(frames[:6])
        writer.close(complete=False)
    with FrameStore(path) as store:
        assert store.header.version == 3 and not store.complete
    writer = FrameStore.create(path, spec, resume=True)
    writer.write_group(frames[6:])
    writer.close()
    with FrameStore(path) as store:
        assert store.header.version == 4 and store.complete
        np.testing.assert_array_equal(np.stack(list(store)), frames)
        predictors = []
        for g in range(len(store.groups)):
            with store._record(g) as (_, header):
                predictors.append(header.predictor)
    assert predictors == ["none", "surface"]
