"""``--executor``, ``--ray-address`` and ``--chunks`` end to end: the frames every way of
running gives equal the threads executor's, a chunked run resumes after its driver is
killed, and each way of failing says what went wrong.

Ray runs on the session's local two-node cluster (loopback only; see ``ray_cluster``).
Render functions live in a module written into the test's folder, as a user's would.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes import Pipeline, VideoSource
from hyperframes.cli import main
from hyperframes.errors import HyperframesError
from hyperframes.identity import segment_ok

SCENE = """
import numpy as np
import threading
import time

LOCK = threading.Lock()


def frame(i):
    f = np.zeros((48, 64, 3), np.uint8)
    f[..., 0] = i % 256
    f[:, : i % 64, 1] = 200
    f[i % 48, :, 2] = 255
    return f


def slow(i):
    time.sleep(0.02)
    return frame(i)


def locked(i):
    with LOCK:
        return frame(i)


def bad_from_250(i):
    if i >= 250:
        raise ValueError(f"frame {i} cannot be drawn")
    return frame(i)
"""

_names = itertools.count()


@pytest.fixture
def scene(tmp_path, monkeypatch):
    """The name of a fresh render module in the working folder (a new name per test, so
    that no test sees another's module)."""
    name = f"scene_{os.getpid()}_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SCENE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def frames_of(path: Path) -> np.ndarray:
    return Pipeline.from_source(VideoSource(path)).collect()


def run_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def fails_with(capsys, *argv: str) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("hyperframes: error: ") and len(err.splitlines()) == 1, err
    return err


def refused(capsys, *argv: str) -> str:
    """The one line of a usage error: options that do not go together (exit code 2)."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hyperframes: error: ") and len(err.splitlines()) == 1, err
    return err


RAY_INFO = re.compile(r"\bINFO \S+:\d+ -- |\[[^]]* I \d+ \d+\]")
"""A line Ray logs at INFO: Python's ``... INFO worker.py:2038 -- ...``, C++'s
``[2026-... I 2042 2042] ...`` (also forwarded from a raylet: ``(raylet) [... I ...]``)."""


def ray_noise(stderr: str) -> list[str]:
    """The lines of ``stderr`` that a quiet command keeps off the terminal: Ray's INFO lines
    and its notice that a local Ray turned token authentication on."""
    return [line for line in stderr.splitlines()
            if RAY_INFO.search(line) or "Token authentication is enabled" in line]  # fmt: skip


def expected_render(count: int) -> np.ndarray:
    y = np.arange(count)
    frames = np.zeros((count, 48, 64, 3), np.uint8)
    frames[..., 0] = (y % 256)[:, None, None]
    for i in range(count):
        frames[i, :, : i % 64, 1] = 200
        frames[i, i % 48, :, 2] = 255
    return frames


def test_render_under_processes_equals_threads(scene, capsys):
    common = ["render", f"{scene}:frame", "--frames", "100", "--size", "64x48", "--codec", "ffv1"]
    run_json(capsys, *common, "threads.mkv")
    report = run_json(capsys, *common, "processes.mkv", "--executor", "processes")
    assert report["frames"] == 100
    np.testing.assert_array_equal(frames_of(Path("processes.mkv")), expected_render(100))
    np.testing.assert_array_equal(frames_of(Path("threads.mkv")), expected_render(100))


def test_pack_and_analyze_under_processes_equal_threads(synthetic_mp4, tmp_path, capsys):
    from hyperframes import FrameStore

    stores, found = {}, {}
    for executor in ("threads", "processes"):
        store = tmp_path / f"{executor}.hfs"
        run_json(capsys, "pack", str(synthetic_mp4), str(store), "--executor", executor)
        with FrameStore(store) as opened:
            stores[executor] = np.stack([opened[i] for i in range(len(opened))])
        analysis = run_json(capsys, "analyze", str(synthetic_mp4), "--samples", "0",
                            "--executor", executor)  # fmt: skip
        found[executor] = (analysis["hyperframes"], analysis["boundaries"])
    np.testing.assert_array_equal(stores["processes"], stores["threads"])
    assert len(stores["threads"]) == 40 and found["processes"] == found["threads"]


def test_ray_address_needs_the_ray_executor(scene, capsys):
    err = refused(capsys, "render", f"{scene}:frame", "out.mkv", "--frames", "4",
                     "--size", "64x48", "--ray-address", "auto")  # fmt: skip
    assert "--executor ray" in err


def test_chunks_take_no_other_executor(scene, capsys):
    err = refused(capsys, "render", f"{scene}:frame", "out.mkv", "--frames", "4",
                  "--size", "64x48", "--chunks", "--executor", "processes")  # fmt: skip
    assert "--chunks runs segments as Ray tasks" in err and not Path("out.mkv").exists()


def test_chunks_take_no_workers(scene, synthetic_mp4, capsys):
    # a segment's Ray task runs on the CPU it reserves: --workers would be ignored
    for argv in (["render", f"{scene}:frame", "out.mkv", "--frames", "4", "--size", "64x48"],
                 ["transcode", str(synthetic_mp4), "out.mkv"]):  # fmt: skip
        err = refused(capsys, *argv, "--chunks", "2", "--workers", "3")
        assert err.endswith("so --workers does not apply; drop --workers"), err
        assert not Path("out.mkv").exists()


def test_without_ray_the_error_says_how_to_install_it(scene, tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from hyperframes.cli import main\n"
        f"sys.exit(main(['render', '{scene}:frame', 'out.mkv', '--frames', '4', "
        "'--size', '64x48', '--executor', 'ray']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert "pip install 'hyperframes-engine[ray]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# -- on the Ray cluster ---------------------------------------------------------------------

ray_only = pytest.mark.ray


@ray_only
def test_render_under_ray_equals_threads(ray_cluster, scene, capsys):
    common = ["render", f"{scene}:frame", "--frames", "100", "--size", "64x48", "--codec", "ffv1"]
    report = run_json(capsys, *common, "ray.mkv", "--executor", "ray")
    assert report["extra"]["executor"]["calls on shared memory"] > 0
    np.testing.assert_array_equal(frames_of(Path("ray.mkv")), expected_render(100))


@pytest.mark.slow  # starts its own Ray: 9 s
@ray_only
def test_a_local_ray_the_command_starts_keeps_its_info_off_the_terminal(ray_cluster, scene):
    """With no address the command starts a Ray of its own, as its help says, and does not
    join the session's cluster (which ``ray.init()`` alone would, through the address file
    the cluster wrote); Ray's INFO lines stay off the terminal."""
    import ray

    argv = [sys.executable, "-m", "hyperframes", "render", f"{scene}:frame", "out.mkv",
            "--frames", "8", "--size", "64x48", "--codec", "ffv1", "--executor", "ray",
            "--json"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    jobs = len(ray._private.state.jobs())
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(ray._private.state.jobs()) == jobs  # no driver joined the session's cluster
    assert json.loads(done.stdout.strip().splitlines()[-1])["frames"] == 8
    assert ray_noise(done.stderr) == [], done.stderr


@ray_only
def test_render_chunks_equal_a_local_render(idle_cluster, scene, capsys):
    report = run_json(capsys, "render", f"{scene}:frame", "chunks.mkv", "--frames", "300",
                      "--size", "64x48", "--codec", "ffv1", "--chunks", "3",
                      "--report", "run.json", "--memory", "64MiB")  # fmt: skip
    assert json.loads(Path("run.json").read_text())["extra"] == report["extra"]
    assert report["memory_budget"] == 64 << 20  # --memory is each segment's budget
    chunks = report["extra"]["chunks"]
    assert (report["frames"], chunks["segments"], chunks["reused"]) == (300, 3, 0)
    assert chunks["nodes"] == 2 and chunks["cpus_per_segment"] == 1
    assert not Path(".chunks.mkv.segments").exists()
    got = frames_of(Path("chunks.mkv"))
    np.testing.assert_array_equal(got, expected_render(300))
    with av.open("chunks.mkv") as container:  # one stream, timestamps in order
        pts = [f.pts for f in container.decode(video=0)]
    assert pts == sorted(pts) and len(set(pts)) == 300


@ray_only
def test_progress_follows_segments(ray_cluster, scene, tmp_path):
    import ray

    from hyperframes.chunked import render_chunked

    module = __import__(scene)
    ray.cloudpickle.register_pickle_by_value(module)
    seen = []
    render_chunked(module.frame, tmp_path / "out.mkv", count=300, size=(64, 48), segments=3,
                   codec="ffv1", progress=seen.append)  # fmt: skip
    assert [p.note for p in seen] == ["1/3 segments", "2/3 segments", "3/3 segments"]
    assert [p.frames for p in seen] == [100, 200, 300] and {p.total for p in seen} == {300}


@ray_only
def test_transcode_chunks_equal_a_local_transcode(ray_cluster, clip_path, tmp_path, capsys):
    bikes = str(clip_path("bikes.mp4"))  # 250 frames with several hard cuts
    common = ["transcode", bikes, "--codec", "ffv1", "--size", "320x136"]
    run_json(capsys, *common, str(tmp_path / "local.mkv"))
    report = run_json(capsys, *common, str(tmp_path / "chunks.mkv"), "--chunks")
    assert report["frames"] == 250 and report["extra"]["chunks"]["segments"] >= 1
    np.testing.assert_array_equal(
        frames_of(tmp_path / "chunks.mkv"), frames_of(tmp_path / "local.mkv")
    )


@ray_only
def test_an_unreachable_cluster_is_named_in_seconds(scene, capsys, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh process
    started = time.monotonic()
    err = fails_with(capsys, "render", f"{scene}:frame", "out.mkv", "--frames", "4", "--size",
                     "64x48", "--executor", "ray", "--ray-address", "127.0.0.1:9")  # fmt: skip
    assert time.monotonic() - started < 30
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in err and "ray start --head" in err


@ray_only
def test_a_function_that_cannot_be_shipped_is_named(ray_cluster, scene, capsys):
    for extra in (["--executor", "ray"], ["--chunks", "2"]):
        err = fails_with(capsys, "render", f"{scene}:locked", "out.mkv", "--frames", "8",
                         "--size", "64x48", *extra)  # fmt: skip
        assert "cannot be sent to Ray workers" in err and "lock" in err
        assert not Path("out.mkv").exists()


@ray_only
def test_a_failed_segment_is_named_and_the_rerun_resumes(ray_cluster, scene, capsys):
    argv = ["render", f"{scene}:bad_from_250", "out.mkv", "--frames", "300", "--size",
            "64x48", "--codec", "ffv1", "--chunks", "3"]  # fmt: skip
    err = fails_with(capsys, *argv)
    assert "segment 2 (frames 200-299) failed: frame 250 cannot be drawn" in err
    assert "rerun the same command to do only the missing ones" in err and "1 of 3" in err
    assert not Path("out.mkv").exists()
    assert len(list(Path(".out.mkv.segments").glob("segment-*.mkv"))) == 2


@ray_only
@pytest.mark.slow  # 12 s: a kill trial, the slow run's
def test_a_killed_driver_leaves_finished_segments_and_the_rerun_does_only_the_rest(
    ray_cluster, scene, tmp_path
):
    argv = [sys.executable, "-m", "hyperframes", "render", f"{scene}:slow", "out.mkv",
            "--frames", "600", "--size", "64x48", "--codec", "ffv1", "--chunks", "6",
            "--ray-address", ray_cluster.address, "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    driver = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    folder = tmp_path / ".out.mkv.segments"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(folder.glob("segment-*.mkv.json")):
        assert driver.poll() is None, driver.communicate()
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.communicate(timeout=60)
    # finished segments: those whose record their task wrote after the file (a task killed
    # between the two leaves a file that is not reused, and must not be)
    kept = sum(segment_ok(part) for part in folder.glob("segment-*.mkv"))
    assert 1 <= kept < 6 and not (tmp_path / "out.mkv").exists()

    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ray_noise(done.stderr) == [], done.stderr  # joining a cluster says nothing
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["extra"]["chunks"]["reused"] >= kept
    # the headline counts the frames this run made, not those it kept
    assert report["frames"] + report["extra"]["chunks"]["reused_frames"] == 600
    assert report["frames"] < 600
    np.testing.assert_array_equal(frames_of(tmp_path / "out.mkv"), expected_render(600))


@pytest.mark.slow  # a node killed and replaced: 10 s
@ray_only
def test_a_lost_node_mid_run_is_retried_elsewhere(ray_cluster, scene, tmp_path):
    """Ray reruns the tasks of a node that dies on the nodes left: the output is whole."""
    import ray

    from hyperframes.chunked import render_chunked

    module = __import__(scene)
    ray.cloudpickle.register_pickle_by_value(module)  # workers cannot import it
    worker = next(n for n in ray_cluster.list_all_nodes() if n is not ray_cluster.head_node)
    folder = tmp_path / "segments"
    try:
        result: dict = {}

        def go() -> None:
            try:
                result["report"] = render_chunked(
                    module.slow, tmp_path / "out.mkv", count=400, size=(64, 48),
                    segments=8, codec="ffv1", work_dir=folder,
                )  # fmt: skip
            except BaseException as exc:
                result["error"] = exc

        runner = threading.Thread(target=go)
        runner.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(folder.glob("segment-*.mkv")):
            time.sleep(0.05)
        ray_cluster.remove_node(worker)
        runner.join(300)
        assert not runner.is_alive()
        if "error" in result:  # Ray could not retry: the error names a segment to redo
            assert isinstance(result["error"], HyperframesError), result["error"]
            assert "rerun the same command" in str(result["error"])
            result["report"] = render_chunked(
                module.slow, tmp_path / "out.mkv", count=400, size=(64, 48),
                segments=8, codec="ffv1", work_dir=folder,
            )  # fmt: skip
        assert result["report"].frames == 400
        np.testing.assert_array_equal(frames_of(tmp_path / "out.mkv"), expected_render(400))
    finally:
        if len(ray_cluster.list_all_nodes()) < 2:
            ray_cluster.add_node(num_cpus=1)
            ray_cluster.wait_for_nodes()
