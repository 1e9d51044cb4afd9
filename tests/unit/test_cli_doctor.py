import json
from pathlib import Path

import pytest

from hyperframes import cli
from hyperframes.cli import doctor


@pytest.fixture(autouse=True)
def wired(monkeypatch):
    """Register the command (until cli/__init__ lists it) and skip the slow GPU probe."""
    if doctor not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, doctor))
    monkeypatch.setattr(doctor, "check_gpu", lambda: doctor.Check("gpu", "ok", "skipped"))


def test_json_is_one_object_with_a_line_per_check(capsys, tmp_path):
    assert cli.main(["doctor", "--json", "--output", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [c["name"] for c in data["checks"]]
    for name in (
        "pyav",
        "ffmpeg",
        "encoders",
        "decoders",
        "/dev/shm",
        "output",
        "cpu",
        "memory",
        "lmdb",
        "ray",
        "torch",
        "gpu",
    ):
        assert name in names
    assert {c["status"] for c in data["checks"]} <= {"ok", "warn", "fail"}
    assert data["ok"] is True


def test_human_lines(capsys):
    assert cli.main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in lines)
    assert any(line.split()[1] == "lmdb" for line in lines)


def test_a_failing_check_sets_the_exit_code(monkeypatch, capsys):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "check_lmdb", broken)
    assert cli.main(["doctor", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    lmdb = next(c for c in data["checks"] if c["name"] == "lmdb")
    assert lmdb["status"] == "fail" and "boom" in lmdb["detail"]
    assert data["ok"] is False


def test_missing_codecs_say_what_to_do(monkeypatch):
    monkeypatch.setattr(doctor, "_available", lambda names, mode: (["h264"], ["av1"]))
    check = doctor.check_decoders()
    assert check.status == "warn" and "av1" in check.detail and "reinstall" in check.fix
    monkeypatch.setattr(doctor, "_available", lambda names, mode: (["ffv1"], ["libx264"]))
    assert doctor.check_encoders().status == "fail"


def test_low_space_warns(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "_free", lambda path: 2**20)
    assert doctor.check_output(tmp_path).status == "warn"
    assert doctor.check_output(tmp_path / "not" / "yet").status == "warn"


def test_optional_packages_are_not_imported():
    check = doctor.check_optional("surely_not_a_module_here", "view", "hyperframes view")
    assert check.status == "warn" and "not installed: hyperframes view need" in check.detail
    assert "pip install 'hyperframes-engine[view]'" in check.detail


def test_every_extra_a_command_can_need_is_checked():
    names = {check.name for check in doctor.run_checks(Path("."))}
    assert {"ray", "torch", "starlette", "uvicorn", "matplotlib", "pyarrow"} <= names


def test_opencv_says_whether_the_classic_detectors_are_there(monkeypatch):
    import cv2

    line = doctor.check_opencv()
    has = hasattr(cv2, "CascadeClassifier") and hasattr(cv2, "HOGDescriptor")
    assert line.status == ("ok" if has else "warn"), line
    assert cv2.__version__ in line.detail
    if not has:
        assert "opencv-python-headless<5" in line.fix


def test_two_opencv_wheels_sharing_cv2_are_named(monkeypatch):
    """``opencv-python`` installed beside our ``opencv-python-headless`` writes the same
    ``cv2``: the doctor names both and says which to uninstall."""
    from importlib import metadata

    versions = {"opencv-python-headless": "4.14.0.94", "opencv-python": "4.13.0.90"}

    def version(name):
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(metadata, "version", version)
    line = doctor.check_opencv()
    assert line.status == "warn"
    assert "2 wheels share cv2" in line.detail and "opencv-python 4.13.0.90" in line.detail
    assert line.fix.startswith("keep one: pip uninstall opencv-python &&")
