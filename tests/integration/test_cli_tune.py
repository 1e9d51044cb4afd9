import json

import numpy as np
import pytest

from hyperframes import cli
from hyperframes.cli import tune
from hyperframes.cli.tune import Result, choose, effects


@pytest.fixture(autouse=True)
def wired(monkeypatch):
    """Register the command until cli/__init__ lists it."""
    if tune not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, tune))


def result(batch, workers, *fps, skipped=""):
    return Result(batch, workers, 1.0, list(fps), ["encode"] * len(fps), skipped)


def test_within_noise_the_smaller_setting_wins():
    results = [
        result(4, 1, 98, 100, 101),
        result(8, 1, 100, 102, 103),
        result(8, 2, 103, 104, 105),
        result(16, 2, 80, 81, 82),
    ]
    pick, used = choose(results, 0.05)
    assert (pick.batch_size, pick.workers) == (4, 1)
    assert used == 0.05


def test_a_clear_win_is_taken():
    results = [result(4, 1, 50, 51, 52), result(8, 1, 70, 71, 72), result(8, 2, 120, 121, 122)]
    pick, _ = choose(results, 0.05)
    assert (pick.batch_size, pick.workers) == (8, 2)
    eff = effects(results, pick)
    assert eff["workers"] == pytest.approx(121 / 71, rel=1e-3)
    assert eff["batch_size"] is None  # only one batch size at 2 workers


def test_noise_widens_the_tolerance_but_is_capped():
    results = [result(4, 1, 50, 100, 150), result(8, 1, 60, 115, 170)]
    _, used = choose(results, 0.05)
    assert used == tune.MAX_TOLERANCE


def test_choice_is_stable_under_small_changes():
    base = [result(4, 1, 100), result(8, 1, 103), result(16, 1, 102)]
    jitter = [result(4, 1, 102), result(8, 1, 100), result(16, 1, 104)]
    assert choose(base, 0.05)[0].batch_size == choose(jitter, 0.05)[0].batch_size == 4


def test_skipped_settings_never_win():
    with pytest.raises(ValueError, match="raise --memory"):
        choose([result(64, 1, skipped="memory")], 0.05)


def test_tune_json_on_a_real_clip(synthetic_mp4, capsys):
    clip = synthetic_mp4
    code = cli.main(
        [
            "tune",
            str(clip),
            "--stage",
            "invert",
            "--frames",
            "32",
            "--batch-sizes",
            "4,8",
            "--workers",
            "1,2",
            "--repeats",
            "2",
            "--tolerance",
            "0.05",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["results"]
    assert sorted((r["batch_size"], r["workers"]) for r in rows) == [(4, 1), (4, 2), (8, 1), (8, 2)]
    assert all(len(r["fps"]) == 2 and min(r["fps"]) > 0 for r in rows)
    # the rule, worked out here from the measured speeds alone
    medians = {(r["batch_size"], r["workers"]): float(np.median(r["fps"])) for r in rows}
    spreads = [(max(r["fps"]) - min(r["fps"])) / float(np.median(r["fps"])) for r in rows]
    used = min(0.2, max(0.05, float(np.median(spreads))))  # capped at 20 %
    best = max(medians.values())
    equal = [key for key, fps in medians.items() if fps >= best * (1 - used)]
    batch, workers = min(equal, key=lambda key: (key[1], key[0]))  # fewest workers, then batch
    rec = data["recommendation"]
    assert (rec["batch_size"], rec["workers"]) == (batch, workers), (medians, used)
    assert data["tolerance"] == pytest.approx(used, abs=1e-4)
    assert rec["fps"] == pytest.approx(medians[batch, workers], abs=0.01)
    assert rec["reason"].startswith("bound by ")
    along = {
        "batch_size": [fps for (b, w), fps in medians.items() if w == workers],
        "workers": [fps for (b, w), fps in medians.items() if b == batch],
    }
    for knob, speeds in along.items():
        assert data["effects"][knob] == pytest.approx(max(speeds) / min(speeds), abs=1e-3)
    assert "smallest" in data["rule"]


def test_memory_budget_skips_and_explains(synthetic_mp4, capsys):
    clip = synthetic_mp4
    code = cli.main(
        [
            "tune",
            str(clip),
            "--frames",
            "16",
            "--batch-sizes",
            "4,16",
            "--repeats",
            "1",
            "--codec",
            "none",
            "--memory",
            "200KiB",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "memory:" in out
    assert "--batch-size 4 --workers 1" in out


@pytest.mark.parametrize("argv", [["--batch-sizes", "3,8"], ["--workers", "0"]])
def test_bad_grid_is_a_usage_error(argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["tune", str(tmp_path / "in.mp4"), *argv])
    assert info.value.code == 2


def test_bad_stage_is_one_line_exit_1(synthetic_mp4, capsys):
    clip = synthetic_mp4
    assert cli.main(["tune", str(clip), "--stage", "sharpen"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown --stage 'sharpen'" in err
