import json

import pytest

from hyperframes import cli
from hyperframes.cli import bench


@pytest.fixture(autouse=True)
def wired(monkeypatch):
    """Register the command until cli/__init__ lists it."""
    if bench not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, bench))


MARKDOWN = """
Decode clip
| what | fps | ratio |
| --- | ---: | ---: |
| decode only | 700 | 1.00x |
| swscale | 450 | 0.64x |

| clip | size % raw |
|---|---|
| a | 12.5 |
"""

ENGINE = """invert  plain  300 fps

ratios
pipeline-1 / batch-loop (invert)                       0.95  (target >= 0.9)  held
pipeline-2 / pipeline-1 (invert)                       1.40
pipeline RSS 1500 / 300 frames                         1.20  (target <= 1.05)  NOT HELD
"""


def test_ratio_rows_of_markdown_tables():
    assert bench.ratio_rows(MARKDOWN) == [
        {"what": "decode only", "ratio": 1.0},
        {"what": "swscale", "ratio": 0.64},
    ]


def test_ratio_rows_of_a_ratios_section():
    rows = bench.ratio_rows(ENGINE)
    assert rows[0] == {
        "what": "pipeline-1 / batch-loop (invert)",
        "ratio": 0.95,
        "target": ">= 0.9",
        "held": True,
    }
    assert rows[1] == {"what": "pipeline-2 / pipeline-1 (invert)", "ratio": 1.4}
    assert rows[2]["held"] is False


def test_bench_runs_scripts_and_skips_what_needs_extras(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "engine.py").write_text(f"print({ENGINE!r})\n")
    monkeypatch.setattr(
        bench,
        "BENCHMARKS",
        (
            bench.Benchmark("engine.py", ()),
            bench.Benchmark("video_parts.py", (), needs=("surely_not_installed_here",)),
            bench.Benchmark("gone.py", ()),
        ),
    )
    assert cli.main(["bench", "--dir", str(folder), "--json"]) == 3  # a target not held
    data = json.loads(capsys.readouterr().out)
    by_name = {b["name"]: b for b in data["benchmarks"]}
    assert by_name["engine"]["status"] == "ok"
    assert len(by_name["engine"]["ratios"]) == 3
    assert by_name["video_parts"]["status"] == "skipped"
    assert "surely_not_installed_here" in by_name["video_parts"]["detail"]
    assert by_name["gone"]["status"] == "skipped"
    assert cli.main(["bench", "--dir", str(folder)]) == 3
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("1 target(s) not held at these small sizes") and "engine: " in last


def test_failing_benchmark_exit_1(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "engine.py").write_text("raise SystemExit('no clip here')\n")
    monkeypatch.setattr(bench, "BENCHMARKS", (bench.Benchmark("engine.py", ()),))
    assert cli.main(["bench", "--dir", str(folder)]) == 1
    assert "engine: failed" in capsys.readouterr().out


def test_unknown_benchmark_and_missing_folder(tmp_path, capsys):
    assert cli.main(["bench", "--dir", str(tmp_path / "none")]) == 1
    assert "no benchmarks folder" in capsys.readouterr().err
    assert cli.main(["bench", "--only", "nope"]) == 1
    assert "unknown benchmark" in capsys.readouterr().err
