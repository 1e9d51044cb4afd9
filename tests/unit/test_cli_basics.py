import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import hyperframes
from hyperframes.cli import main


def test_public_api_matches_all():
    public = {
        n
        for n in dir(hyperframes)
        if not n.startswith("_") and not isinstance(getattr(hyperframes, n), types.ModuleType)
    }
    assert sorted(hyperframes.__all__) == hyperframes.__all__
    assert public <= set(hyperframes.__all__), public - set(hyperframes.__all__)
    missing = [n for n in hyperframes.__all__ if not hasattr(hyperframes, n)]
    assert missing == []
    # growing or shrinking the API is a decision, made here on purpose
    assert set(hyperframes.__all__) == set(API), set(hyperframes.__all__) ^ set(API)


API = (
    "Analysis", "Carry", "Chunk", "CorruptFrame", "FrameError", "Retry",
    "ReuseByHyperframe", "ReuseTarget", "Stream", "Strategy",
    "FrameSpec", "FrameStore", "FramesFailed", "HyperframesError", "ImageSequenceSink",
    "ImageSequenceSource", "MediaError", "Pipeline", "PoolExhausted", "Progress", "RunReport",
    "Sink", "Source", "StageError", "StageReport", "StoreCorrupt", "StoreError", "StoreSink",
    "VideoSink", "VideoSource", "__version__", "analyze",
    "ResultsSink",  # 0.2: the map job, a model's answers kept in a results file
    "render_chunked", "run_chunked",  # 0.3: public in the docs all along
    "Footprint",  # 0.3.1: what a sink of your own holds, for the run's plan
    "VideoFiles",  # 0.4.1: many videos as one source
    "VideoDataset",  # 0.6.0: a torch IterableDataset shared out among workers and ranks
    "Tensors",  # 0.5: batches as torch tensors for a loop of the user's
    "transcode",  # 0.14: what the transcode command does, with its streams carried
)  # fmt: skip
"""The API of 0.5. Batch, FramePool and TaskGraph left it in 0.3 (internals no public
call takes or returns) and resolved at the root with a warning until 0.4."""


def test_internals_that_left_the_api_are_gone_from_the_root():
    for name in ("Batch", "FramePool", "TaskGraph"):
        assert not hasattr(hyperframes, name)


def test_cycle_error_went_with_the_task_graph():
    assert not hasattr(hyperframes, "CycleError")
    assert not hasattr(hyperframes.errors, "CycleError")
    assert importlib.util.find_spec("hyperframes.engine.dag") is None


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert hyperframes.__version__ in capsys.readouterr().out


def test_demo_json_is_one_object(capsys):
    assert main(["demo", "--synthetic", "--frames", "70", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["frames"] == 70
    assert [s["name"] for s in data["stages"]][-1] == "sink"
    assert data["pool_high_water_bytes"] > 0


def test_demo_on_the_bundled_clip_json(tmp_path, capsys):
    out = tmp_path / "demo.mp4"
    assert main(["demo", "--loop", "1", "--output", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["transcode"]["frames"] == 132
    assert data["store"]["frames"] == 132 and data["store"]["frames_checked"] == 20
    assert out.exists() and (tmp_path / "demo.hfs").exists()


@pytest.mark.parametrize("bad", ["0", "100", "-1", "x"])
def test_bad_batch_size_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--batch-size", bad])
    assert info.value.code == 2
    assert "batch" in capsys.readouterr().err


def test_console_script_help():
    out = subprocess.run(
        [sys.executable, "-m", "hyperframes", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "demo" in out.stdout


def test_the_version_is_the_changelogs_newest():
    """``--version`` names the release the changelog's top entry describes."""
    from hyperframes._version import __version__

    changelog = (Path(__file__).parents[2] / "CHANGELOG.md").read_text()
    newest = next(line for line in changelog.splitlines() if line.startswith("## "))
    assert newest.split()[1] == __version__, newest
