"""``hyperframes doctor``: is this machine ready, and what to do where it is not.

Each check gives one line, ``ok``, ``warn`` or ``fail``, with what was found and, where
it is not ok, what to do. The exit code is 1 when any check fails, else 0. Optional
packages (Ray, torch) are looked up without importing them here; only the GPU check
imports torch, in a child process, so a broken CUDA install cannot crash the doctor.

Longer than 300 lines: one short function a check, read as the list they are.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from .._version import __version__
from .common import print_json

Status = Literal["ok", "warn", "fail"]
GIB = 2**30
DECODERS = ("h264", "hevc", "vp9", "av1", "ffv1", "mpeg4", "prores")
SHM_WARN_BYTES = 1 * GIB
DISK_WARN_BYTES = 5 * GIB
MEMORY_WARN_BYTES = 2 * GIB
GPU_PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check PyAV/FFmpeg, disk, memory, LMDB, Ray, torch, GPU")
    p.add_argument("--output", default=".", help="the folder outputs will go to (free space)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    checks = run_checks(Path(args.output))
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        print_json({"ok": not failed, "checks": [asdict(c) for c in checks]})
    else:
        for c in checks:
            fix = f"  -> {c.fix}" if c.fix else ""
            print(f"{c.status:<5} {c.name:<12} {c.detail}{fix}")
    return 1 if failed else 0


def run_checks(output: Path) -> list[Check]:
    """Every check, in order; a check that raises becomes a ``fail`` line."""
    probes: list[tuple[str, Callable[[], Check]]] = [
        ("python", check_python),
        ("pyav", check_pyav),
        ("ffmpeg", check_ffmpeg),
        ("opencv", check_opencv),
        ("encoders", check_encoders),
        ("decoders", check_decoders),
        ("/dev/shm", check_shm),
        ("output", lambda: check_output(output)),
        ("cpu", check_cpu),
        ("memory", check_memory),
        ("lmdb", check_lmdb),
        ("ray", lambda: check_optional("ray", "ray", "--executor ray and --chunks")),
        ("torch", lambda: check_optional("torch", "gpu", "GPU stages")),
        ("starlette", lambda: check_optional("starlette", "view", "hyperframes view and --view")),
        ("uvicorn", lambda: check_optional("uvicorn", "view", "hyperframes view and --view")),
        ("matplotlib", lambda: check_optional("matplotlib", "plot", "--plot and --plot-dir")),
        ("pyarrow", lambda: check_optional("pyarrow", "parquet", "map --out FILE.parquet")),
        ("gpu", check_gpu),
    ]
    out = []
    for name, probe in probes:
        try:
            out.append(probe())
        except Exception as exc:
            out.append(Check(name, "fail", f"check failed: {type(exc).__name__}: {exc}"))
    return out


def check_python() -> Check:
    return Check("python", "ok", f"{platform.python_version()}, hyperframes {__version__}")


def check_pyav() -> Check:
    try:
        import av
    except ImportError as exc:
        return Check("pyav", "fail", f"cannot import av: {exc}", "pip install 'av>=12'")
    major = int(str(av.__version__).split(".")[0])
    if major < 12:
        return Check("pyav", "fail", f"PyAV {av.__version__} is too old", "pip install 'av>=12'")
    return Check("pyav", "ok", f"PyAV {av.__version__}")


def check_ffmpeg() -> Check:
    import av

    codec = av.library_versions.get("libavcodec", ())
    libavcodec = ".".join(map(str, codec)) or "?"
    version = getattr(av, "ffmpeg_version_info", None) or "unknown"
    return Check("ffmpeg", "ok", f"FFmpeg {version} (libavcodec {libavcodec}), as linked by PyAV")


OPENCV_DISTRIBUTIONS = (
    "opencv-python-headless", "opencv-python",
    "opencv-contrib-python-headless", "opencv-contrib-python",
)  # fmt: skip
"""The wheels that each install the one ``cv2`` module."""


def check_opencv() -> Check:
    """OpenCV's version, whether it has the classic detectors (4.x has them, 5.0 dropped
    them), and whether two OpenCV wheels write one ``cv2`` (the last installed wins, and
    removing either breaks it)."""
    from importlib import metadata

    installed = []
    for name in OPENCV_DISTRIBUTIONS:
        try:
            installed.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    try:
        import cv2
    except ImportError as exc:
        fix = "pip install --force-reinstall 'opencv-python-headless>=4.8,<5'"
        return Check("opencv", "fail", f"cannot import cv2: {exc}", fix)
    detail = f"OpenCV {cv2.__version__}"
    if len(installed) > 1:
        keep = installed[0].split()[0]
        others = " ".join(i.split()[0] for i in installed[1:])
        fix = f"keep one: pip uninstall {others} && pip install --force-reinstall {keep}"
        return Check("opencv", "warn", f"{detail}; {len(installed)} wheels share cv2: "
                     f"{', '.join(installed)}", fix)  # fmt: skip
    if not hasattr(cv2, "CascadeClassifier") or not hasattr(cv2, "HOGDescriptor"):
        fix = "for Haar cascades and the HOG detector: pip install 'opencv-python-headless<5'"
        return Check("opencv", "warn", f"{detail}, without the classic detectors", fix)
    return Check("opencv", "ok", f"{detail}, with the classic detectors (Haar, HOG)")


def _available(names: tuple[str, ...], mode: Literal["r", "w"]) -> tuple[list[str], list[str]]:
    from av.codec import Codec

    have, missing = [], []
    for name in names:
        try:
            Codec(name, mode)
            have.append(name)
        except Exception:
            missing.append(name)
    return have, missing


def _codec_check(
    name: str, names: tuple[str, ...], mode: Literal["r", "w"], needed: set[str]
) -> Check:
    have, missing = _available(names, mode)
    detail = ", ".join(have) or "none"
    if not missing:
        return Check(name, "ok", detail)
    status: Status = "fail" if needed & set(missing) else "warn"
    fix = (
        "the PyAV wheels from PyPI bundle an FFmpeg with these; reinstall with "
        "pip install --force-reinstall av, or build PyAV against an FFmpeg that has them"
    )
    return Check(name, status, f"{detail}; missing {', '.join(missing)}", fix)


def check_encoders() -> Check:
    from ..io.video_sink import ENCODERS

    return _codec_check("encoders", tuple(ENCODERS), "w", {"libx264", "ffv1"})


def check_decoders() -> Check:
    return _codec_check("decoders", DECODERS, "r", {"h264"})


def _free(path: Path) -> int:
    return shutil.disk_usage(path).free


def check_shm() -> Check:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        return Check(
            "/dev/shm",
            "warn",
            "not present",
            "the processes executor needs POSIX shared memory; use the threads executor",
        )
    free = _free(shm)
    detail = f"{free / GIB:.1f} GiB free"
    if free < SHM_WARN_BYTES:
        return Check(
            "/dev/shm",
            "warn",
            detail,
            "the processes executor keeps its frame pools here; in Docker run with "
            "--shm-size=2g, or lower batch_size",
        )
    return Check("/dev/shm", "ok", detail)


def check_output(folder: Path) -> Check:
    folder = folder.resolve()
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        return Check("output", "fail", f"{probe} is not writable", "choose another folder")
    free = _free(probe)
    detail = f"{folder}: {free / GIB:.1f} GiB free"
    if free < DISK_WARN_BYTES:
        return Check("output", "warn", detail, "long outputs may not fit; free some space")
    return Check("output", "ok", detail)


def check_cpu() -> Check:
    total = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else total
    detail = f"{usable} usable of {total}"
    if usable < 2:
        return Check("cpu", "warn", detail, "stages cannot overlap on one core; use workers=1")
    return Check("cpu", "ok", detail)


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            out[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def check_memory() -> Check:
    info = _meminfo()
    total = info.get("MemTotal") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    available = info.get("MemAvailable")
    detail = f"{total / GIB:.1f} GiB"
    if available is None:
        return Check("memory", "ok", detail)
    detail += f", {available / GIB:.1f} GiB available"
    if available < MEMORY_WARN_BYTES:
        return Check(
            "memory",
            "warn",
            detail,
            "pools are preallocated; lower batch_size or slots, or downscale frames",
        )
    return Check("memory", "ok", detail)


def check_lmdb() -> Check:
    try:
        import lmdb
    except ImportError as exc:
        return Check("lmdb", "fail", f"cannot import lmdb: {exc}", "pip install 'lmdb>=1.4'")
    library = ".".join(map(str, lmdb.version()))
    return Check("lmdb", "ok", f"py-lmdb {lmdb.__version__}, LMDB {library}")


def check_optional(module: str, extra: str, used_for: str) -> Check:
    """Whether ``module`` is importable, found without importing it; a missing one is a
    warning naming what needs it and the install line (it is optional until then)."""
    import importlib.metadata  # 15-20 ms: here, not in every command's start

    if importlib.util.find_spec(module) is None:
        return Check(
            module,
            "warn",
            f"not installed: {used_for} need it (pip install 'hyperframes-engine[{extra}]')",
        )
    try:
        version = importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown version"
    return Check(module, "ok", f"{version} importable")


def check_gpu() -> Check:
    """A GPU as torch sees it (in a child process), else as the NVIDIA driver lists it."""
    driver = _nvidia_gpus()
    if importlib.util.find_spec("torch") is not None:
        code = "import torch; print(torch.cuda.device_count())"
        try:
            out = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=GPU_PROBE_TIMEOUT_S,
                check=True,
            )
            count = int(out.stdout.strip().splitlines()[-1])
        except (subprocess.SubprocessError, ValueError, IndexError) as exc:
            return Check("gpu", "warn", f"torch failed to start: {exc}", "reinstall torch")
        if count:
            return Check("gpu", "ok", f"{count} CUDA device(s) visible to torch")
        if driver:
            return Check(
                "gpu",
                "warn",
                f"the driver lists {len(driver)} GPU(s) but torch sees none",
                "install a CUDA build of torch that matches the driver",
            )
        return Check("gpu", "ok", "none visible; GPU stages run on the CPU")
    if driver:
        return Check("gpu", "ok", f"{len(driver)} GPU(s) from the driver; torch not installed")
    return Check("gpu", "ok", "none visible; GPU stages run on the CPU")


def _nvidia_gpus() -> list[str]:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        out = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=10)
    except (subprocess.SubprocessError, OSError):
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
