"""Accuracy-targeted reuse against the baselines, on real detectors (issue 24).

For each clip/detector pair, side by side in one run:

* ground truth: the detector on every frame (cached in ``--cache``);
* **ours, online**: ``map(detect, reuse=ReuseTarget(T, agree="boxes"))``, no per-clip setting;
* **fixed interval** k (compute every k-th frame, the others reuse the last answer, as
  DeepStream's ``interval``), the best k that meets T, chosen with hindsight;
* **differencing** (Glimpse / Reducto): compute a frame when its pixel or edge feature has
  moved more than a threshold from the last computed frame's; the best feature and
  threshold that meet T, chosen with hindsight;
* **oracle**: the fewest frames any reuse-the-last schedule can compute and meet T,
  knowing every answer (exact, by dynamic programming).

Accuracy is the mean over frames of the per-frame F1 of boxes at IoU >= 0.5 against ground
truth (a frame with no boxes on either side counts 1), computed here independently of the
library's ``agree="boxes"``. "filtered" is the share of frames whose detector call was
skipped; every verification call of ours counts as a call. Ours must meet T on every pair,
filter at least as much as the best interval and the best differencing, and >= 0.8x the
oracle.

``--time`` also times the whole pipeline (decode included) with the real detector on 2
worker threads: every frame vs ours, interleaved, the best of ``--repeats`` each, and
prints the speed-up against the one its call count allows (the goal: >= 0.8x). A third
run computes the frames ours computed, known in advance, in a plain pipeline: what is
left when no decision is made online (decoding, start-up, batches of uneven work).

At the end, ours against what a user can deploy without the answers: one interval, or one
differencing feature and threshold, for every pair run (the best such setting with
hindsight over the pairs, not per pair). ``--limits`` prints where no online rule can
match the per-pair hindsight interval: where it computes one frame of a clip, a rule that
matches it must pick that one frame from the pixels alone, and at a *trap* the answer is
exactly that of another detector on the same clip whose shared answer misses the target
(see :func:`indistinguishable`).

``montage`` is every clip one after the other at 640x360 (1662 frames, made once into
``--cache``): a long input of many shots, where what was learned on one shot must not
be paid for in the next.

Needs OpenCV 4.x (Haar, HOG) and facenet-pytorch (MTCNN); see ``detectors.py``.

Run:  python benchmarks/reuse_target.py [--pairs carphone:haar-face,...] [--time] [--limits]
"""

from __future__ import annotations

import argparse
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import xxhash

from hyperframes import Pipeline
from hyperframes.io.video import VideoSource
from hyperframes.modes import ReuseTarget

HERE = Path(__file__).resolve().parent
PAIRS = (
    "carphone:haar-face",
    "carphone:haar-eyes",
    "carphone:haar-profile",
    "carphone:mtcnn-face",
    "bikes:hog-people",
    "bikes:haar-face",
    "bikes:haar-profile",
    "bigbuckbunny:haar-face",
    "testvideo:hog-people",
    "goldeneye:hog-people",
    "goldeneye:haar-face",
    "fades:haar-face",
    "fades:hog-people",
    "montage:haar-face",
    "montage:hog-people",
)
TARGETS = (0.90, 0.95)
BATCH: int | None = None  # frames per batch: None sizes them by bytes, as users get


MONTAGE = ("carphone", "bikes", "bigbuckbunny", "testvideo", "goldeneye", "fades", "counter")
"""The clips of ``montage``, one after the other: a long input of many shots, as users' are."""
MONTAGE_SIZE = (640, 360)
CACHE = Path("/tmp/hyperframes-reuse-truth")
"""Where the truths (the detector on every frame) and the montage are kept."""


def clip_path(name: str, cache: Path = CACHE) -> Path:
    """The clip's file; ``montage`` is made (once, into ``cache``) from the others."""
    from clips import clip_folder, scene_folder  # this folder's helper: the real clips

    if name == "montage":
        return montage(cache)
    scenes = scene_folder()
    files = {
        "carphone": clip_folder() / "carphone_pristine.mp4",
        "bikes": clip_folder() / "bikes.mp4",
        "bigbuckbunny": clip_folder() / "bigbuckbunny.mp4",
        "testvideo": scenes / "testvideo.mp4",
        "goldeneye": scenes / "goldeneye-vfr-drop3.mp4",
        "fades": scenes / "fades.mp4",
        "counter": scenes / "counter.mp4",
    }
    return files[name]


def montage(cache: Path) -> Path:
    """Every clip of :data:`MONTAGE` scaled to :data:`MONTAGE_SIZE`, one after the other,
    in an H.264 file (made with hyperframes' own sink); a missing path if a clip is."""
    path = cache / "montage.mp4"
    parts = [clip_path(name) for name in MONTAGE]
    if path.is_file() or not all(p.is_file() for p in parts):
        return path
    from hyperframes import VideoSink

    scaled = [
        cv2.resize(f, MONTAGE_SIZE, interpolation=cv2.INTER_AREA)
        for part in parts
        for f in load(part, None)
    ]
    cache.mkdir(parents=True, exist_ok=True)
    sink = VideoSink(path, codec="libx264", crf=18, preset="veryfast", fps=25)
    Pipeline.from_frames(np.stack(scaled)).to(sink).run()
    return path


def load(path: Path, limit: int | None) -> np.ndarray:
    source = VideoSource(path, stop=limit)
    count = source.length or limit or 100_000
    out = np.empty((count, *source.spec.shape), np.uint8)
    n = len(source.read_into(out))
    source.close()
    return out[:n]


# -- scoring (independent of the library's agree="boxes") -------------------------------


def f1(pred: np.ndarray, true: np.ndarray, iou: float = 0.5) -> float:
    if not len(pred) and not len(true):
        return 1.0
    if not len(pred) or not len(true):
        return 0.0
    pairs = []
    for i, a in enumerate(pred):
        for j, b in enumerate(true):
            w = min(a[2], b[2]) - max(a[0], b[0])
            h = min(a[3], b[3]) - max(a[1], b[1])
            inter = max(0.0, w) * max(0.0, h)
            union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
            if union > 0 and inter / union >= iou:
                pairs.append((inter / union, i, j))
    used_i, used_j, matched = set(), set(), 0
    for _, i, j in sorted(pairs, reverse=True):
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            matched += 1
    return 2 * matched / (len(pred) + len(true))


def accuracy(answers: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> float:
    return float(np.mean([f1(a, t) for a, t in zip(answers, truth, strict=True)]))


def reuse_last(computed: np.ndarray, truth: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Answers when only ``computed`` frames run and the rest reuse the last computed."""
    out, last = [], truth[0]
    for i, t in enumerate(truth):
        if computed[i]:
            last = t
        out.append(last)
    return out


# -- baselines, each at its best setting with hindsight ----------------------------------


def best(
    masks: Callable[[], list[np.ndarray]], truth: Sequence[np.ndarray], target: float
) -> tuple[float, float]:
    """(filtered, accuracy) of the mask meeting ``target`` that computes fewest frames."""
    found = (0.0, 1.0)
    for mask in masks():
        mask[0] = True
        filtered = 1 - mask.mean()
        if filtered <= found[0]:
            continue
        acc = accuracy(reuse_last(mask, truth), truth)
        if acc >= target:
            found = (float(filtered), acc)
    return found


def interval_mask(n: int, k: int) -> np.ndarray:
    """Every ``k``-th of ``n`` frames computed."""
    return np.arange(n) % k == 0


def interval_masks(n: int) -> list[np.ndarray]:
    return [interval_mask(n, k) for k in range(1, min(n, 300) + 1)]


def features(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Reducto's cheap features per frame: downscaled grey pixels and Canny edges."""
    grey = np.stack([cv2.resize(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), (160, 90)) for f in frames])
    edges = np.stack([cv2.Canny(g, 100, 200) > 0 for g in grey])
    return {"pixel": grey.astype(np.int16), "edge": edges}


def distance(feats: dict[str, np.ndarray], kind: str, a: int, b: int) -> float:
    """How far frame ``b`` moved from frame ``a`` by one of :func:`features`."""
    x, y = feats[kind][a], feats[kind][b]
    if kind == "pixel":
        return float((np.abs(x - y) > 20).mean())
    return float(abs(x.mean() - y.mean()) + (x != y).mean())


def differencing_mask(feats: dict[str, np.ndarray], kind: str, threshold: float) -> np.ndarray:
    """The frames computed when a frame is computed once it moved more than ``threshold``
    from the last computed frame."""
    n = len(feats[kind])
    mask, last = np.zeros(n, bool), 0
    mask[0] = True
    for i in range(1, n):
        if distance(feats, kind, last, i) > threshold:
            mask[i], last = True, i
    return mask


def differencing_masks(feats: dict[str, np.ndarray]) -> Callable[[], list[np.ndarray]]:
    """Each feature at thresholds spread over the quantiles of this clip's own steps."""

    def masks() -> list[np.ndarray]:
        out = []
        for kind in feats:
            n = len(feats[kind])
            adjacent = [distance(feats, kind, i - 1, i) for i in range(1, n)]
            for t in np.unique(np.quantile([*adjacent, 0.0], np.linspace(0, 1, 60))):
                out.append(differencing_mask(feats, kind, t))
        return out

    return masks


def oracle(truth: Sequence[np.ndarray], target: float) -> float:
    """The most frames any reuse-last schedule can skip while meeting ``target``, knowing
    every answer: exact, by dynamic programming over the frames computed (frame 0 always)."""
    n = len(truth)
    # gain[c, d]: summed F1 of frames c..d-1 when frame c is computed and serves them
    score = np.zeros((n, n + 1))
    for c in range(n):
        row = [f1(truth[c], truth[i]) for i in range(c, n)]
        score[c, c + 1 :] = np.cumsum(row)
    need = target * n - 1e-9
    best = score[:, n].copy()  # best[c]: frame c computed last, serving to the end
    for calls in range(1, n + 1):
        if best[0] >= need:
            return 1 - calls / n
        # one more call: frame c computed, next computed frame d > c
        ahead = np.full(n, -np.inf)
        for c in range(n - 1):
            ahead[c] = np.max(score[c, c + 1 : n] + best[c + 1 :])
        best = np.maximum(best, ahead)
    return 0.0


# -- what a user can deploy: one setting for every clip ----------------------------------

KS = sorted({round(k) for k in np.geomspace(1, 300, 40)})
"""The intervals tried as one setting for every pair."""
LEVELS = (0.0, *np.geomspace(1e-3, 0.9, 39))
"""The differencing thresholds tried as one setting for every pair (each feature's units)."""


def fixed_settings(
    feats: dict[str, np.ndarray], truth: Sequence[np.ndarray]
) -> dict[str, tuple[float, float]]:
    """(filtered, accuracy) on one pair of each setting chosen without its answers: every
    interval of :data:`KS`, each differencing feature (``feats``, of :func:`features`) at
    each of :data:`LEVELS`. A user who runs a detector over videos not yet seen picks one
    such setting for all."""
    masks = {f"interval k={k}": interval_mask(len(truth), k) for k in KS}
    for kind in feats:
        for t in LEVELS:
            masks[f"{kind} > {t:.3g}"] = differencing_mask(feats, kind, t)
    return {
        name: (1 - float(mask.mean()), accuracy(reuse_last(mask, truth), truth))
        for name, mask in masks.items()
    }


def deployable(
    settings: dict[str, dict[str, tuple[float, float]]],
    ours: dict[str, tuple[float, float]],
    target: float,
) -> None:
    """Print, for ``target``, ours against the best one setting for every pair: of the
    intervals and of the differencing settings, the one that filters most among those
    meeting the target on as many pairs as ours, and the one meeting it on the most."""
    pairs = list(ours)
    met = sum(acc >= target for _, acc in ours.values())
    mean = float(np.mean([f for f, _ in ours.values()]))
    print(
        f"T {target:.2f}, one setting for all {len(pairs)} pairs: ours met {met}, "
        f"{mean:.3f} filtered on average"
    )
    for family in ("interval", "differencing"):
        rows = []
        for name in settings[pairs[0]]:
            if name.startswith("interval") != (family == "interval"):
                continue
            got = [settings[p][name] for p in pairs]
            rows.append(
                (sum(acc >= target for _, acc in got), float(np.mean([f for f, _ in got])), name)
            )
        as_many = [r for r in rows if r[0] >= met]
        most = max(rows)
        if as_many:
            n, f, name = max(as_many, key=lambda r: r[1])
            print(f"  best {family} meeting it on >= {met}: {name}: met {n}, {f:.3f} filtered")
        else:
            print(f"  no {family} setting meets it on {met} pairs")
        print(f"  {family} meeting it on the most pairs: {most[2]}: met {most[0]}, {most[1]:.3f}")


def indistinguishable(truths: dict[str, dict[str, Sequence[np.ndarray]]], target: float) -> None:
    """Print where no online rule can match the hindsight interval. Where the best
    interval computes one frame of a clip for one detector, a rule that matches it makes
    one call there, at a frame it picks before any answer, so from the pixels alone: the
    same frame for every detector on that clip. A frame is a trap if sharing its answer
    misses ``target`` for this detector, or for another whose answer there is exactly the
    same (the rule sees the same, so it stops there too). Where every frame is a trap, no
    rule, however it picks, matches the interval on every pair."""
    for clip, by_name in truths.items():
        for name, truth in by_name.items():
            n = len(truth)
            if len(by_name) < 2 or best(partial(interval_masks, n), truth, target)[0] < 1 - 1.5 / n:
                continue  # no other detector, or the best interval computes more than one frame
            misses: dict[tuple[str, bytes], bool] = {}  # (detector, answer): shared, misses?
            trapped = 0
            for i in range(n):
                for other, t in by_name.items():
                    if not np.array_equal(t[i], truth[i]):
                        continue  # the rule would see another answer here
                    key = (other, t[i].tobytes())
                    if key not in misses:
                        misses[key] = accuracy([t[i]] * n, t) < target
                    if misses[key]:
                        trapped += 1
                        break
            print(
                f"T {target:.2f} {clip}: the best interval on {name} computes 1 frame of {n}; "
                f"{trapped} of the {n} are traps (detectors: {', '.join(by_name)})"
            )


# -- ours --------------------------------------------------------------------------------


class Lookup:
    """Stands in for the detector with its recorded answers, counting calls (the
    recorded answers are what the deterministic detector returns on those frames)."""

    def __init__(self, frames: np.ndarray, truth: Sequence[np.ndarray]) -> None:
        pairs = zip(frames, truth, strict=True)
        self.by_hash = {xxhash.xxh3_64_intdigest(f.tobytes()): t for f, t in pairs}
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, frames: np.ndarray) -> list[np.ndarray]:
        with self._lock:
            self.calls += len(frames)
        return [self.by_hash[xxhash.xxh3_64_intdigest(f.tobytes())] for f in frames]


def ours(
    frames: np.ndarray, truth: Sequence[np.ndarray], target: float, seed: int = 0
) -> tuple[float, float, dict]:
    from hyperframes.hyper.reuse.target import TargetReuse

    TargetReuse.__init__.__kwdefaults__["seed"] = seed  # the verification sample's seed
    fn = Lookup(frames, truth)
    got: dict[int, np.ndarray] = {}
    report = (
        Pipeline.from_frames(frames, batch_size=BATCH)
        .map(fn, reuse=ReuseTarget(target, agree="boxes"), into="det", workers=2, name="detect")
        .for_each(
            lambda ids, _f, meta: got.update(zip(ids.tolist(), meta["det"], strict=True)),
            batched=True,
            meta=True,
        )
        .run()
    )
    figures = report.extra["detect"]
    assert figures["calls"] == fn.calls, (figures["calls"], fn.calls)
    answers = [got[i] for i in range(len(frames))]
    return 1 - fn.calls / len(frames), accuracy(answers, truth), figures


# -- timing with the real detector -------------------------------------------------------


class PerThread:
    """One detector per worker thread (a Haar cascade is not safe to share)."""

    def __init__(self, make: Callable[[], Callable]) -> None:
        self.make, self.local = make, threading.local()

    def __call__(self, frames: np.ndarray) -> list[np.ndarray]:
        det = getattr(self.local, "det", None)
        if det is None:
            det = self.local.det = self.make()
        return det(frames)


def timed(
    path: Path,
    limit: int | None,
    make: Callable,
    target: float | None,
    only: set[int] | None = None,
    computed: set[int] | None = None,
) -> tuple[float, int]:
    """Wall time and calls of the pipeline with the detector on 2 workers: on every frame,
    with ``reuse_target`` (the frames it computed go into ``computed``, by content hash),
    or on the frames ``only`` names (by content hash), the others answered empty."""
    calls = [0]
    inner = PerThread(make)

    def detect(frames: np.ndarray) -> list[np.ndarray]:
        rows = list(range(len(frames)))
        if only is not None:
            rows = [k for k in rows if xxhash.xxh3_64_intdigest(frames[k].tobytes()) in only]
        calls[0] += len(rows)
        out = [np.zeros((0, 4))] * len(frames)
        for k, answer in zip(rows, inner(frames[rows]) if rows else [], strict=True):
            out[k] = answer
        return out

    found = computed if computed is not None else set()

    def note(ids: np.ndarray, frames: np.ndarray, meta: dict) -> None:
        for k in np.flatnonzero(meta["answer_of"] == ids):
            found.add(xxhash.xxh3_64_intdigest(frames[k].tobytes()))

    pipe = Pipeline.from_source(VideoSource(path, stop=limit), batch_size=BATCH)
    if target is None:
        pipe = pipe.map(detect, workers=2, into="det")
    else:
        pipe = pipe.map(detect, workers=2, into="det", reuse=ReuseTarget(target, agree="boxes"))
        if computed is not None:
            pipe = pipe.for_each(note, batched=True, meta=True)
    t0 = time.perf_counter()
    pipe.run()
    return time.perf_counter() - t0, calls[0]


def main() -> None:
    from detectors import DETECTORS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pairs", default=",".join(PAIRS), help="clip:detector,...")
    ap.add_argument("--frames", type=int, default=None, help="at most this many frames a clip")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--time", action="store_true", help="also time the real detector")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each, interleaved")
    ap.add_argument(
        "--seeds", type=int, default=1, help="runs of ours, each with its own verification sample"
    )
    ap.add_argument(
        "--limits",
        action="store_true",
        help="also print where no online rule can match the hindsight interval",
    )
    args = ap.parse_args()
    cv2.setNumThreads(1)
    args.cache.mkdir(parents=True, exist_ok=True)
    print(
        f"{'pair':<26}{'T':>5}{'frames':>7} | filtered: {'ours':>6}{'interval':>9}"
        f"{'diff':>7}{'oracle':>7} | acc: {'ours':>6} | {'vs int':>6}{'vs diff':>8}"
        f"{'vs orc':>7}  bound   held"
    )
    totals = {"rows": 0, "met": 0, "runs": 0, "interval": 0, "diff": 0, "oracle": 0}
    truths: dict[str, dict[str, Sequence[np.ndarray]]] = {}
    settings: dict[str, dict[str, tuple[float, float]]] = {}  # pair -> setting -> figures
    ours_by_target: dict[float, dict[str, tuple[float, float]]] = {t: {} for t in TARGETS}
    for pair in args.pairs.split(","):
        clip, name = pair.split(":")
        path = clip_path(clip, args.cache)
        if not path.is_file():
            print(f"{pair:<26} skipped: {path} not found")
            continue
        frames = load(path, args.frames)
        cached = args.cache / f"{clip}.{name}.{len(frames)}.{cv2.__version__}.pkl"
        if cached.is_file():
            truth = pickle.loads(cached.read_bytes())
        else:
            det = DETECTORS[name]()
            truth = [det(f[None])[0] for f in frames]
            cached.write_bytes(pickle.dumps(truth))
        truths.setdefault(clip, {})[name] = truth
        feats = features(frames)
        settings[pair] = fixed_settings(feats, truth)
        diff = differencing_masks(feats)
        for target in TARGETS:
            seeded = [ours(frames, truth, target, seed) for seed in range(args.seeds)]
            ours_f, ours_acc, figures = seeded[0]
            ours_by_target[target][pair] = (ours_f, ours_acc)
            met = sum(acc >= target for _, acc, _ in seeded)
            totals["rows"] += 1
            totals["met"] += met
            totals["runs"] += args.seeds
            int_f, _ = best(partial(interval_masks, len(frames)), truth, target)
            diff_f, _ = best(diff, truth, target)
            orc_f = oracle(truth, target)
            totals["interval"] += ours_f >= int_f - 1e-9
            totals["diff"] += ours_f >= diff_f - 1e-9
            totals["oracle"] += ours_f >= 0.8 * orc_f
            held = (
                ours_acc >= target
                and ours_f >= int_f - 1e-9
                and ours_f >= diff_f - 1e-9
                and ours_f >= 0.8 * orc_f
            )
            print(
                f"{pair:<26}{target:>5.2f}{len(frames):>7} | {'':>10}{ours_f:>6.3f}{int_f:>9.3f}"
                f"{diff_f:>7.3f}{orc_f:>7.3f} | {'':>5}{ours_acc:>6.3f} | "
                f"{ours_f - int_f:>+6.3f}{ours_f - diff_f:>+8.3f}{ours_f / max(orc_f, 1e-9):>7.2f}"
                f"  {figures['agreement_bound']!s:>6}  {'yes' if held else 'NO'}",
                flush=True,
            )
            if args.seeds > 1:
                mean_f = np.mean([f for f, _, _ in seeded])
                low = min(acc for _, acc, _ in seeded)
                print(
                    f"{'':<26}{args.seeds} seeds: target met {met}/{args.seeds}, "
                    f"filtered {mean_f:.3f} on average, lowest accuracy {low:.3f}",
                    flush=True,
                )
            if args.time:
                DETECTORS[name]()  # imports and first loads are not the loop's to pay
                chosen: set[int] = set()
                runs = [
                    (timed(path, args.frames, DETECTORS[name], None),
                     timed(path, args.frames, DETECTORS[name], target, computed=chosen),
                     timed(path, args.frames, DETECTORS[name], None, only=chosen))
                    for _ in range(args.repeats)
                ]  # fmt: skip
                every, n = min(r[0] for r in runs)
                wall, calls = min(r[1] for r in runs)
                known, _ = min(r[2] for r in runs)
                allowed = n / max(calls, 1)
                print(
                    f"{'':<26}time: every frame {every:.2f} s, ours {wall:.2f} s: speed-up "
                    f"{every / wall:.2f}x of {allowed:.2f}x allowed = {every / wall / allowed:.2f}"
                    f"; the frames ours computed, chosen in advance: {known:.2f} s "
                    f"(speed-up {every / known:.2f}x)",
                    flush=True,
                )
    print(
        f"target met in {totals['met']} of {totals['runs']} runs; on the first seed's "
        f"{totals['rows']} rows ours filtered >= the best interval on {totals['interval']}, "
        f">= the best differencing on {totals['diff']}, >= 0.8x the oracle on {totals['oracle']}"
    )
    for target in TARGETS:
        if ours_by_target[target]:
            deployable(settings, ours_by_target[target], target)
    if args.limits:
        for target in TARGETS:
            indistinguishable(truths, target)


if __name__ == "__main__":
    main()
